"""Loading a trained run directory (``runs/<name>``) for evaluation, generation and export.

A run directory holds ``config.json``, ``lm_vocab.txt``, ``topic_vocab.txt`` (with their
SHA-256 in ``vocab_digests.json``, :func:`save_vocabularies`) and the checkpoints written by
``python -m train.run``; :func:`load_run` rebuilds the model from the configuration and
restores its best weights (or the latest checkpoint's, if no epoch finished).
:func:`encode_documents` turns any documents into the run's id arrays.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import re
import sys
from pathlib import Path

import tensorflow as tf

from tcnlm_tf.config import RunConfig
from tcnlm_tf.data import pipeline
from tcnlm_tf.data.corpus import Document, atomic_write
from tcnlm_tf.data.loading import SplitArrays, corpus_location, encode_split
from tcnlm_tf.data.pipeline import EOS_ID
from tcnlm_tf.data.vocab import UNK, Vocabulary
from tcnlm_tf.errors import UserError
from tcnlm_tf.models import build_model
from tcnlm_tf.models.base import LanguageModel, has_topics
from tcnlm_tf.runs.checkpoints import (checkpoint_paths, model_checkpoint, restore_newest_readable,
                                       shape_mismatches)
from tcnlm_tf.runs.directory import RunDirectory, read_json_object


@dataclasses.dataclass
class Run:
    """A trained run: where it is, how it was configured, its vocabularies and model."""

    directory: Path
    config: RunConfig
    lm_vocab: Vocabulary
    topic_vocab: Vocabulary
    model: LanguageModel
    checkpoint: str

    @property
    def files(self) -> RunDirectory:
        """Where each file of the run is."""
        return RunDirectory(self.directory)


def _dummy_batch(model: LanguageModel) -> dict[str, tf.Tensor]:
    """A one-row batch that creates every variable of a model when it is called."""
    ids = tf.constant([[EOS_ID, EOS_ID]], tf.int32)
    context = pipeline.document_context(model.context_spec, pipeline.padded_ids([]), [0],
                                        [[0, 0]])
    return {"inputs": ids, "targets": ids, "weights": tf.ones([1, 2]), **context}


def build_weights(model: LanguageModel) -> None:
    """Create every variable of ``model`` (a one-row call), so weights can be restored."""
    model(_dummy_batch(model))


def load_run(directory: Path | str, precision: str | None = None,
             data_dir: Path | str | None = None) -> Run:
    """Rebuild the model of ``directory`` and restore its best (else latest) weights; its
    layers under ``precision`` (:mod:`tcnlm_tf.precision`; None: the precision the run
    trained in, so evaluations repeat the training's numbers). The weights are float32
    under every precision. ``data_dir``: where the run's corpus is now, if it moved
    (:func:`tcnlm_tf.data.loading.corpus_location`; ``run.config.data.data_dir`` says where it was
    found)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"run directory {directory} not found: pass --run runs/<name> as "
                        "created by `python -m train.run`")
    files = RunDirectory(directory)
    config = RunConfig.load(files.config)
    config.data.data_dir = corpus_location(config.data, data_dir)
    lm_vocab, topic_vocab = load_vocabularies(directory)
    newest = checkpoint_paths(files.best) or checkpoint_paths(files.checkpoints)
    if not newest:
        raise UserError(f"{directory} has no checkpoint yet: its training stopped before it "
                        f"saved one (python -m train.status shows it); train it again with "
                        f"python -m train.run")
    if precision is not None:
        config.train.precision = precision
    model = build_model(config, lm_vocab, topic_vocab, directory)
    build_weights(model)
    mismatches = shape_mismatches(newest[0], model)
    if mismatches:
        raise UserError(
            f"{directory}'s files do not fit its weights: {mismatches[0]} ({len(mismatches)} "
            f"weight(s) differ; lm_vocab.txt has {len(lm_vocab)} words, topic_vocab.txt "
            f"{len(topic_vocab)}): one of these files or config.json was changed after "
            "training; restore it (the weights are intact)")
    return Run(directory, config, lm_vocab, topic_vocab, model, _restore(model, files))


def load_run_vocabulary(path: Path, unk: str | None = None) -> Vocabulary:
    """The vocabulary file ``path`` of a run directory, or a :class:`UserError` naming it
    (missing, not UTF-8, a word twice)."""
    if not path.is_file():
        raise UserError(f"{path} is missing: the run's weights index its words; restore it "
                        f"(train.run writes it at the start of a run)")
    try:
        return Vocabulary.load(path, unk=unk)
    except UnicodeDecodeError as error:
        raise UserError(f"{path} is damaged: not UTF-8 text ({error.reason} at byte "
                        f"{error.start}); restore it") from None
    except KeyError:
        raise UserError(f"{path} is damaged: it has no {unk} line; restore it") from None
    except ValueError as error:
        raise UserError(f"{path} is damaged ({error}); restore it") from None


def save_vocabularies(directory: Path, lm_vocab: Vocabulary, topic_vocab: Vocabulary) -> None:
    """Write the vocabulary files of the run directory ``directory``, then
    ``vocab_digests.json``: the SHA-256 of each (:meth:`Vocabulary.digest`, by file name),
    by which :func:`load_vocabularies` tells a file changed since. Each is written
    atomically."""
    files = RunDirectory(directory)
    lm_vocab.save(files.lm_vocab)
    topic_vocab.save(files.topic_vocab)
    text = json.dumps({files.lm_vocab.name: lm_vocab.digest(),
                       files.topic_vocab.name: topic_vocab.digest()}, indent=2) + "\n"
    atomic_write(files.vocab_digests, lambda handle: handle.write(text.encode("utf-8")))


def load_vocabularies(directory: Path) -> tuple[Vocabulary, Vocabulary]:
    """The LM and topic-model vocabularies in ``directory`` (a run directory, or a preset's
    ``assets/``), each checked against the SHA-256 that ``vocab_digests.json`` holds of it:
    the weights index the words by line, so a file edited since (two words swapped leave a
    valid file of the right size) would give numbers for a scrambled mapping; it is a
    :class:`UserError` naming the file. Without ``vocab_digests.json`` (a run or preset of an
    earlier version) the files are read unchecked."""
    files = RunDirectory(directory)
    lm_vocab = load_run_vocabulary(files.lm_vocab, unk=UNK)
    topic_vocab = load_run_vocabulary(files.topic_vocab)
    digests = _stored_digests(files)
    for path, vocab in ((files.lm_vocab, lm_vocab), (files.topic_vocab, topic_vocab)):
        if digests is not None and vocab.digest() != digests[path.name]:
            raise UserError(f"{path} was changed after the run wrote it: its words or their "
                            "order are not those the weights index (its SHA-256 is not the "
                            f"one in {files.vocab_digests.name}); restore it from a copy, "
                            "or train the run again (python -m train.run)")
    return lm_vocab, topic_vocab


def _stored_digests(files: RunDirectory) -> dict[str, str] | None:
    """The SHA-256 of each vocabulary file that ``vocab_digests.json`` holds, by file name;
    None without one (an earlier version's run), a :class:`UserError` naming it when it is
    damaged."""
    path = files.vocab_digests
    if not path.exists():
        return None
    advice = "restore it from a copy, or delete it to read the vocabularies unchecked"
    digests = read_json_object(path, advice)
    for name in (files.lm_vocab.name, files.topic_vocab.name):
        if not re.fullmatch(r"[0-9a-f]{64}", str(digests.get(name))):
            raise UserError(f"{path} is damaged (it holds no SHA-256 of {name}): {advice}")
    return digests


def _restore(model: LanguageModel, files: RunDirectory) -> str:
    """Restore the newest readable best checkpoint of a run, else its newest readable
    training checkpoint (each with a notice on stderr when one was passed over)."""
    warn = functools.partial(print, file=sys.stderr)
    checkpoint = model_checkpoint(model)
    try:
        best = restore_newest_readable(checkpoint, files.best, warn, partial=True,
                                       advice="using the newest training checkpoint instead")
    except UserError as error:
        warn(f"warning: {error}")
        best = None
    return best or restore_newest_readable(checkpoint, files.checkpoints, warn,
                                           partial=True)


def encode_documents(run: Run, documents: list[Document]) -> SplitArrays:
    """Documents as id arrays in ``run``'s vocabularies (unknown LM words become ``<unk>``)."""
    return encode_split(documents, run.lm_vocab, run.topic_vocab)


def require_topic_model(run: Run, command: str) -> None:
    """Refuse runs of models without topics (e.g. the plain LSTM) for topic commands."""
    if not has_topics(run.model):
        from tcnlm_tf.models.registry import MODELS
        with_topics = "/".join(name for name, spec in MODELS.items() if spec.has_topics)
        raise UserError(f"{command} needs a topic model; {run.directory} is a --model "
                        f"{run.config.model.model} run (train --model {with_topics})")
