"""The files of a fault case: digests before and after, the damage done to a file, whether a
file reads back whole, and what a command left behind (temporary, half-written and orphaned
files)."""
from __future__ import annotations

import fnmatch
import hashlib
import json
import random
import re
import shutil
from pathlib import Path
from typing import Callable, Iterable

#: the file that fills a full disk (:mod:`tests.faults.mounts`): never a file of the case
FILLER = ".faults-filler"
#: files a command may leave or rewrite at will: the run lock (holder and process id)
VOLATILE = (".lock", ".*.lock")


def written_as(path: str) -> str:
    """The file a temporary file ``.<name>.<pid>.tmp`` (or ``.<name>.<host>~<pid>.tmp``) is
    written for (``<name>`` beside it), else ``path``: a fault aimed at a file also hits the
    temporary file that an atomic write of it goes through."""
    name = Path(path).name
    found = re.match(r"^\.(.+)\.(?:[^.~/]+~)?\d+\.tmp$", name)
    if found:
        return str(Path(path).with_name(found.group(1)))
    if name.startswith(".") and name.endswith(".tmp"):
        return str(Path(path).with_name(name[1:-len(".tmp")]))
    return str(path)


def digests(roots: Iterable[Path]) -> dict[str, str]:
    """``{path: SHA-1}`` of every regular file under ``roots`` (the filler left out)."""
    found = {}
    for root in roots:
        paths = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in paths:
            if path.is_file() and not path.is_symlink() and path.name != FILLER:
                found[str(path)] = hashlib.sha1(path.read_bytes()).hexdigest()
    return found


def relative(path: str, roots: Iterable[Path]) -> str:
    """``path`` relative to the root that holds it (for globs and for the report)."""
    for root in roots:
        if path == str(root) or path.startswith(str(root) + "/"):
            return str(Path(path).relative_to(root.parent))
    return path


def matches(path: str, patterns: Iterable[str], roots: Iterable[Path]) -> bool:
    """Whether ``path`` (relative to its root's parent, e.g. ``runs/done/metrics.json``)
    matches one of ``patterns`` (fnmatch: ``*`` also crosses ``/``)."""
    rel = relative(path, roots)
    name = Path(path).name
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p) for p in patterns)


def damaged(before: dict[str, str], after: dict[str, str], roots: list[Path],
            allowed: Callable[[str], bool]) -> list[str]:
    """The good files (of ``before``) that are missing or changed in ``after``, except those
    ``allowed`` to change, which must still read back whole."""
    lost = []
    for path, digest in before.items():
        if after.get(path) == digest or matches(path, VOLATILE, roots):
            continue
        if not allowed(path):
            state = "missing" if path not in after else "changed"
            lost.append(f"{relative(path, roots)} {state}")
        elif path in after and (why := unreadable(Path(path))):
            lost.append(f"{relative(path, roots)} rewritten but {why}")
    return lost


#: names of files that are temporary by their name: ``.<name>.<pid>.tmp``,
#: TensorFlow's ``checkpoint.tmp<hex>`` and ``ckpt-N_temp/``, an export's ``N.partial/``
TEMPORARY = re.compile(r"(\.tmp[0-9a-f]*$)|(_temp$)|(\.partial$)")


def debris(before: dict[str, str], after: dict[str, str], roots: list[Path]) -> list[str]:
    """What the command left that no reader should trust: new files with a temporary name
    (or inside a temporary folder), new empty or unreadable files, new checkpoints that
    their state file does not list and new halves of a checkpoint."""
    found = []
    for path in sorted(set(after) - set(before)):
        rel = relative(path, roots)
        if matches(path, VOLATILE, roots):
            continue
        if any(TEMPORARY.search(part) for part in Path(rel).parts):
            found.append(f"{rel} (temporary)")
        elif Path(path).stat().st_size == 0:
            found.append(f"{rel} (empty)")
        elif why := unreadable(Path(path)):
            found.append(f"{rel} ({why})")
    return found + orphans(before, after, roots)


def _listed(state: Path) -> set[str]:
    """The checkpoint names a TensorFlow ``checkpoint`` state file lists."""
    try:
        text = state.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return set()
    return {Path(m).name for m in re.findall(r'checkpoint_path: "([^"]+)"', text)}


def orphans(before: dict[str, str], after: dict[str, str], roots: list[Path]) -> list[str]:
    """New checkpoints (``<prefix>.index``) in a folder with a state file that does not list
    them, and new checkpoint halves (an index without data, or data without an index)."""
    found = []
    for path in sorted(set(after) - set(before)):
        p = Path(path)
        prefix = p.name.split(".")[0]
        if p.suffix == ".index" and re.search(r"-\d+$", prefix):
            state = p.parent / "checkpoint"
            if state.is_file() and prefix not in _listed(state):
                found.append(f"{relative(path, roots)} (a checkpoint the state file does "
                             "not list)")
            if not list(p.parent.glob(prefix + ".data-*")):
                found.append(f"{relative(path, roots)} (an index without its data)")
        elif ".data-" in p.name and not (p.parent / (prefix + ".index")).is_file():
            found.append(f"{relative(path, roots)} (data without its index)")
    return found


def unreadable(path: Path) -> str | None:
    """Why ``path`` does not read back whole as what its name says it is, or None (a file
    of a kind not checked counts as whole when it is not empty)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        return f"unreadable ({error.strerror})"
    if not data and path.name not in ("checkpoint",):
        return "empty"
    check = CHECKS.get(path.suffix)
    if check is None:
        return None
    try:
        check(path, data)
    except Exception as error:   # noqa: BLE001 - any failure to read back is the finding
        return f"does not read back ({type(error).__name__})"
    return None


def _json(path: Path, data: bytes) -> None:
    json.loads(data.decode("utf-8"))


def _png(path: Path, data: bytes) -> None:
    if not (data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(b"IEND\xaeB`\x82")):
        raise ValueError("not a whole PNG")


def _npz(path: Path, data: bytes) -> None:
    import numpy as np
    with np.load(path, allow_pickle=False) as arrays:
        for name in arrays.files:
            arrays[name]


def _npy(path: Path, data: bytes) -> None:
    import numpy as np
    np.load(path, allow_pickle=False)


def _h5(path: Path, data: bytes) -> None:
    import h5py
    with h5py.File(path, "r") as h5:
        for name in h5:
            h5[name][()]


def _text(path: Path, data: bytes) -> None:
    data.decode("utf-8")


def _checkpoint(path: Path, data: bytes) -> None:
    """Every tensor of the checkpoint whose index ``path`` is (their checksums checked)."""
    import tensorflow as tf
    reader = tf.train.load_checkpoint(str(path.with_suffix("")))
    for key in reader.get_variable_to_shape_map():
        reader.get_tensor(key)


CHECKS: dict[str, Callable[[Path, bytes], None]] = {
    ".json": _json, ".png": _png, ".npz": _npz, ".npy": _npy, ".h5": _h5, ".txt": _text,
    ".tsv": _text, ".md": _text, ".index": _checkpoint}


# ------------------------------------------------------------------------- damage
def truncate(path: Path) -> str:
    """Cut the file to half its size (a torn copy, a partial download)."""
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    return f"cut from {len(data)} to {len(data) // 2} bytes"


def garbage(path: Path) -> str:
    """Replace every byte with random ones (the same length)."""
    size = path.stat().st_size
    path.write_bytes(random.Random(path.name).randbytes(size))
    return f"{size} random bytes"


def flip(path: Path) -> str:
    """Invert 16 bytes in the middle (bit rot a checksum catches; the size is kept)."""
    data = bytearray(path.read_bytes())
    middle = max(0, len(data) // 2 - 8)
    data[middle:middle + 16] = bytes(255 - b for b in data[middle:middle + 16])
    path.write_bytes(bytes(data))
    return f"16 bytes inverted at byte {middle}"


def remove(path: Path) -> str:
    """Delete the file or folder."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    return "deleted"
