"""``python -m tests.faults.killer MODULE ARG...``: ``python -m MODULE ARG...`` that kills
itself with SIGKILL at a chosen write, as ``kill -9`` (a crash, a lost machine) would at the
worst moment.

The kill point comes in ``$TCNLM_FAULT_KILL`` as JSON ``{"hook": ..., "match": ...,
"nth": N}``: the N-th call (default the first) of a hooked function whose destination path
contains ``match`` (a temporary ``.<name>.<pid>.tmp`` counts as the file it is written
for). Hooks:

- ``write``: the first write of the file by any of ``os.replace`` and ``os.rename``
  (killed before the rename: the temporary file written, the target not yet replaced),
  ``shutil.copyfile`` (killed with half of it copied) and ``Path.write_bytes`` (killed with
  half of it written), whichever the command writes it with;
- ``merge``: TensorFlow's merge of a checkpoint's shards, killed before it (the shards
  written to ``<prefix>_temp/``, no ``<prefix>.index`` yet);
- ``tf_rename``: TensorFlow's rename of a file it wrote atomically (the ``checkpoint``
  state file), killed before it.
"""
from __future__ import annotations

import json
import os
import pathlib
import runpy
import shutil
import signal
import sys
from typing import Callable

from tests.faults.execute import KILL_ENV
from tests.faults.files import written_as


def _die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _counter(spec: dict) -> Callable[[object], bool]:
    """Whether a call with this destination is the one to kill at."""
    seen = [0]

    def due(destination) -> bool:
        if hasattr(destination, "numpy"):
            destination = destination.numpy()
        if isinstance(destination, bytes):
            destination = destination.decode("utf-8", "replace")
        if spec["match"] not in written_as(str(destination)):
            return False
        seen[0] += 1
        return seen[0] == spec.get("nth", 1)
    return due


def _torn(destination, data: bytes) -> None:
    """Half of ``data`` written to ``destination``, then the kill."""
    with open(destination, "wb") as handle:
        handle.write(data[:len(data) // 2])
        handle.flush()
        os.fsync(handle.fileno())
    _die()


def _install_write(due: Callable[[object], bool]) -> None:
    replace, rename = os.replace, os.rename
    copyfile, write_bytes = shutil.copyfile, pathlib.Path.write_bytes

    def renamer(original):
        def renamed(src, dst, *args, **kwargs):
            if due(dst):
                _die()
            return original(src, dst, *args, **kwargs)
        return renamed

    def copied(src, dst, *args, **kwargs):
        if due(dst):
            _torn(dst, pathlib.Path(src).read_bytes())
        return copyfile(src, dst, *args, **kwargs)

    def written(self, data):
        if due(self):
            _torn(self, bytes(data))
        return write_bytes(self, data)

    os.replace, os.rename = renamer(replace), renamer(rename)
    shutil.copyfile, pathlib.Path.write_bytes = copied, written


def _install_merge(due: Callable[[object], bool]) -> None:
    from tensorflow.python.ops import gen_io_ops
    merge = gen_io_ops.merge_v2_checkpoints

    def merged(checkpoint_prefixes, destination_prefix, *args, **kwargs):
        if due(destination_prefix):
            _die()
        return merge(checkpoint_prefixes, destination_prefix, *args, **kwargs)
    gen_io_ops.merge_v2_checkpoints = merged


def _install_tf_rename(due: Callable[[object], bool]) -> None:
    from tensorflow.python.lib.io import file_io
    rename = file_io.rename

    def tf_renamed(oldname, newname, *args, **kwargs):
        if due(newname):
            _die()
        return rename(oldname, newname, *args, **kwargs)
    file_io.rename = tf_renamed


HOOKS = {"write": _install_write, "merge": _install_merge, "tf_rename": _install_tf_rename}


def main() -> None:
    spec = json.loads(os.environ.get(KILL_ENV) or "{}")
    if spec:
        HOOKS[spec["hook"]](_counter(spec))
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
