"""Inference of a pre-trained LDA's document-topic distribution, as a Keras layer.

References: D. Blei, A. Ng, M. Jordan, "Latent Dirichlet Allocation", JMLR 2003 (the
variational E-step, eq. 6-7); M. Hoffman, D. Blei, F. Bach, "Online Learning for Latent
Dirichlet Allocation", NIPS 2010 (Algorithm 1's E-step with phi folded into gamma), which is
what gensim's ``LdaModel.inference`` runs. The LSTM+LDA baseline of J. H. Lau, T. Baldwin,
T. Cohn, "Topically Driven Neural Language Model", ACL 2017 (and Wang et al. 2018 Table 2)
feeds this distribution to the language model.
"""
from __future__ import annotations

import keras
import numpy as np

from layers.tied_softmax import matmul_transposed

#: Added to phinorm before dividing by it, as gensim does (its ``np.finfo(float32).eps``):
#: a word column whose exp(E[log beta]) underflowed gives 0 / eps = 0, not 0 / 0.
PHINORM_FLOOR = float(np.finfo(np.float32).eps)


def _digamma(x):
    """psi(x), the logarithmic derivative of the gamma function, elementwise, by the running
    Keras backend's own kernel (``tf.math.digamma``, ``jax.scipy.special.digamma``,
    ``torch.special.digamma``).

    ``keras.ops`` has no digamma (Keras 3.15), and one written in ``keras.ops`` (the
    recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic series, as Eigen
    and Cephes compute it) rounded differently from TensorFlow's kernel in the last bits for
    5 % (eager) to 29 % (in a ``tf.function``) of 500,000 float32 inputs: it would change
    the topics every LDA run trained under TensorFlow infers. A backend's module is imported
    only when it is Keras's backend (it is loaded already then)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.math.digamma(x)
    if backend == "jax":
        import jax

        return jax.scipy.special.digamma(x)
    if backend == "torch":
        import torch

        return torch.special.digamma(x)
    raise NotImplementedError(f"LDAInference has no digamma for the {backend} backend.")


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class LDAInference(keras.layers.Layer):
    """Bag-of-words counts -> the document's LDA topic proportions q, by gensim's E-step.

    Shapes: ``counts [B, V]`` float (V = ``vocab_size``, the topic vocabulary; column v
    counts word id v) -> ``q [B, T]`` float32, each row summing to 1.

    With the fitted topics held as ``exp_elog_beta`` [T, V] = exp(E_q[log beta_kv]) =
    exp(psi(lambda_kv) - psi(sum_v lambda_kv)), every iteration computes (Hoffman et al.
    2010, Algorithm 1; Blei et al. 2003 eq. 6-7 with phi_vk ∝ exp(E[log theta_k]) beta_kv
    substituted into the gamma update):

        exp_elog_theta = exp(psi(gamma) - psi(sum_k gamma_k))             [B, T]
        phinorm        = exp_elog_theta @ exp_elog_beta + eps             [B, V]
        gamma          = alpha + exp_elog_theta * ((counts / phinorm) @ exp_elog_beta^T)

    ``steps`` times from gamma = 1 (the mean of gensim's random Gamma(100, 1/100) start, so
    the fixed point reached is the one gensim's inference reaches; gensim also stops early
    once gamma moves by less than 1e-3 on average, a fixed count keeps the graph static), and
    returns q = gamma / sum_k gamma_k, the posterior mean of theta. An empty document keeps
    gamma = alpha: q is uniform, the prior mean.

    Why in the graph: q must be computable for any document a served model is sent, so a
    TF-Serving SavedModel has to run the E-step itself (no Python, no gensim); the fitted
    topics are non-trainable weights, so they live in checkpoints and exports.

    Every backend: the loop is ``keras.ops.fori_loop`` (under TensorFlow the
    ``tf.while_loop`` it always was), the rest ``keras.ops`` but for psi and the product with
    ``exp_elog_beta^T``, which take the backend's own kernels (:func:`_digamma`,
    :func:`layers.tied_softmax.matmul_transposed`: under TensorFlow the numbers stay bit for
    bit those of the TensorFlow-only layer, eager or traced).

    ``topic_word`` [T, V] is each topic's word distribution lambda_k / sum_v lambda_kv (for
    top words and coherence); it does not enter ``call``. Before :meth:`assign` both weights
    are uniform (q is then uniform for every document).

    Args:
        vocab_size: V, the number of word ids.
        num_topics: T.
        alpha: the symmetric document-topic Dirichlet prior.
        steps: E-step iterations.
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, vocab_size: int, num_topics: int, alpha: float = 0.1, steps: int = 50,
                 **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.num_topics = int(num_topics)
        self.alpha = float(alpha)
        self.steps = int(steps)
        shape = (self.num_topics, self.vocab_size)
        self.exp_elog_beta = self.add_weight(name="exp_elog_beta", shape=shape,
                                             initializer="ones", trainable=False,
                                             dtype="float32")
        self.topic_word = self.add_weight(
            name="topic_word", shape=shape, trainable=False, dtype="float32",
            initializer=keras.initializers.Constant(1.0 / self.vocab_size))

    def assign(self, exp_elog_beta: np.ndarray, lambda_: np.ndarray) -> None:
        """Take a fitted LDA's topics: exp(E[log beta]) and the variational lambda, both
        [T, V] (gensim's ``expElogbeta`` and ``state.get_lambda()``)."""
        self.exp_elog_beta.assign(np.asarray(exp_elog_beta, np.float32))
        lambda_ = np.asarray(lambda_, np.float64)
        self.topic_word.assign((lambda_ / lambda_.sum(axis=1, keepdims=True)).astype(np.float32))

    def call(self, counts):
        """``counts [B, V]`` -> ``q [B, T]`` (see the class docstring)."""
        ops = keras.ops
        counts = ops.cast(counts, "float32")
        beta = ops.convert_to_tensor(self.exp_elog_beta)

        def update(_, gamma):
            theta = ops.exp(_digamma(gamma) - _digamma(ops.sum(gamma, -1, keepdims=True)))
            phinorm = ops.matmul(theta, beta) + PHINORM_FLOOR
            return self.alpha + theta * matmul_transposed(counts / phinorm, beta)

        start = ops.ones((ops.shape(counts)[0], self.num_topics), dtype="float32")
        gamma = ops.fori_loop(0, self.steps, update, start)
        return gamma / ops.sum(gamma, -1, keepdims=True)

    def compute_output_spec(self, counts):
        return keras.KerasTensor((counts.shape[0], self.num_topics), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, num_topics=self.num_topics, alpha=self.alpha,
                      steps=self.steps)
        return config
