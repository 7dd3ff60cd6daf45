"""Checkpointing Keras 3 models with ``tf.train.Checkpoint``.

``tf.train.Checkpoint(model=keras_model)`` follows only the attributes TensorFlow's object
graph can see; Keras 3 keeps sub-layers and weights held in Python lists (stacked LSTM
layers, an encoder's kernels, adaptive-softmax tail clusters) in its own tracker, which the
checkpoint does not follow, so such weights would silently be left out. Checkpoints here
therefore name every variable explicitly: :func:`variable_map` keys each one by its Keras
path (made unique with a suffix where two share a path), which is stable for a model built
from the same configuration.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterable

import keras
import tensorflow as tf

from tcnlm_tf.errors import UserError


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
