"""TDLM, the Topically Driven Neural Language Model (Lau, Baldwin, Cohn, ACL 2017).

Two components trained jointly as two tasks (Sec. 3, Figure 1):

* the convolutional topic model (Sec. 3.1, :class:`layers.topic_attention.ConvolutionalTopicModel`):
  the document's word embeddings -> width-h filters, identity activation, max-over-time
  pooling -> d in R^a; attention p = softmax(A d) over k topics (eq. 1); topic vector
  s = B^T p in R^b (eq. 2); a dense softmax on s predicts the document's words;
* an LSTM language model (Sec. 3.2) whose top layer's hidden state h_t is combined with s by
  the GRU-like gate of eq. 3 (:class:`layers.topic_attention.TopicGate`) into h'_t, from which
  the output layer predicts the next word. The LM's document context is the document minus
  the current sentence, later sentences included.

Training (Sec. 3.3): the topic model's task (:meth:`TDLM.tasks`) and the language model run
on alternating minibatches: documents for the topic model, sentences for the LM, all batches
of an epoch in one random order. Each has its own Adam optimiser (lr 1e-3): the LM step
updates every variable, the topic model's included, with its gradients clipped at the global
norm (``--clip-norm``, 5); the topic-model step updates the topic-model variables only.
TensorBoard shows the LM loss (``train/loss``) and the topic model's (``train/topic_model_loss``)
separately.

Extensions (Sec. 6): document labels as a classification task on d' ⊕ s
(``--doc-labels DIR``, trained after each epoch's other batches, as the paper), and document
tags as learnable vectors of size f summed and concatenated to d (``--doc-tags DIR``). DIR
holds ``train.txt`` (and, to use them for validation and test, ``valid.txt``/``test.txt``)
with one line per line of the corpus file: a label; or the document's tags separated by TABs
(as the authors' tag files).

Choices. Where the paper's text and the authors' code (jhlau/topically-driven-language-model,
``tdlm_model.py``, ``util.py``, ``tdlm_train.py``) disagree, the code produced the published
numbers and is followed by default, the text offered as an option; where both are silent the
choice is ours:

* sizes (Table 1): h = 2 (``--filter-widths``, a list), a = 20 filters per width
  (``--num-filters``), b = 50 (``--topic-dim``), m1 = 3 topic-model targets per example
  (``--topic-targets``), m3 = ``--max-bow`` (300) document words, m2 = ``--seq-len`` (30),
  batch 64, k in {50, 100, 150} (``--num-topics``; Table 1's 100/150/200 disagrees with
  every results table, which use 50/100/150);
* topic-model dropout, keep probability 0.4 (``--topic-dropout`` 0.6 as a drop rate), on s
  and, by ``--topic-dropout-on``: ``embeddings`` (default, the code: the document's word
  embeddings before the convolution, each element dropped on its own) or ``document`` (the
  text, Sec. 3.3: "on d and s"; what a run saved before ``--topic-dropout-on`` existed was
  trained with). Dropping 60 % of the 20 features of d can leave the
  attention nothing to tell documents apart: on a toy LDA corpus the topic model trained
  that way collapsed onto one topic. The LM's dropout, keep 0.6 (``--dropout`` 0.4), hits
  its input embeddings and every LSTM layer's output, as both say;
* the gate of eq. 3 sits on the top LSTM layer, its z and r biases start at 1 (the code);
* the topic model's input is the topic-vocabulary words of the document, first m3 (the
  code's ``tm_ignore``: stop words, symbols and clitics, rare words and the most frequent
  0.1 % of *all* word types of the training split removed; ``--topic-top-among lm_vocab``
  takes the 0.1 % of the LM vocabulary instead, as runs saved before that option existed
  keep; on the APNEWS sample and the synthetic corpus both rules give
  the same vocabulary), and padding takes no part in the max over time (ours; the code
  pools over padding too); its examples are the document's topic words cut into consecutive
  chunks of m1, each with the whole document as input (the code); its softmax is over the
  full LM vocabulary (the code);
* word embeddings of the two components are separate (Sec. 3.3), optionally initialised
  from word2vec vectors (``--embeddings FILE``, which every model of the project takes:
  footnote 10 gives the baselines the same vectors; the paper used 300-d Google News
  vectors, ``python -m train.word2vec`` trains vectors on a corpus's training split as the
  authors' ``word2vec_train.py`` does; words missing from the file keep a random
  initialisation, counted in the log);
* topics (Sec. 5): softmax(B W + b), the topic model's output layer applied to each row B_k;
  a document's topic distribution is the attention p; generation from topic k uses s = B_k
  (Sec. 7), from a mixture t uses s = B^T t;
* the LM's output layer is the project's (adaptive softmax by default, ``--decoder softmax``
  for the paper's dense softmax), so TDLM and its baselines share it;
* the schedule and stopping rule are the project's, shared by every model (the learning
  rate halved after an epoch without a better validation perplexity, training stopped
  after ``--patience`` such epochs, the best validation weights scored). The authors' code
  keeps Adam's rate constant for a fixed number of epochs and, from the sixth epoch on,
  restores the previous epoch's weights whenever validation perplexity gets worse; the
  paper states neither rule.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import tensorflow as tf

from layers.topic_attention import ConvolutionalTopicModel, TopicGate
from tcnlm_tf.data import pipeline
from tcnlm_tf.data.corpus import utf8_lines
from tcnlm_tf.errors import UserError
from tcnlm_tf.models.base import Context, Task, TopicModel
from tcnlm_tf.models.lstm import RecurrentLanguageModel
from tcnlm_tf.precision import FLOAT32

SPLITS = ("train", "valid", "test")


def read_side_files(directory: str, corpus_dir: Path, flag: str) -> dict[str, list[str]]:
    """``{split: one entry per corpus line}`` from ``directory/<split>.txt``; ``train.txt``
    is required, a file's line count must equal its corpus file's (one-line errors)."""
    directory = Path(directory)
    found = {}
    for split in SPLITS:
        path = directory / f"{split}.txt"
        if not path.is_file():
            if split == "train":
                raise UserError(f"{flag} {directory}: no {path} (one line per line of "
                                f"{corpus_dir / 'train.txt'})")
            continue
        lines, corpus = list(utf8_lines(path)), list(utf8_lines(corpus_dir / f"{split}.txt"))
        if len(lines) != len(corpus):
            raise UserError(f"{path} has {len(lines)} lines but {corpus_dir / f'{split}.txt'} "
                            f"has {len(corpus)}: {flag} files need one line per corpus line")
        try:
            found[split] = [line.decode("utf-8") for line in lines]
        except UnicodeDecodeError:
            raise UserError(f"{path} is not UTF-8 text")
    return found


class TDLM(RecurrentLanguageModel, TopicModel):
    """TDLM (see the module docstring). ``Context["topic_vector"]`` holds s [B, b].

    Shapes: batch ``bow`` [B, m3] topic-vocabulary ids of the document minus the sentence
    (and ``tags`` [B, n] with tags) -> s [B, b]; the LM's top-layer outputs [B, L, H] are
    gated with s (eq. 3) before the output layer."""

    context_inputs = ("bow",)
    topic_vocabulary = "lm"

    def __init__(self, vocab_size: int, topic_vocab_size: int, topic_to_lm: Sequence[int],
                 num_topics: int = 50, filter_widths: Sequence[int] = (2,),
                 num_filters: int = 20, topic_dim: int = 50, topic_dropout: float = 0.6,
                 topic_dropout_on: str = "embeddings", topic_targets: int = 3,
                 tags: dict[str, list[list[int]]] | None = None, num_tags: int = 0,
                 tag_dim: int = 5, labels: dict[str, list[int]] | None = None,
                 num_labels: int = 0, embedding_dim: int = 300, **kwargs):
        self.num_topics = num_topics
        super().__init__(vocab_size, embedding_dim=embedding_dim, **kwargs)
        self.topic_targets = topic_targets
        self.topic_to_lm = tf.constant(np.asarray(topic_to_lm, np.int32))
        self.topic_model = ConvolutionalTopicModel(
            topic_vocab_size, vocab_size, num_topics, embedding_dim=embedding_dim,
            filter_widths=tuple(filter_widths), num_filters=num_filters, topic_dim=topic_dim,
            dropout=topic_dropout, dropout_on=topic_dropout_on, num_tags=num_tags,
            tag_dim=tag_dim, num_labels=num_labels,
            name="topic_model", dtype=FLOAT32)
        self.gate = TopicGate(self.hidden_size, name="topic_gate")
        self.tags = {split: np.asarray(rows, np.int32) for split, rows in (tags or {}).items()}
        self.labels = {split: np.asarray(rows, np.int32) for split, rows in (labels or {}).items()}

    @classmethod
    def create(cls, config, lm_vocab, topic_vocab, run_dir=None):
        from tcnlm_tf.data.loading import source_dir

        m = config.model
        extra = {}
        if m.option("doc_tags") or m.option("doc_labels"):
            corpus_dir = source_dir(config.data)
        if m.option("doc_tags"):
            files = read_side_files(m.option("doc_tags"), corpus_dir, "--doc-tags")
            names = sorted({t for line in files["train"] for t in line.split("\t") if t})
            index = {t: i + 1 for i, t in enumerate(names)}                # 0: no tag
            rows = {split: [[index[t] for t in line.split("\t") if t in index]
                            for line in lines] for split, lines in files.items()}
            width = max(1, max(len(r) for lines in rows.values() for r in lines))
            extra.update(num_tags=len(names), tag_dim=m.option("tag_dim"),
                         tags={s: [r + [0] * (width - len(r)) for r in lines]
                               for s, lines in rows.items()})
        if m.option("doc_labels"):
            files = read_side_files(m.option("doc_labels"), corpus_dir, "--doc-labels")
            names = sorted({line.strip() for line in files["train"] if line.strip()})
            index = {label: i for i, label in enumerate(names)}
            extra.update(num_labels=len(names),
                         labels={s: [index.get(line.strip(), -1) for line in lines]
                                 for s, lines in files.items()})
        return cls(topic_vocab_size=len(topic_vocab),
                   topic_to_lm=[lm_vocab.index.get(w, 0) for w in topic_vocab.words],
                   num_topics=m.option("num_topics"), filter_widths=m.option("filter_widths"),
                   num_filters=m.option("num_filters"), topic_dim=m.option("topic_dim"),
                   topic_dropout=m.option("topic_dropout"),
                   topic_dropout_on=m.option("topic_dropout_on"),
                   topic_targets=m.option("topic_targets"),
                   name="tdlm", **cls.lm_arguments(config, lm_vocab, run_dir), **extra)

    # ------------------------------------------------------------ the LM side
    def _topic_model(self, batch, training=False) -> dict[str, tf.Tensor]:
        return self.topic_model(batch["bow"], tags=batch.get("tags") if self.tags else None,
                                training=training)

    def context(self, batch, training=False) -> Context:
        return Context({"topic_vector": self._topic_model(batch, training)["topic_vector"]})

    def encode(self, inputs, context, training=False, state=None, reset=None):
        """LSTM outputs gated with s (eq. 3): [B, L, H]."""
        hidden, new_state = super().encode(inputs, context, training, state, reset)
        return self.gate([hidden, context["topic_vector"]]), new_state

    def document_features(self, split, arrays):
        if not self.tags or split not in self.tags:
            return {}
        return {"tags": self.tags[split][arrays.doc_lines - 1]}

    def embedding_tables(self):
        """The LM's input embedding and the topic model's document-word embedding (separate
        tables, Sec. 3.3; both from ``--embeddings`` as the paper)."""
        return super().embedding_tables() + [(self.topic_model.convolution.embeddings,
                                              "topic")]

    # ------------------------------------------------------- topic interface
    def infer_topics(self, batch, training=False, sample=None) -> tf.Tensor:
        """The attention p [B, k] (eq. 1): the document's topic distribution."""
        return self._topic_model(batch, training)["attention"]

    def topic_word(self) -> tf.Tensor:
        """softmax(B W + b) [k, V] (Sec. 5)."""
        return self.topic_model.topic_word()

    def topic_context(self, topics) -> Context:
        """s = B^T t for topic proportions t [B, k]; one-hot t gives s = B_k (Sec. 7)."""
        return Context({"topic_vector": tf.matmul(topics, self.topic_model.topic_vectors())})

    # ------------------------------------------------------------------ tasks
    def tasks(self) -> list[Task]:
        variables = lambda: self.topic_model.trainable_variables  # noqa: E731
        tasks = [Task("topic_model", self._topic_model_batches, self._topic_model_loss,
                      variables)]
        if self.labels:
            tasks.append(Task("labels", self._label_batches, self._label_loss, variables,
                              order="after", validate=True))
        return tasks

    def _topic_model_batches(self, split, arrays, batch_size, shuffle_seed) -> tf.data.Dataset:
        """Every document's topic words in consecutive chunks of m1 targets, each example
        with its whole document (first m3 words) as input: ``bow`` [B, m3],
        ``topic_targets`` [B, m1] topic-vocabulary ids (0: padding)."""
        m1 = self.topic_targets
        topic = arrays.topic_offsets
        starts, ends = topic[arrays.doc_offsets[:-1]], topic[arrays.doc_offsets[1:]]
        chunks = -(-(ends - starts) // m1)
        documents = np.repeat(np.arange(arrays.num_documents), chunks)
        first = np.repeat(np.cumsum(chunks) - chunks, chunks)
        target_start = starts[documents] + (np.arange(len(documents)) - first) * m1
        order = np.arange(len(documents))
        if shuffle_seed is not None:
            order = np.random.default_rng(shuffle_seed).permutation(len(documents))

        def select(k):
            index = order[k * batch_size:(k + 1) * batch_size]
            doc = documents[index]
            positions = target_start[index][:, None] + np.arange(m1)
            valid = positions < ends[doc][:, None]
            ids = arrays.topic_ids[np.where(valid, positions, 0).ravel()] if valid.any() \
                else np.zeros(positions.size, np.int32)
            return {"documents": doc,
                    "topic_targets": np.where(valid, ids.reshape(positions.shape), 0)}

        return pipeline.document_batches(
            arrays, self.context_spec, -(-len(order) // batch_size), select,
            {"topic_targets": (tf.int32, [None, m1])}, self.document_features(split, arrays))

    def _topic_model_loss(self, batch, training):
        """Summed cross-entropy of the m1 target words under softmax(s W + b) (Sec. 3.1)."""
        out = self._topic_model(batch, training)
        log_p = tf.nn.log_softmax(self.topic_model.word_logits(out["topic_vector"]), axis=-1)
        targets = batch["topic_targets"]
        picked = tf.gather(log_p, tf.gather(self.topic_to_lm, targets), batch_dims=1)
        real = targets > 0
        return {"loss_sum": -tf.reduce_sum(tf.where(real, picked, 0.0)),
                "count": tf.reduce_sum(tf.cast(real, tf.float32))}

    def _label_batches(self, split, arrays, batch_size, shuffle_seed) -> tf.data.Dataset:
        """The split's documents that have a known label: their topic-model input and
        ``label`` [B] (none for a split without a labels file)."""
        if split not in self.labels:
            return tf.data.Dataset.from_tensor_slices(np.zeros(0, np.int64)).batch(batch_size)
        labels = self.labels[split][arrays.doc_lines - 1]
        documents = np.flatnonzero(labels >= 0)
        if shuffle_seed is not None:
            documents = np.random.default_rng(shuffle_seed).permutation(documents)

        def select(k):
            doc = documents[k * batch_size:(k + 1) * batch_size]
            return {"documents": doc, "label": labels[doc]}

        return pipeline.document_batches(
            arrays, self.context_spec, -(-len(documents) // batch_size), select,
            {"label": (tf.int32, [None])}, self.document_features(split, arrays))

    def _label_loss(self, batch, training):
        """Summed cross-entropy of the document classifier on d' ⊕ s (Sec. 6.1)."""
        logits = self.topic_model.label_logits(self._topic_model(batch, training))
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["label"], logits)
        correct = tf.cast(tf.argmax(logits, -1, output_type=tf.int32) == batch["label"],
                          tf.float32)
        return {"loss_sum": tf.reduce_sum(loss), "count": tf.cast(tf.size(loss), tf.float32),
                "metrics": {"correct": tf.reduce_sum(correct)}}
