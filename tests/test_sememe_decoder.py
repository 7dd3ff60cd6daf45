"""Tests for layers.sememe_decoder (SDLM sparse product of sememe experts, Gu et al., 2018)."""
from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.sememe_decoder import SememeDecoder

# Three words, five senses, four sememes: word 0 has senses 0 and 1, word 1 senses 2 and 3,
# word 2 sense 4. Edges are given out of order on purpose (the layer sorts them).
VOCAB, SENSE_WORD, NUM_SEMEMES = 3, [0, 0, 1, 1, 2], 4
EDGES = [(2, 3), (0, 0), (0, 1), (1, 2), (2, 1), (3, 0), (4, 2), (4, 3), (4, 1)]
EDGE_SENSE = [s for s, _ in EDGES]
EDGE_SEMEME = [k for _, k in EDGES]
H1, H2, R = 6, 4, 3


def make_decoder(normalization="left", sense_bias=True, seed=0, **kwargs):
    layer = SememeDecoder(VOCAB, SENSE_WORD, EDGE_SENSE, EDGE_SEMEME, NUM_SEMEMES, num_bases=R,
                          normalization=normalization, sense_bias=sense_bias,
                          embedding_dim=None if "embedding" in kwargs else H2, **kwargs)
    layer.build((None, H1))
    rng = np.random.default_rng(seed)
    for w in layer.weights:  # every weight random (the biases and logits start at zero)
        w.assign(rng.normal(scale=0.7, size=w.shape).astype("float32"))
    return layer


def reference_word_probs(layer, g, normalization, sense_word=SENSE_WORD, edges=EDGES,
                         vocab=VOCAB):
    """eq. 4-10 with explicit loops over k, s and r, from the layer's weights."""
    v, b = layer.sememe_kernel.numpy(), layer.sememe_bias.numpy()
    Q, a = layer.bases.numpy(), layer.basis_logits.numpy()
    c = layer.sense_bias.numpy() if layer.sense_bias is not None else np.zeros(len(sense_word))
    X = layer._output_embeddings().numpy()
    sememes_of = {s: [k for s2, k in edges if s2 == s] for s in range(len(sense_word))}
    senses_of = {k: [s for s, k2 in edges if k2 == k] for k in range(NUM_SEMEMES)}
    out = np.zeros((len(g), vocab))
    for n, gn in enumerate(g.astype(np.float64)):
        q = [1.0 / (1.0 + math.exp(-(gn @ v[:, k] + b[k]))) for k in range(NUM_SEMEMES)]  # eq. 4
        scores = []
        for s in range(len(sense_word)):
            w_s = X[sense_word[s]]  # weight tying: sense embedding = word embedding
            score = c[s]
            for k in sememes_of[s]:
                alpha = np.exp(a[k]) / np.exp(a[k]).sum()
                U_k = sum(alpha[r] * Q[r] for r in range(R))  # eq. 10
                if normalization == "left":
                    C = 1.0 / len(sememes_of[s])
                else:
                    C = 1.0 / math.sqrt(len(sememes_of[s]) * len(senses_of[k]))
                score += q[k] * C * (gn @ U_k @ w_s)  # eq. 5-8
            scores.append(score)
        p_sense = np.exp(scores) / np.exp(scores).sum()  # eq. 8
        for s, w in enumerate(sense_word):
            out[n, w] += p_sense[s]  # eq. 9
    return out


@pytest.mark.parametrize("normalization", ["left", "symmetric"])
@pytest.mark.parametrize("sense_bias", [True, False])
def test_matches_loop_reference(normalization, sense_bias):
    layer = make_decoder(normalization, sense_bias)
    g = np.random.default_rng(1).normal(size=(5, H1)).astype("float32")
    log_p = layer(g).numpy()
    assert log_p.shape == (5, VOCAB)
    np.testing.assert_allclose(np.exp(log_p), reference_word_probs(layer, g, normalization),
                               atol=1e-5)
    np.testing.assert_allclose(np.exp(log_p).sum(-1), 1.0, atol=1e-5)
    targets = np.array([0, 2, 1, 1, 0])
    np.testing.assert_allclose(layer.target_log_prob(g, targets).numpy(),
                               log_p[np.arange(5), targets], atol=1e-6)
    # Senses: their probabilities sum to the word probabilities (eq. 9).
    sense_p = np.exp(layer.sense_log_probs(g).numpy())
    np.testing.assert_allclose(sense_p.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(sense_p[:, [0, 2]] + sense_p[:, [1, 3]], np.exp(log_p[:, :2]),
                               atol=1e-6)
    q = layer.sememe_probs(g).numpy()
    expected_q = 1 / (1 + np.exp(-(g @ layer.sememe_kernel.numpy() + layer.sememe_bias.numpy())))
    np.testing.assert_allclose(q, expected_q, atol=1e-6)


def test_one_sense_per_word():
    """With M = V the layer skips the word-to-sense gather; P(w) = P(s)."""
    edges = [(0, 0), (0, 3), (1, 1), (2, 2), (2, 0), (2, 3)]
    layer = SememeDecoder(VOCAB, [0, 1, 2], [s for s, _ in edges], [k for _, k in edges],
                          NUM_SEMEMES, num_bases=R, normalization="symmetric", embedding_dim=H2)
    layer.build((None, H1))
    rng = np.random.default_rng(8)
    for w in layer.weights:
        w.assign(rng.normal(scale=0.7, size=w.shape).astype("float32"))
    g = rng.normal(size=(4, H1)).astype("float32")
    expected = reference_word_probs(layer, g, "symmetric", sense_word=[0, 1, 2], edges=edges)
    np.testing.assert_allclose(np.exp(layer(g).numpy()), expected, atol=1e-5)
    np.testing.assert_allclose(layer.sense_log_probs(g).numpy(), layer(g).numpy(), atol=1e-6)


def test_rank3_inside_tf_function_and_tied_embedding():
    embedding = keras.layers.Embedding(VOCAB, H2)
    embedding.build((None,))
    tied = make_decoder(embedding=embedding)
    assert tied.word_embeddings is None and "embedding" not in tied.get_config()
    g = np.random.default_rng(2).normal(size=(2, 4, H1)).astype("float32")
    targets = np.array([[0, 1, 2, 2], [1, 0, 0, 2]])
    log_p = tf.function(tied)(g).numpy()
    assert log_p.shape == (2, 4, VOCAB)
    np.testing.assert_allclose(np.exp(log_p).sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(
        np.exp(log_p).reshape(-1, VOCAB),
        reference_word_probs(tied, g.reshape(-1, H1), "left"), atol=1e-5)
    picked = tf.function(tied.target_log_prob)(g, targets).numpy()
    np.testing.assert_allclose(picked, np.take_along_axis(log_p, targets[..., None], -1)[..., 0],
                               atol=1e-6)
    assert tied.sense_log_probs(g).shape == (2, 4, len(SENSE_WORD))
    assert tied.sememe_probs(g).shape == (2, 4, NUM_SEMEMES)


def test_gradients_reach_every_weight():
    embedding = keras.layers.Embedding(VOCAB, H2)
    embedding.build((None,))
    for layer in (make_decoder("symmetric"), make_decoder(embedding=embedding)):
        g = tf.constant(np.random.default_rng(3).normal(size=(3, 2, H1)).astype("float32"))
        with tf.GradientTape() as tape:
            loss = -tf.reduce_sum(layer.target_log_prob(g, [[0, 1], [2, 0], [1, 1]]))
        variables = [layer.sememe_kernel, layer.sememe_bias, layer.bases, layer.basis_logits,
                     layer.sense_bias,
                     embedding.embeddings if layer.embedding is not None
                     else layer.word_embeddings]
        for var, grad in zip(variables, tape.gradient(loss, variables)):
            grad = tf.convert_to_tensor(grad).numpy()
            assert np.all(np.isfinite(grad)), var.name
            assert np.abs(grad).max() > 0, var.name


def random_kb(vocab, num_senses, num_sememes, rng):
    """Every word one sense, the rest at random; every sense 1-4 distinct sememes."""
    extra = rng.integers(0, vocab, size=num_senses - vocab)
    sense_word = np.sort(np.concatenate([np.arange(vocab), extra]))
    edge_sense, edge_sememe = [], []
    for s in range(num_senses):
        for k in rng.choice(num_sememes, size=rng.integers(1, 5), replace=False):
            edge_sense.append(s)
            edge_sememe.append(int(k))
    return sense_word, edge_sense, edge_sememe


def largest_per_example(fn, *specs, examples):
    """Largest element count of any op output in ``fn``'s traced graph, per example."""
    graph = tf.function(fn).get_concrete_function(*specs).graph
    sizes = [np.prod(t.shape.as_list()) / examples for op in graph.get_operations()
             for t in op.outputs if t.shape.rank is not None and t.shape.is_fully_defined()]
    return max(sizes)


def test_never_materialises_sememe_by_sense_tensors():
    V, M, K, H = 2000, 4000, 500, 16
    sense_word, edge_sense, edge_sememe = random_kb(V, M, K, np.random.default_rng(4))
    layer = SememeDecoder(V, sense_word, edge_sense, edge_sememe, K, embedding_dim=H)
    layer.build((None, None, H))
    spec = tf.TensorSpec([4, 8, H], tf.float32)
    target_spec = tf.TensorSpec([4, 8], tf.int32)
    limit = K * M / 10
    assert largest_per_example(layer, spec, examples=32) < limit
    assert largest_per_example(layer.target_log_prob, spec, target_spec, examples=32) < limit

    # The measure flags a dense product of experts (a [N, K, M] score tensor; traced only).
    membership = tf.scatter_nd(np.stack([edge_sememe, edge_sense], 1),
                               tf.ones(len(edge_sense)), [K, M])

    def dense(hidden):
        g = tf.reshape(hidden, [-1, H])
        gu = tf.einsum("nh,rhd->nrd", g, layer.bases)
        z = tf.einsum("nrd,md->nrm", gu, tf.gather(layer.word_embeddings, sense_word))
        per_expert = tf.einsum("nrm,kr->nkm", z, tf.nn.softmax(layer.basis_logits))
        return tf.reduce_sum(per_expert * membership, axis=1)

    assert largest_per_example(dense, spec, examples=32) >= K * M


def test_get_config_round_trip():
    layer = make_decoder("symmetric", sense_bias=False, name="sdlm", embedding_dropout=0.3)
    config = layer.get_config()
    assert config["sense_word"] == SENSE_WORD and config["num_sememes"] == NUM_SEMEMES
    assert sorted(zip(config["edge_sense"], config["edge_sememe"])) == sorted(EDGES)
    assert all(type(x) is int for x in config["edge_sense"] + config["edge_sememe"])
    clone = SememeDecoder.from_config(config)
    assert (clone.name, clone.normalization, clone.use_sense_bias, clone.embedding_dim,
            clone.num_bases, clone.embedding_dropout) == ("sdlm", "symmetric", False, H2, R, 0.3)
    clone.build((None, H1))
    for src, dst in zip(layer.weights, clone.weights):
        dst.assign(src)
    g = np.random.default_rng(5).normal(size=(3, H1)).astype("float32")
    np.testing.assert_allclose(clone(g).numpy(), layer(g).numpy(), atol=1e-6)
    assert keras.saving.get_registered_name(SememeDecoder) == "tcnlm_tf>SememeDecoder"


def test_model_save_and_load(tmp_path):
    inputs = keras.Input((None, H1))
    layer = SememeDecoder(VOCAB, SENSE_WORD, EDGE_SENSE, EDGE_SEMEME, NUM_SEMEMES, num_bases=R,
                          embedding_dim=H2, name="sdlm")
    model = keras.Model(inputs, layer(inputs))
    rng = np.random.default_rng(6)
    for w in layer.weights:
        w.assign(rng.normal(scale=0.7, size=w.shape).astype("float32"))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded.get_layer("sdlm"), SememeDecoder)
    g = rng.normal(size=(2, 3, H1)).astype("float32")
    np.testing.assert_allclose(loaded(g).numpy(), model(g).numpy(), atol=1e-6)


def test_mirrored_strategy_replica_context():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        layer = make_decoder()
    g = np.random.default_rng(7).normal(size=(4, H1)).astype("float32")
    targets = np.array([0, 1, 2, 0])

    @tf.function
    def step(g, targets):
        return strategy.run(layer.target_log_prob, args=(g, targets))

    out = strategy.experimental_local_results(step(g, targets))[0].numpy()
    np.testing.assert_allclose(out, layer.target_log_prob(g, targets).numpy(), atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(sense_word=[0, 0, 2, 2, 2]), "every word needs at least one sense"),
        (dict(sense_word=[0, 1, 0, 1, 2]), "sorted ascending"),
        (dict(sense_word=[0, 0, 1, 1, 3]), r"\[0, vocab_size=3\)"),
        (dict(edge_sense=EDGE_SENSE[:-3], edge_sememe=EDGE_SEMEME[:-3]),
         "every sense needs at least one sememe edge"),
        (dict(edge_sense=EDGE_SENSE + [5], edge_sememe=EDGE_SEMEME + [0]),
         r"sense ids in \[0, 5\)"),
        (dict(edge_sememe=EDGE_SEMEME[:-1] + [4]), r"\[0, num_sememes=4\)"),
        (dict(edge_sense=EDGE_SENSE + [0], edge_sememe=EDGE_SEMEME + [0]), "duplicate edge"),
        (dict(edge_sememe=EDGE_SEMEME[:-1]), "same length"),
        (dict(normalization="right"), "normalization must be one of"),
        (dict(embedding_dim=None), "needs embedding_dim"),
    ],
)
def test_invalid_arguments_raise(kwargs, message):
    args = dict(vocab_size=VOCAB, sense_word=SENSE_WORD, edge_sense=EDGE_SENSE,
                edge_sememe=EDGE_SEMEME, num_sememes=NUM_SEMEMES, embedding_dim=H2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        SememeDecoder(**args)


def test_embedding_dropout_drops_whole_dimensions_in_training_only():
    """The SDLM authors' output-embedding dropout: in training one mask over the H2
    dimensions, each kept at 1 / (1 - rate) or 0, multiplies every word's output vector;
    evaluation reads the vectors whole."""
    rate = 0.5
    layer = make_decoder(embedding_dropout=rate)
    g = np.random.default_rng(7).normal(size=(5, H1)).astype("float32")
    targets = np.array([0, 1, 2, 1, 0])
    evaluation = layer.target_log_prob(g, targets).numpy()
    np.testing.assert_allclose(layer.target_log_prob(g, targets, training=False).numpy(),
                               evaluation)
    X = layer.word_embeddings.numpy()

    def with_mask(mask):
        layer.word_embeddings.assign(X * mask)
        try:
            return layer.target_log_prob(g, targets).numpy()
        finally:
            layer.word_embeddings.assign(X)

    masks = [np.array(bits, np.float32) / (1 - rate)
             for bits in np.ndindex(*(2,) * H2)]
    dropped = 0
    for _ in range(8):
        trained = layer.target_log_prob(g, targets, training=True).numpy()
        matches = [m for m in masks if np.allclose(with_mask(m), trained, atol=1e-5)]
        assert matches, "no per-dimension mask explains the training output"
        dropped += not np.allclose(trained, evaluation, atol=1e-5)
    assert dropped > 0      # 8 draws at rate 0.5 keep all 4 dimensions with p = 16^-8


def test_default_initialisation_is_the_authors():
    """tied_lstm_rnn.py's init_weights: v and the basis logits uniform in +-0.1, the bases
    in +-0.05, b and the sense bias zero (v and the bases have thousands of entries, so
    their largest reaches the range's end; the 4 x 3 basis logits need only be non-zero)."""
    layer = SememeDecoder(VOCAB, SENSE_WORD, EDGE_SENSE, EDGE_SEMEME, NUM_SEMEMES, num_bases=R,
                          embedding_dim=200)
    layer.build((None, 300))
    for weight, limit in ((layer.sememe_kernel, 0.1), (layer.bases, 0.05)):
        values = np.abs(weight.numpy())
        assert values.max() <= limit and values.max() > 0.99 * limit, weight.name
    logits = np.abs(layer.basis_logits.numpy())
    assert logits.max() <= 0.1 and np.all(logits > 0)
    for weight in (layer.sememe_bias, layer.sense_bias):
        assert not np.any(weight.numpy()), weight.name



def test_carried_sememe_probs_sum_the_senses_of_each_sememe():
    """P(e_k carried) = sum over the senses s that contain sememe k of P(s|g), from the
    layer's sense probabilities (which the first test checks against the word
    probabilities of the loop reference, eq. 9)."""
    layer = make_decoder()
    g = np.random.default_rng(9).normal(size=(2, 3, H1)).astype("float32")
    sense_p = np.exp(layer.sense_log_probs(g).numpy())                  # [2, 3, M]
    expected = np.zeros((2, 3, NUM_SEMEMES))
    for s, k in EDGES:
        expected[..., k] += sense_p[..., s]
    np.testing.assert_allclose(layer.carried_sememe_probs(g).numpy(), expected, atol=1e-6)
    # a probability: no sense holds a sememe twice (duplicate edges are rejected)
    assert np.all((expected > 0) & (expected <= 1 + 1e-6))
