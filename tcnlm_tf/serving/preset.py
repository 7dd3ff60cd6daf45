"""A trained run as a **preset directory**, the form of a published pre-trained model, in
KerasHub's layout: ``tcnlm_tf.load`` reads it on any machine, without the run directory,
its checkpoints or its corpus.

::

    <preset>/
      config.json          the run's configuration (the run directory's config.json)
      metadata.json        what made it: format, package versions, model, parameter count,
                           topic count, the run and checkpoint the weights come from
      model.weights.h5     the weights (Keras ``save_weights``; float32 whatever precision
                           the run trained in)
      assets/              the vocabularies (lm_vocab.txt, topic_vocab.txt, and their SHA-256
                           in vocab_digests.json where the run has it) and the files the
                           model reads for itself (an LDA+LSTM's lda/, an SDLM's
                           knowledge_base.npz, ...)

A preset is written to ``<preset>.partial`` and renamed into place, so a directory that
looks complete is complete. ``python -m train.preset`` writes one from the command line.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tcnlm_tf.errors import UserError

#: the ``format`` of a preset's metadata.json, and its version (raised when a change of the
#: layout means earlier readers cannot read it)
PRESET_FORMAT = "tcnlm_tf.preset"
PRESET_FORMAT_VERSION = 1
CONFIG, METADATA, WEIGHTS, ASSETS = "config.json", "metadata.json", "model.weights.h5", "assets"
#: what to do about a preset whose metadata does not read
RESAVE = "restore the preset from its source, or save it again (python -m train.preset)"


def is_preset(path: Path) -> bool:
    """Whether ``path`` looks like a preset directory (it has a metadata.json of ours)."""
    try:
        return json.loads((Path(path) / METADATA).read_text())["format"] == PRESET_FORMAT
    except (OSError, ValueError, KeyError, TypeError):
        return False


def save_preset(run, directory: Path) -> Path:
    """Write ``run`` (a :class:`~tcnlm_tf.runs.loading.Run`) as a preset at ``directory``
    (which must not exist yet, or be empty); returns it."""
    import keras
    import tensorflow as tf

    from tcnlm_tf.models.base import has_topics
    from tcnlm_tf.version import __version__

    directory = Path(directory)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise UserError(f"{directory} already exists: give a new directory for the preset")
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)      # what an interrupted save left
    try:
        assets = partial / ASSETS
        assets.mkdir(parents=True)
        shutil.copy2(run.files.config, partial / CONFIG)
        for source in _assets(run):
            copy = shutil.copytree if source.is_dir() else shutil.copy2
            copy(source, assets / source.name)
        run.model.save_weights(str(partial / WEIGHTS))
        metadata = {
            "format": PRESET_FORMAT, "format_version": PRESET_FORMAT_VERSION,
            "tcnlm_tf_version": __version__, "keras_version": keras.__version__,
            "tensorflow_version": tf.__version__, "model": run.config.model.model,
            "mode": run.config.model.mode,
            "parameter_count": int(sum(v.shape.num_elements() for v in run.model.weights)),
            "num_topics": run.model.num_topics if has_topics(run.model) else None,
            "run": run.directory.name, "checkpoint": Path(run.checkpoint).name,
        }
        (partial / METADATA).write_text(json.dumps(metadata, indent=2) + "\n")
        if directory.exists():
            directory.rmdir()
        partial.rename(directory)
    except OSError as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise UserError(f"cannot write the preset {directory}: {error.strerror or error}; "
                        "choose a writable directory with space") from None
    return directory


def _assets(run) -> list[Path]:
    """The files of ``run`` that go to a preset's assets/: its vocabularies (with their
    digests, where the run has them) and the model's own files (those of a preset's assets/
    where ``run`` was loaded from a preset)."""
    if is_preset(run.directory):
        return sorted((run.directory / ASSETS).iterdir())
    digests = [run.files.vocab_digests] if run.files.vocab_digests.exists() else []
    return [run.files.lm_vocab, run.files.topic_vocab, *digests, *run.files.model_files()]


def load_preset(directory: Path, precision: str | None = None):
    """The :class:`~tcnlm_tf.runs.loading.Run` of a preset directory (its ``directory`` is
    the preset, its ``checkpoint`` the weights file); ``precision`` as
    :func:`~tcnlm_tf.runs.loading.load_run`."""
    from tcnlm_tf.config import RunConfig
    from tcnlm_tf.models import build_model
    from tcnlm_tf.runs.directory import read_json_object
    from tcnlm_tf.runs.loading import Run, build_weights, load_vocabularies

    directory = Path(directory)
    metadata = read_json_object(directory / METADATA, RESAVE)
    version = metadata.get("format_version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise UserError(f"{directory / METADATA} is damaged (its format_version is "
                        f"{version!r}, not a whole number): {RESAVE}")
    if version > PRESET_FORMAT_VERSION:
        raise UserError(f"{directory} is a preset of format version "
                        f"{version}; this tcnlm_tf reads up to "
                        f"{PRESET_FORMAT_VERSION}: upgrade tcnlm_tf")
    weights = directory / WEIGHTS
    if not weights.is_file():
        raise UserError(f"{directory} has no {WEIGHTS}: the preset is incomplete; copy it "
                        "again")
    config = RunConfig.load(directory / CONFIG)
    if precision is not None:
        config.train.precision = precision
    assets = directory / ASSETS
    lm_vocab, topic_vocab = load_vocabularies(assets)
    model = build_model(config, lm_vocab, topic_vocab, assets)
    build_weights(model)
    try:
        model.load_weights(str(weights))
    except (ValueError, OSError) as error:
        raise UserError(f"{weights} does not fit the preset's config.json and vocabularies "
                        f"({str(error).splitlines()[0]}): the preset is damaged") from None
    return Run(directory, config, lm_vocab, topic_vocab, model, str(weights))
