"""Topic-RNN (Dieng, Wang, Gao, Paisley, ICLR 2017): a Gaussian document vector theta
biases the LSTM language model's softmax wherever the next word is not a stop word.

The model (Sec. 3; :mod:`layers.topic_rnn`): theta ~ N(0, I_K); at every position, from
the top LSTM output h [H], a stop-word indicator l ~ Bernoulli(sigmoid(Gamma^T h +
gamma_0)) and then the next word from the full-vocabulary softmax

    p(y = i | h, theta, l) ∝ exp(v_i^T h + c_i + (1 - l) b_i^T theta).

q(theta | d) is a diagonal Gaussian from a feed-forward network over the document's term
frequencies without stop words: in this project ``batch["bow"]``, the topic-vocabulary ids
of the document minus the current sentence, so each sentence example has its own theta
(as TCNLM's topic proportions).

Probabilities. The next-word distribution the model reports (perplexity, scoring,
generation) is the marginal over the latent indicator, a proper distribution over y that
does not look at the target:

    p(y | h, theta) = sum_{l in {0, 1}} p(l | h) softmax(v h + c + (1 - l) B theta)_y,

which is the generative process: draw l, then y. Training maximises the paper's ELBO, with
l observed as l(y) from the stop-word list:

    sum_t w_t [log p(y_t | h_t, theta, l(y_t)) + log p(l(y_t) | h_t)] - KL(q(theta|d) || N(0, I))

with one reparameterised sample of theta per sentence (the posterior mean at evaluation).

The KL is the paper's: once per document (its ELBO is a document's words plus one KL), so
each sentence example weighs its KL by ``batch["context_weight"]`` = 1 / (the document's
examples in the epoch) (:mod:`tcnlm_tf.data.pipeline`, ``--ntm-weighting document``, this
model's default). Charging the whole KL once per sentence instead (``--ntm-weighting
sentence``) multiplies the price of information in theta by
the document's sentence count, and the optimum is then a theta at the prior: on the
synthetic corpus Topic-RNN trained that way stayed at the LSTM's perplexity; weighted per
document it does not (RESULTS.md).
``ModelOutput.target_log_probs`` holds the marginal log p(y_t | h_t, theta), so the
training loop's NLL is the honest one; ``aux_loss`` adds, for every real target,

    log p(y_t | h_t, theta) - log p(y_t, l(y_t) | h_t, theta) = -log p(l(y_t) | y_t, h_t, theta),

which is >= 0 (p(y) = sum_l p(y, l) >= p(y, l(y)) for any l: the model's posterior
probability of the observed indicator is at most 1), plus the summed KL. The total loss is
then exactly -(joint log-likelihood) + KL, the negative ELBO.

The stop mask l(i) over the LM vocabulary is 1 for the words of the run's stop-word list
(``--stopwords``, default the project's own), for the tokens that no topic may hold
(:func:`tcnlm_tf.data.vocab.is_topic_word`: punctuation, numbers, clitics such as ``'s``; the
paper's corpora had none of these, and left as content words they took the top of every
topic) and for ``<eos>`` and ``<pad>``; it is 0 for the other words and for ``<unk>``. It is
a constant of the model: a fresh run writes its stop words to ``stop_words.txt`` in the run
directory, and a resumed or loaded run reads them from there, so it keeps its mask when the
``--stopwords`` file it was trained with has moved or changed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import keras
import numpy as np
import tensorflow as tf

from layers.topic_model import BagOfWords
from layers.topic_rnn import TopicRNNInference, TopicRNNOutput
from tcnlm_tf.data.corpus import write_lines
from tcnlm_tf.data.pipeline import UNK_ID
from tcnlm_tf.data.vocab import EOS, PAD, is_topic_word, load_stopwords
from tcnlm_tf.models.base import Context, ModelOutput, TopicModel
from tcnlm_tf.models.lstm import RecurrentLanguageModel
from tcnlm_tf.precision import FLOAT32

#: the run's stop words (the LM-vocabulary words with l(i) = 1), one per line
STOP_WORDS_FILE = "stop_words.txt"


def stop_word_mask(words: Sequence[str], stopwords: frozenset[str]) -> np.ndarray:
    """l(i) float32 [V]: 1 for the stop words of ``words``, the tokens no topic may hold
    (no letter, clitics), ``<eos>`` and ``<pad>``; 0 for the others and ``<unk>``."""
    return np.asarray([w in stopwords or w in (EOS, PAD) or not is_topic_word(w)
                       for w in words], np.float32)


class TopicRNN(RecurrentLanguageModel, TopicModel):
    """Topic-RNN (see the module docstring). ``Context["theta"]`` holds theta [B, K].

    Shapes: batch ``bow`` [B, m] topic-vocabulary ids -> theta [B, K]; the LSTM outputs
    h [B, L, H] and theta give log-probabilities [B, L, V] (:meth:`log_probs`). The output
    layer is :class:`layers.topic_rnn.TopicRNNOutput` (a full softmax; the registry admits
    only ``--decoder softmax`` without tied embeddings)."""

    context_inputs = ("bow", "context_weight")
    topic_vocabulary = "lm"

    def __init__(self, vocab_size: int, topic_vocab_size: int, stop_mask: Sequence[float],
                 num_topics: int = 50, ntm_hidden_units: Sequence[int] = (256, 256),
                 ntm_weighting: str = "document", **kwargs):
        self.num_topics = num_topics  # before super().__init__, which builds the output layer
        super().__init__(vocab_size, **kwargs)
        self.ntm_weighting = ntm_weighting
        mask = np.asarray(stop_mask, np.float32)
        if mask.shape != (vocab_size,):
            raise ValueError(f"stop_mask must have shape ({vocab_size},), got {mask.shape}")
        content = mask == 0
        content[UNK_ID] = False
        self.stop_mask = tf.constant(mask)                  # l(i) [V]
        self.content_words = tf.constant(content)           # the words topics may hold [V]
        self.bag_of_words = BagOfWords(topic_vocab_size, name="bag_of_words", dtype=FLOAT32)
        self.inference = TopicRNNInference(topic_vocab_size, num_topics,
                                           hidden_units=tuple(ntm_hidden_units),
                                           name="inference_network", dtype=FLOAT32)

    @classmethod
    def create(cls, config, lm_vocab, topic_vocab, run_dir=None) -> "TopicRNN":
        """The stop mask comes from ``run_dir/stop_words.txt`` where the run has written it
        (:meth:`prepare`), else from the configured ``--stopwords`` list."""
        m = config.model
        saved = Path(run_dir) / STOP_WORDS_FILE if run_dir is not None else None
        if saved is not None and saved.is_file():
            stopwords = frozenset(saved.read_text(encoding="utf-8").splitlines())
        else:
            stopwords = load_stopwords(config.data.stopwords)
        return cls(topic_vocab_size=len(topic_vocab),
                   stop_mask=stop_word_mask(lm_vocab.words, stopwords),
                   num_topics=m.option("num_topics"),
                   ntm_hidden_units=tuple(m.option("ntm_hidden_units")),
                   ntm_weighting=m.option("ntm_weighting"), name="topic_rnn",
                   **cls.lm_arguments(config, lm_vocab, run_dir))

    def prepare(self, corpus, run_dir: Path, log: Callable[[str], None]) -> None:
        """Write the LM-vocabulary words of the stop mask to ``run_dir/stop_words.txt``,
        from which :meth:`create` rebuilds the mask of a resumed or loaded run (after the
        ``--embeddings`` of :meth:`RecurrentLanguageModel.prepare`)."""
        super().prepare(corpus, run_dir, log)
        words = [w for w, stop in zip(corpus.lm_vocab.words, self.stop_mask.numpy()) if stop]
        write_lines(Path(run_dir) / STOP_WORDS_FILE, words)
        log(f"Topic-RNN: {len(words)} stop words of the LM vocabulary written to "
            f"{Path(run_dir) / STOP_WORDS_FILE}")

    def make_output_layer(self, decoder: str, options: dict[str, Any]) -> keras.layers.Layer:
        """Gamma, gamma_0, v, c and B (:class:`TopicRNNOutput`). Its v and c are the full
        softmax of ``--decoder softmax``, the one decoder the registry allows this model."""
        return TopicRNNOutput(self.vocab_size, self.num_topics, name="softmax")

    @property
    def context_options(self) -> dict[str, str]:
        """``weighting`` of ``context_weight`` (each example's KL term): ``sentence`` or
        ``document``."""
        return {"weighting": self.ntm_weighting}

    # ------------------------------------------------------------- theta
    def _posterior(self, batch, training=False, sample=None) -> dict[str, tf.Tensor]:
        """:meth:`TopicRNNInference.call` on the counts of ``batch["bow"]``."""
        return self.inference(self.bag_of_words(batch["bow"]), training=training,
                              sample=sample)

    def context(self, batch, training=False) -> Context:
        """theta [B, K] (a sample while training, the posterior mean otherwise), with
        KL(q(theta|d) || N(0, I)) summed with the examples' ``context_weight`` as ``aux_loss``
        (a document, or with ``sentence`` weighting a sentence, counts its KL once) and,
        unweighted, as metric ``topic_rnn_kl``."""
        posterior = self._posterior(batch, training)
        kl = tf.reduce_sum(batch["context_weight"] * posterior["kl"])
        return Context({"theta": posterior["theta"]}, aux_loss=kl,
                       aux_metrics={"topic_rnn_kl": tf.reduce_sum(posterior["kl"])})

    # ----------------------------------------------------- probabilities
    def _logits(self, hidden, context) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(stop logit [...], word logits [..., V], B theta [B, V]) for h [..., H]."""
        out = self.softmax(hidden, context["theta"])
        return out["stop_logit"], out["word_logits"], out["topic_bias"]

    @staticmethod
    def _spread(bias: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
        """B theta [B, V] -> [B, 1.., V], to add to logits ``like`` [B, .., V]."""
        shape = tf.concat([tf.shape(bias)[:1], [1] * (len(like.shape) - 2),
                           tf.shape(bias)[1:]], 0)
        return tf.reshape(bias, shape)

    def log_probs(self, hidden, context) -> tf.Tensor:
        """log p(y | h, theta) [..., V] for h [..., H]: the marginal over l (sums to 1)."""
        stop_logit, logits, bias = self._logits(hidden, context)
        stop = tf.math.log_sigmoid(stop_logit)[..., None] + tf.nn.log_softmax(logits)
        content = (tf.math.log_sigmoid(-stop_logit)[..., None]
                   + tf.nn.log_softmax(logits + self._spread(bias, logits)))
        return tf.reduce_logsumexp(tf.stack([stop, content]), axis=0)

    def _normalisers(self, logits, bias) -> tuple[tf.Tensor, tf.Tensor]:
        """The log-normalisers of the two softmaxes, [...] for word logits [..., V] (leading
        dim B) and B theta [B, V]: ``log sum_i exp(logits_i)`` and ``log sum_i exp(logits_i +
        (B theta)_i)``.

        One exponential of the [..., V] logits serves both: with m = max_i logits_i and
        b = max_i (B theta)_i, the second sum is sum_i exp(logits_i - m) exp((B theta)_i - b)
        exp(m + b), a product of the first sum's terms with a per-document [B, V] vector
        (a batched matrix-vector product). Two ``reduce_logsumexp`` over [..., V] cost one
        more exponential, subtraction and sum over the whole [B, L, V] tensor, forward and
        backward (the output's step takes 6-10 % longer, measured in RESULTS.md). The product
        loses only terms below float32's smallest normal number, at most V * 2^-126 in
        all; where the sum is too small for that to be negligible (below V * 2^-102, which
        needs one document's topic biases to span more than about 60 nats, and the word
        with the largest bias to lie as far below the largest logit) the second
        normaliser is computed directly instead, so the result never degrades."""
        peak = tf.stop_gradient(tf.reduce_max(logits, axis=-1, keepdims=True))
        scaled = tf.exp(logits - peak)                                   # [..., V], <= 1
        bias_peak = tf.stop_gradient(tf.reduce_max(bias, axis=-1, keepdims=True))  # [B, 1]
        rows = tf.reshape(scaled, [tf.shape(bias)[0], -1, self.vocab_size])  # [B, N, V]
        weighted = tf.reshape(tf.linalg.matvec(rows, tf.exp(bias - bias_peak)),
                              tf.shape(peak)[:-1])                       # [...]
        peak = peak[..., 0]
        stop_norm = tf.math.log(tf.reduce_sum(scaled, axis=-1)) + peak
        bias_peak = self._spread(bias_peak, peak[..., None])[..., 0]     # [B, 1..]
        tiny = self.vocab_size * 2.0 ** -102
        content_norm = tf.cond(
            tf.reduce_all(weighted >= tiny),
            lambda: tf.math.log(weighted) + peak + bias_peak,
            lambda: tf.reduce_logsumexp(logits + self._spread(bias, logits), axis=-1))
        return stop_norm, content_norm

    def _target_terms(self, hidden, targets, context) -> dict[str, tf.Tensor]:
        """Per-target terms [...] for h [..., H] and ``targets`` [...] (leading dim B):
        ``marginal`` log p(y | h, theta), ``joint`` log p(y, l(y) | h, theta) and
        ``indicator`` log p(l(y) | h)."""
        stop_logit, logits, bias = self._logits(hidden, context)
        targets = tf.cast(targets, tf.int32)
        target_logit = tf.gather(logits, targets, batch_dims=len(targets.shape))
        target_bias = tf.gather(bias, targets, batch_dims=1)
        log_stop, log_content = (tf.math.log_sigmoid(stop_logit),
                                 tf.math.log_sigmoid(-stop_logit))   # log p(l = 1 | h), l = 0
        stop_norm, content_norm = self._normalisers(logits, bias)
        # log p(l=1 | h) p(y | h, l=1) and log p(l=0 | h) p(y | h, theta, l=0)
        stop_word = log_stop + target_logit - stop_norm
        content_word = log_content + target_logit + target_bias - content_norm
        observed_stop = tf.gather(self.stop_mask, targets) > 0
        return {"marginal": tf.reduce_logsumexp(tf.stack([stop_word, content_word]), axis=0),
                "joint": tf.where(observed_stop, stop_word, content_word),
                "indicator": tf.where(observed_stop, log_stop, log_content)}

    def target_log_prob(self, hidden, targets, context, training=False) -> tf.Tensor:
        """log p(target | h, theta) [...]: the marginal over l, as :meth:`log_probs`
        (``training`` as the other models'; Topic-RNN's own output layer has no dropout)."""
        return self._target_terms(hidden, targets, context)["marginal"]

    def call(self, batch, training=False, state=None, context=None) -> ModelOutput:
        """``target_log_probs``: the marginal log p(y_t | h_t, theta) [B, L]; ``aux_loss``:
        the summed KL plus sum_t w_t (log p(y_t) - log p(y_t, l(y_t))) over real targets
        (see the module docstring), so the loss is the negative ELBO; ``aux_metrics``:
        ``topic_rnn_kl`` and ``stop_word_nll``, -sum_t w_t log p(l(y_t) | h_t);
        ``context``: a given theta instead of the batch's (:meth:`LanguageModel.call`)."""
        if context is None:
            context = self.context(batch, training=training)
        hidden, new_state = self.encode(batch["inputs"], context, training=training,
                                        state=state, reset=batch.get("reset"))
        terms = self._target_terms(hidden, batch["targets"], context)
        weights = batch["weights"]

        def weighted_sum(values):
            # where, not a product alone: padded positions may hold any value
            return tf.reduce_sum(tf.where(weights > 0, values * weights, 0.0))

        indicator_nll = weighted_sum(terms["marginal"] - terms["joint"])
        return ModelOutput(terms["marginal"], state=new_state,
                           aux_loss=context.aux_loss + indicator_nll,
                           aux_metrics={**context.aux_metrics,
                                        "stop_word_nll": -weighted_sum(terms["indicator"])})

    # ------------------------------------------------------ topic interface
    def infer_topics(self, batch, training=False, sample=None) -> tf.Tensor:
        """softmax(mu) [B, K] (softmax of a draw of theta with ``sample=True``): a display of
        which topics the document switches on. theta itself is Gaussian, not proportions;
        the LM reads theta (:meth:`context`)."""
        return tf.nn.softmax(self._posterior(batch, training, sample)["theta"], axis=-1)

    def topic_word(self) -> tf.Tensor:
        """[K, V]: row k is the softmax of column k of B over the LM words that are neither
        stop words nor special tokens (those get probability 0): the words whose
        probability topic k raises most."""
        logits = self.softmax.topic_kernel
        return tf.nn.softmax(tf.where(self.content_words, logits, -np.inf), axis=-1)

    def topic_context(self, topics) -> Context:
        """theta = ``topics`` [B, K]: a one-hot row for topic k adds column k of B to the
        non-stop-word logits, a mixture t adds B t."""
        return Context({"theta": tf.cast(topics, tf.float32)})

    def uninformative_topics(self, rows) -> tf.Tensor:
        """theta = 0 [rows, K], the mean of its prior N(0, I): the topic term B theta of the
        logits vanishes, so the LM predicts from h alone. (theta is not a distribution over
        topics: uniform proportions 1/K are just another point of R^K, which adds the mean
        of B's columns to every non-stop-word logit.)"""
        return tf.zeros([rows, self.num_topics])
