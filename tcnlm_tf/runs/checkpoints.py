"""Checkpointing Keras 3 models with ``tf.train.Checkpoint``.

``tf.train.Checkpoint(model=keras_model)`` follows only the attributes TensorFlow's object
graph can see; Keras 3 keeps sub-layers and weights held in Python lists (stacked LSTM
layers, an encoder's kernels, adaptive-softmax tail clusters) in its own tracker, which the
checkpoint does not follow, so such weights would silently be left out. Checkpoints here
therefore name every variable explicitly: :func:`variable_map` keys each one by its Keras
path (made unique with a suffix where two share a path), which is stable for a model built
from the same configuration.

A save cut short (a killed process, a lost machine) leaves files that no later save
overwrites or prunes; :func:`tidy_checkpoints` removes them, and lists again the complete
checkpoints that the folder's state file misses, when a training starts.
"""
from __future__ import annotations

import contextlib
import logging
import re
import shutil
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

import keras
import tensorflow as tf
from google.protobuf import text_format

from tcnlm_tf.data.corpus import write_text
from tcnlm_tf.errors import UserError

#: the state file of a checkpoint folder, which ``tf.train.CheckpointManager`` keeps
STATE_FILE = "checkpoint"
#: what a save cut short leaves in a checkpoint folder, besides a checkpoint's data files
#: without its index: the sharded write's temporary folder (``ckpt-<n>_temp/``, merged into
#: the checkpoint's files at the end), a file TensorFlow writes under another name and renames
#: when complete (``ckpt-<n>.index.tempstate<random>``), the state file's temporary copy
#: (``checkpoint.tmp<hex>``) and the temporary file of
#: :func:`tcnlm_tf.data.corpus.atomic_write` (``.<name>.<host>~<process id>.tmp``, or
#: ``.<name>.<process id>.tmp`` as earlier versions named it)
LEFTOVERS = re.compile(r".+-\d+_temp|.+\.tempstate\d+|checkpoint\.tmp[0-9a-f]+"
                       r"|\..+\.(?:[A-Za-z0-9-]+~)?\d+\.tmp")
#: a checkpoint's data file: its group is the checkpoint's name (``ckpt-<n>``)
DATA_FILE = re.compile(r"(.+-\d+)\.data-\d+-of-\d+")


class _PrunedAlready(logging.Filter):
    """Drops ``tf.train.CheckpointManager``'s warning that a file it prunes was gone."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Hit NotFoundError when deleting")


@contextlib.contextmanager
def quiet_pruning() -> Iterator[None]:
    """A block (a ``CheckpointManager.save``) without TensorFlow's warning that a file the
    manager prunes was deleted already: the file is gone as the manager wanted, and where
    its whole folder went, the caller's check of the folder says so in one line."""
    quiet = _PrunedAlready()
    tf.get_logger().addFilter(quiet)
    try:
        yield
    finally:
        tf.get_logger().removeFilter(quiet)


def variable_map(variables: Iterable[keras.Variable],
                 drop_owner: bool = False) -> dict[str, keras.Variable]:
    """``{path: variable}`` for checkpointing; '/' becomes '.', repeats get '.1', '.2'...
    ``drop_owner`` drops the first path component (an optimizer's auto-numbered name such
    as ``adam_1``, which differs between two optimizers in one process)."""
    mapping: dict[str, keras.Variable] = {}
    for variable in variables:
        path = variable.path.split("/", 1)[-1] if drop_owner else variable.path
        key = path.replace("/", ".")
        candidate, n = key, 0
        while candidate in mapping:
            n += 1
            candidate = f"{key}.{n}"
        mapping[candidate] = variable
    return mapping


def model_checkpoint(model: keras.Model, **extra) -> tf.train.Checkpoint:
    """A checkpoint of every weight of ``model`` (trainable or not) plus ``extra`` objects;
    Keras optimizers among them are stored variable by variable too."""
    extra = {name: variable_map(value.variables, drop_owner=True)
             if isinstance(value, keras.optimizers.Optimizer) else value
             for name, value in extra.items()}
    return tf.train.Checkpoint(model=variable_map(model.weights), **extra)


def shape_mismatches(prefix: str, model: keras.Model) -> list[str]:
    """The weights of ``model`` whose shape differs from the one saved in the checkpoint
    ``prefix`` (written by :func:`model_checkpoint`), as ``"<key>: saved [..], built [..]"``;
    empty when they all fit or the checkpoint cannot be read (restoring then says why)."""
    try:
        saved = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError):
        return []
    mismatches = []
    for key, variable in variable_map(model.weights).items():
        shape = saved.get(f"model/{key.replace('.', '..')}/.ATTRIBUTES/VARIABLE_VALUE")
        if shape is not None and list(shape) != list(variable.shape):
            mismatches.append(f"{key}: saved {list(shape)}, built {list(variable.shape)}")
    return mismatches


#: what restoring a damaged checkpoint raises: TensorFlow's checksum and read errors, a
#: truncated file's short read, a mismatched or incomplete object graph
READ_ERRORS = (tf.errors.OpError, ValueError, AssertionError, IndexError, KeyError)


def checkpoint_paths(directory: Path | str) -> list[str]:
    """The checkpoint prefixes in ``directory``, newest first: those of its ``checkpoint``
    state file, or, when that file is missing or unreadable, every ``<name>-<n>.index``
    by its number n."""
    directory = Path(directory)
    try:
        state = tf.train.get_checkpoint_state(str(directory))
    except (tf.errors.OpError, ValueError):        # a damaged state file
        state = None
    if state is not None and state.all_model_checkpoint_paths:
        return [str(directory / Path(p).name) for p in reversed(state.all_model_checkpoint_paths)]
    numbered = [(int(m.group(1)), str(path.with_suffix(""))) for path in directory.glob("*.index")
                if (m := re.search(r"-(\d+)$", path.stem))]
    return [prefix for _, prefix in sorted(numbered, reverse=True)]


def restore_newest_readable(checkpoint: tf.train.Checkpoint, directory: Path | str,
                            log: Callable[[str], None] = print,
                            partial: bool = False,
                            advice: str = "the run cannot continue from it, start a new one",
                            check: Callable[[], None] | None = None) -> str | None:
    """Restore the newest checkpoint of ``directory`` that reads back whole, and return its
    prefix (None when the directory has none).

    A checkpoint that fails to restore (a torn or corrupted data file fails TensorFlow's
    checksums; a missing file fails to open) is passed over for the next older one, with a
    one-line notice; when none is readable, a :class:`UserError` names the newest and why,
    then ``advice`` (what the caller does about it).
    ``partial``: the checkpoint may hold objects ``checkpoint`` does not (e.g. a training
    checkpoint's optimiser, read for the model alone); every object of ``checkpoint``
    must still be restored. ``check``: called after each restore, to read what belongs
    with the checkpoint (the trainer's ``resume-state-<step>.npz``); a ``ValueError`` from
    it passes the checkpoint over as a failed restore does."""
    failures: list[tuple[str, str]] = []
    for prefix in checkpoint_paths(directory):
        try:
            status = checkpoint.restore(prefix)
            if partial:
                status.expect_partial().assert_existing_objects_matched()
            else:
                status.assert_consumed()
            if check is not None:
                check()
        except READ_ERRORS as error:
            failures.append((prefix, str(error).strip().splitlines()[0][:200]))
            continue
        if failures:
            log(f"warning: skipped unreadable checkpoint(s) "
                f"{', '.join(Path(p).name for p, _ in failures)} in {directory} "
                f"({failures[0][1]}); restored {Path(prefix).name}")
        return prefix
    if failures:
        newest, reason = failures[0]
        raise UserError(f"no readable checkpoint in {directory}: {newest} and "
                        f"{len(failures) - 1} older one(s) fail to restore ({reason}); {advice}")
    return None


def tidy_checkpoints(directory: Path | str, log: Callable[[str], None] = print,
                     companions: re.Pattern | None = None) -> None:
    """Remove what saves cut short left in the checkpoint folder ``directory`` and list in
    its state file the complete checkpoints it misses, with one notice line naming both.
    Only for the folder's one writer (a training that holds the run lock), before its
    ``tf.train.CheckpointManager`` reads the state file.

    Removed: :data:`LEFTOVERS`, the data files of a checkpoint without its index (a save
    or a pruning cut short; without the index nothing reads them) and the ``companions``
    (files kept beside a checkpoint, named by a regex whose group is its number, such as
    the trainer's ``resume-state-<n>.npz``) of a checkpoint that is not there.

    Listed again: a checkpoint whose index is there but whose name the state file lacks,
    because the save stopped after writing its files and before recording them, or the state
    file was deleted or damaged (:func:`checkpoint_paths` then reads the numbered files,
    and the manager starts a new list without them). It may be the newest good checkpoint,
    which ``--resume`` is about to restore, so it is kept, and listed where its number puts
    it, so that the manager counts it when it prunes to ``max_to_keep`` on its next save
    as it counts the others; otherwise nothing ever removes it. Names listed whose index is
    gone are dropped from the list."""
    directory = Path(directory)
    if not directory.is_dir():
        return
    indexed = {path.stem: int(m.group(1)) for path in directory.glob("*.index")
               if (m := re.search(r"-(\d+)$", path.stem))}
    removed = []
    for path in sorted(directory.iterdir()):
        if not _left_over(path.name, indexed, companions):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
            removed.append(path.name + "/")
        else:
            path.unlink()
            removed.append(path.name)
    listed = _relist(directory, indexed)
    if removed or listed:
        log(f"note: tidied {directory} after a save that was cut short: " + "; ".join(
            part for part in (removed and "removed " + ", ".join(removed),
                              listed and "listed " + ", ".join(listed) + " again (complete, "
                              "but missing from its checkpoint list), so that pruning counts "
                              "them") if part))


def _left_over(name: str, indexed: dict[str, int], companions: re.Pattern | None) -> bool:
    """Whether the entry ``name`` of a checkpoint folder whose checkpoints (with an index)
    are ``indexed`` is something a save cut short left (:func:`tidy_checkpoints`)."""
    if LEFTOVERS.fullmatch(name):
        return True
    if (data := DATA_FILE.fullmatch(name)) is not None:
        return data.group(1) not in indexed
    companion = companions.fullmatch(name) if companions is not None else None
    return companion is not None and int(companion.group(1)) not in indexed.values()


def _relist(directory: Path, indexed: dict[str, int]) -> list[str]:
    """Rewrite the state file of ``directory`` to list every checkpoint of ``indexed`` (a
    name the list lacks goes before the first listed one with a higher number, each with
    its index's time as its save time), without the names whose index is gone, and return
    the names added; an unchanged list is left as it is, and so is a list that would be
    empty (restoring then says which checkpoint is missing)."""
    try:
        state = tf.train.get_checkpoint_state(str(directory))
    except (tf.errors.OpError, ValueError):        # a damaged state file
        state = None
    names = [Path(p).name for p in state.all_model_checkpoint_paths] if state else []
    times = dict(zip(names, state.all_model_checkpoint_timestamps)) if state else {}
    kept = [name for name in names if name in indexed]
    added = sorted((name for name in indexed if name not in names), key=indexed.get)
    if not indexed or (kept == names and not added):
        return []
    for name in added:
        later = [k for k, listed in enumerate(kept) if indexed[listed] > indexed[name]]
        kept.insert(later[0] if later else len(kept), name)
        times[name] = (directory / f"{name}.index").stat().st_mtime
    stamps = [min(times.get(name, time.time()), time.time()) for name in kept]
    # the manager prunes only checkpoints saved after the last preserved time
    preserved = min(([state.last_preserved_timestamp] if state else []) + [min(stamps) - 1])
    proto = tf.compat.v1.train.generate_checkpoint_state_proto(
        str(directory.absolute()), kept[-1], all_model_checkpoint_paths=kept,
        all_model_checkpoint_timestamps=stamps, last_preserved_timestamp=preserved)
    write_text(directory / STATE_FILE, text_format.MessageToString(proto))
    return added
