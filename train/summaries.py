"""What a run shows in TensorBoard besides its scalars, all in ``<run>/tensorboard``.

* **HParams** (:func:`write_hparams`): the run as one trial named after the run directory,
  its hyperparameters every field of its :class:`~tcnlm_tf.config.RunConfig` flattened to
  a scalar (``model.model``, ``model.mode``, ``model.hidden_size``,
  ``model.options.num_topics``, ``model.decoder``, ``data.seq_len``, ``train.batch_size``,
  ``train.learning_rate``, ``train.precision``, ``train.seed``, ...: :func:`hparams_of`),
  and the experiment's configuration: every setting a run of this project can have and the
  metrics :data:`METRICS`, each the last value the run logged. Written by the trainer when
  training starts; TensorBoard keeps the first values of a run, so a resumed run shows
  those it started with. Every run writes the same configuration, so TensorBoard pointed
  at a directory of runs (a comparison's) shows each run as one row of the dashboard.
* **Topics** (:func:`write_topics`): a topic model's top words per topic, the Markdown
  table of :func:`tcnlm_tf.metrics.topic_words.markdown_table`, as text :data:`TOPICS_TAG`:
  the trainer after every epoch, ``evaluate.topics`` for the weights it loaded.
* **Projector** (:func:`write_projector`): every word-embedding table of the model
  (:meth:`~tcnlm_tf.models.base.LanguageModel.embedding_tables`) with the words of its
  vocabulary as metadata and, for a topic model, its topics, the rows of its topic-word
  matrix [T, V'], each labelled ``topic k: <top words>``: a ``tf.train.Checkpoint`` of
  copies of them (``projector-<step>``), one ``<table>.tsv`` of labels per table and
  ``projector_config.pbtxt``. The trainer writes it for the weights it tests at the end of
  training, ``evaluate.topics --projector`` for the weights it loaded.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf
from tensorboard.plugins import projector
from tensorboard.plugins.hparams import api as hp

from tcnlm_tf.config import RunConfig
from tcnlm_tf.data.corpus import write_lines
from tcnlm_tf.decoders.registry import all_decoder_options
from tcnlm_tf.metrics.coherence import DIVERSITY_NS
from tcnlm_tf.metrics.topic_words import (markdown_table, top_words, topic_labels,
                                         topic_word_matrix)
from tcnlm_tf.models.base import has_topics
from tcnlm_tf.models.registry import all_options

#: the text summary of the topics' top words
TOPICS_TAG = "topics/top_words"
#: the words per topic the trainer shows after every epoch
TOP_WORDS = 10
#: ``evaluate.coherence``'s scalars: NPMI (mean over N of the top-N NPMI) and the topic
#: diversity of the top n words (:func:`diversity_tag`)
NPMI_TAG = "coherence/npmi"


def diversity_tag(n: int) -> str:
    """The scalar tag of the topic diversity of the top ``n`` words."""
    return f"coherence/diversity_{n}"


#: the HParams dashboard's metrics: (scalar tag, description); a run's value of each is the
#: last one it logged
METRICS = (("valid/perplexity", "validation perplexity after the last epoch"),
           ("test/perplexity", "test perplexity of the weights with the best validation "
                               "perplexity"),
           (NPMI_TAG, "NPMI coherence of the topics, mean of top 5/10/15/20 "
                      "(evaluate.coherence)"),
           *((diversity_tag(n), f"topic diversity: distinct share of the topics' top {n} "
                                "words (evaluate.coherence)") for n in DIVERSITY_NS))
#: what writing TensorBoard's files raises on a full disk or a read-only directory
WRITE_FAILURES = (OSError, tf.errors.OpError)


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one dict of dotted keys: ``{"model": {"options": {"num_topics": 50}}}``
    -> ``{"model.options.num_topics": 50}`` (an empty dict leaves no key)."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def hparams_of(config: RunConfig) -> dict[str, bool | int | float | str]:
    """The run's hyperparameters: every field of ``config`` that is set, by its dotted path;
    a list as its ``train.run`` flag writes it (``256,256``)."""
    return {name: ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
            for name, value in flatten(config.to_dict()).items() if value is not None}


def hparam_names(config: RunConfig) -> list[str]:
    """Every hyperparameter a run of this project can have, sorted: the fields of
    ``config`` (set or not) and every registered model option (``model.options.*``) and
    decoder option (``model.decoder_options.*``), so that every run writes the same
    experiment configuration whatever its model."""
    tree = config.to_dict()
    tree["model"]["options"] = {**dict.fromkeys(all_options()), **tree["model"]["options"]}
    tree["model"]["decoder_options"] = {**dict.fromkeys(all_decoder_options()),
                                        **tree["model"]["decoder_options"]}
    return sorted(flatten(tree))


def write_hparams(writer: tf.summary.SummaryWriter, config: RunConfig, trial: str) -> None:
    """The experiment's configuration and the run's hyperparameters as trial ``trial``
    (the run's name), through ``writer``."""
    with writer.as_default():
        hp.hparams_config(hparams=[hp.HParam(name) for name in hparam_names(config)],
                          metrics=[hp.Metric(tag, description=description)
                                   for tag, description in METRICS])
        hp.hparams(hparams_of(config), trial_id=trial)
    writer.flush()


def write_topics(writer: tf.summary.SummaryWriter, topics: Sequence[Sequence[str]],
                 step: int) -> None:
    """The topics' top words (``topics[k]``: topic k's, most probable first) as the text
    :data:`TOPICS_TAG` at ``step``, through ``writer``."""
    with writer.as_default(step=step):
        tf.summary.text(TOPICS_TAG, markdown_table(topics))
    writer.flush()


def write_scalars(directory: Path, step: int, values: dict[str, float]) -> None:
    """Scalars ``values`` (tag -> value) at ``step`` in TensorBoard's ``directory``."""
    writer = tf.summary.create_file_writer(str(directory))
    with writer.as_default(step=step):
        for tag, value in values.items():
            tf.summary.scalar(tag, value)
    writer.close()


def write_image(directory: Path, tag: str, png: bytes, step: int = 0) -> None:
    """The PNG image ``png`` as image ``tag`` at ``step`` in TensorBoard's ``directory``
    (written before this returns, so that a failure is raised here)."""
    writer = tf.summary.create_file_writer(str(directory))
    with writer.as_default(step=step):
        tf.summary.image(tag, tf.image.decode_png(png, channels=4)[None])
    writer.close()


def table_name(variable: Any) -> str:
    """A projector table's name from a model weight's path, less the model's own name:
    ``tcnlm/embedding/embeddings`` -> ``embedding_embeddings``."""
    return "_".join(variable.path.split("/")[1:])


def projector_tables(model: Any, lm_vocab: Any, topic_vocab: Any,
                     topics: Sequence[Sequence[str]] | None = None
                     ) -> dict[str, tuple[np.ndarray, list[str]]]:
    """What the projector shows of ``model``: name -> (matrix [rows, d], one label per row).
    Every word-embedding table with its vocabulary's words and, for a topic model, its
    topic-word matrix as ``topic_word`` [T, V'], row k labelled ``topic k: <top words>``
    with ``topics[k]`` (default: the top :data:`TOP_WORDS` words of each topic)."""
    words = {"lm": list(lm_vocab.words), "topic": list(topic_vocab.words)}
    tables = {table_name(variable): (np.asarray(variable, np.float32), words[vocabulary])
              for variable, vocabulary in model.embedding_tables()}
    if has_topics(model):
        beta, columns = topic_word_matrix(model, lm_vocab, topic_vocab)
        if topics is None:
            topics = top_words(beta, columns, TOP_WORDS)
        tables["topic_word"] = (beta.astype(np.float32), topic_labels(topics))
    return tables


def write_projector(directory: Path, tables: dict[str, tuple[np.ndarray, list[str]]],
                    step: int) -> None:
    """``tables`` (:func:`projector_tables`) for TensorBoard's projector in ``directory``:
    a checkpoint ``projector-<step>`` of a copy of each matrix (the newest one kept), each
    table's labels in ``<name>.tsv`` and the ``projector_config.pbtxt`` that joins them."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = projector.ProjectorConfig()
    for name, (_, labels) in tables.items():
        write_lines(directory / f"{name}.tsv", labels)
        embedding = config.embeddings.add()
        embedding.tensor_name = f"{name}/.ATTRIBUTES/VARIABLE_VALUE"
        embedding.metadata_path = f"{name}.tsv"
    checkpoint = tf.train.Checkpoint(**{name: tf.Variable(matrix, trainable=False)
                                        for name, (matrix, _) in tables.items()})
    tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=1,
                               checkpoint_name="projector").save(checkpoint_number=step)
    projector.visualize_embeddings(str(directory), config)


def checkpoint_step(path: str) -> int:
    """The training step of a checkpoint path ``.../ckpt-<step>`` (the trainer numbers its
    checkpoints by step)."""
    return int(Path(path).name.rsplit("-", 1)[-1])


def write_or_warn(directory: Path, what: str, write: Callable[[], None],
                  written: str = "") -> bool:
    """``write()``, which writes ``what`` to TensorBoard's ``directory``; whether it did.
    A failure to write (:data:`WRITE_FAILURES`: a full disk, a read-only directory) is one
    warning line on stderr naming the folder and what was ``written`` without it (the
    command's other outputs), instead of an error, for the evaluators whose other outputs
    stand without it: TensorBoard only shows them again, and a script that reads those
    outputs goes on."""
    try:
        write()
    except WRITE_FAILURES as error:
        kept = f"; written without it: {written}" if written else ""
        print(f"warning: {what} not written to TensorBoard ({directory}): "
              f"{write_failure(error)}{kept}", file=sys.stderr)
        return False
    return True


#: what TensorFlow puts around the reason of an operation's error: the function it ran in
#: ({{function_node ...}}) and the operation ([Op:CreateSummaryFileWriter] name: ...)
OP_CONTEXT = re.compile(r"\{\{function_node [^}]*\}\}\s*|\s*\[Op:[^\]]*\].*$")


def write_failure(error: Exception) -> str:
    """Why a write to TensorBoard failed (:data:`WRITE_FAILURES`), in one line: the first
    line of a TensorFlow error's message, less the names of the function and operation it
    ran in; an ``OSError``'s reason."""
    reason = ((error.message if isinstance(error, tf.errors.OpError)
               else error.strerror or str(error)) or "").strip()
    first = OP_CONTEXT.sub("", reason.splitlines()[0]).strip() if reason else ""
    return first or type(error).__name__
