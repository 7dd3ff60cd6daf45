"""LSTM+LDA, the baseline of Lau, Baldwin, Cohn 2017 (``lstm+lda``) and Wang et al. 2018 Table 2.

"We first pretrain an LDA model (Blei et al., 2003) to learn 50/100/150 topics. For a
document, the LSTM incorporates the LDA topic distribution q by concatenating it with the
output hidden state h_t to predict the next word (h'_t = h_t ⊕ q). Unlike tdlm the language
model and topic model are trained separately."

* LDA (:meth:`LDALSTM.prepare`, once on a fresh run, before the LM trains): gensim's online
  variational Bayes (Hoffman et al. 2010) in place of the paper's Gibbs sampling (a
  deviation: the same model, fitted by another approximate inference), on the training
  split's documents as bags of
  topic-vocabulary ids (all of each document's topic words, not only the first ``max_bow``),
  T = ``--num-topics`` topics, symmetric priors alpha = ``--lda-alpha`` (0.1) and eta =
  ``--lda-eta`` (0.01), ``--lda-passes`` passes, ``--lda-inference-steps`` E-step iterations
  per document, seeded with the run's ``--seed``. The fitted model is saved as
  ``<run>/lda/lda.model`` (gensim's format, loadable with ``LdaModel.load``) and its topics
  are copied into non-trainable weights, so checkpoints and exports carry them.
* q [B, T] is LDA's posterior mean topic proportions of the sentence's document minus that
  sentence (``batch["bow"]``, as the other topic models' context), inferred *in the graph*
  by :class:`layers.lda.LDAInference` (gensim's E-step, a fixed ``--lda-inference-steps``
  iterations): a TF-Serving export must infer q for any new document it is sent, without
  Python or gensim. No gradient reaches LDA (its weights are not trainable; no aux loss).
* the LM is the project's recurrent skeleton; its top-layer outputs (after their dropout)
  are concatenated with q at every position before the output layer: [B, L, H + T]. q gets
  no dropout of its own (the papers say nothing; q is a fixed pre-trained feature).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from layers.lda import LDAInference
from layers.topic_model import BagOfWords
from tcnlm_tf.models.base import Context, TopicModel
from tcnlm_tf.models.lstm import RecurrentLanguageModel
from tcnlm_tf.precision import FLOAT32

#: where a run keeps its fitted LDA, relative to the run directory
LDA_FILE = Path("lda") / "lda.model"


def lda_documents(split) -> list[list[tuple[int, int]]]:
    """Every document of a :class:`~tcnlm_tf.data.loading.SplitArrays` as gensim's bag of words:
    sorted (topic-vocabulary id, count) pairs; id 0 (padding) is left out."""
    bounds = split.topic_offsets[split.doc_offsets]
    documents = []
    for start, end in zip(bounds[:-1], bounds[1:]):
        ids = split.topic_ids[start:end]
        words, counts = np.unique(ids[ids > 0], return_counts=True)
        documents.append(list(zip(words.tolist(), counts.tolist())))
    return documents


class LDALSTM(RecurrentLanguageModel, TopicModel):
    """LSTM+LDA (see the module docstring). ``Context["topics"]`` holds q [B, T].

    Shapes: batch ``bow`` [B, M] topic-vocabulary ids -> counts [B, V_topic] -> q [B, T];
    the LM's top-layer outputs [B, L, H] become [B, L, H + T] = h_t ⊕ q."""

    context_inputs = ("bow",)
    topic_vocabulary = "topic"

    @classmethod
    def create(cls, config, lm_vocab, topic_vocab, run_dir=None) -> "LDALSTM":
        m = config.model
        return cls(topic_vocab_size=len(topic_vocab), num_topics=m.option("num_topics"),
                   lda_alpha=m.option("lda_alpha"), lda_eta=m.option("lda_eta"),
                   lda_passes=m.option("lda_passes"),
                   lda_inference_steps=m.option("lda_inference_steps"),
                   seed=config.train.seed, name="lda_lstm",
                   **cls.lm_arguments(config, lm_vocab, run_dir))

    def __init__(self, vocab_size: int, topic_vocab_size: int, num_topics: int = 50,
                 lda_alpha: float = 0.1, lda_eta: float = 0.01, lda_passes: int = 10,
                 lda_inference_steps: int = 50, seed: int = 0, **kwargs):
        self.num_topics = num_topics  # before super().__init__, whose output layer reads it
        super().__init__(vocab_size, **kwargs)
        self.lda_eta = lda_eta
        self.lda_passes = lda_passes
        self.seed = seed
        self.bag_of_words = BagOfWords(topic_vocab_size, name="bag_of_words", dtype=FLOAT32)
        self.lda = LDAInference(topic_vocab_size, num_topics, alpha=lda_alpha,
                                steps=lda_inference_steps, name="lda", dtype=FLOAT32)

    @property
    def output_size(self) -> int:
        return self.hidden_size + self.num_topics

    # ------------------------------------------------------------ the LM side
    def context(self, batch, training=False) -> Context:
        return Context({"topics": self.lda(self.bag_of_words(batch["bow"]))})

    def encode(self, inputs, context, training=False, state=None, reset=None):
        """The top layer's outputs (after dropout) concatenated with q at every position:
        [B, L, H + T]."""
        hidden, new_state = super().encode(inputs, context, training, state, reset)
        q = tf.cast(context["topics"], hidden.dtype)
        shape = tf.concat([tf.shape(hidden)[:-1], [self.num_topics]], 0)
        q = tf.broadcast_to(q[:, None, :], shape)
        return tf.concat([hidden, q], axis=-1), new_state

    def prepare(self, corpus, run_dir, log) -> None:
        """Fit LDA on the training documents, save it to ``run_dir/lda/lda.model`` and copy
        its topics into :attr:`lda`'s weights (after the ``--embeddings`` of
        :meth:`RecurrentLanguageModel.prepare`)."""
        super().prepare(corpus, run_dir, log)
        from gensim.models import LdaModel

        documents = lda_documents(corpus.splits["train"])
        started = time.perf_counter()
        lda = LdaModel(corpus=documents, id2word=dict(enumerate(corpus.topic_vocab.words)),
                       num_topics=self.num_topics, alpha=self.lda.alpha, eta=self.lda_eta,
                       passes=self.lda_passes, iterations=self.lda.steps,
                       random_state=self.seed, eval_every=None)
        seconds = time.perf_counter() - started
        path = Path(run_dir) / LDA_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        lda.save(str(path))
        self.lda.assign(lda.expElogbeta, lda.state.get_lambda())
        log(f"LDA: {self.num_topics} topics fitted on {len(documents)} training documents, "
            f"{self.lda_passes} passes, {seconds:.1f} s; saved to {path}")

    # ------------------------------------------------------- topic interface
    def infer_topics(self, batch, training=False, sample=None) -> tf.Tensor:
        """q [B, T], LDA's posterior mean (LDA has no sampled estimate here: ``sample`` is
        ignored)."""
        return self.context(batch, training)["topics"]

    def topic_word(self) -> tf.Tensor:
        """lambda_k / sum_v lambda_kv [T, topic vocabulary]."""
        return tf.convert_to_tensor(self.lda.topic_word)

    def topic_context(self, topics) -> Context:
        """q = ``topics`` [B, T] (a one-hot row: one topic)."""
        return Context({"topics": topics})
