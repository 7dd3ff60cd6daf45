"""Tests for layers.topic_attention (the TDLM topic model and topic gate, Lau et al. 2017)."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.topic_attention import (ConvolutionalTopicModel, DocumentConvolution,
                                    TopicAttention, TopicGate)
from tests.random_weights import randomise

VOCAB, EMB, WIDTHS, FILTERS, TOPICS, TOPIC_DIM, OUT = 20, 6, (2, 3), 4, 5, 7, 15


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def make_conv():
    conv = DocumentConvolution(VOCAB, EMB, WIDTHS, FILTERS)
    conv.build((None, None))
    return randomise(conv)


def make_model(**kwargs):
    config = dict(vocab_size=VOCAB, output_size=OUT, num_topics=TOPICS, embedding_dim=EMB,
                  filter_widths=WIDTHS, num_filters=FILTERS, topic_dim=TOPIC_DIM)
    config.update(kwargs)
    model = ConvolutionalTopicModel(**config)
    model.build((None, None))
    return randomise(model, scale=0.3)


def numpy_document_vector(conv, ids):
    """Sec. 3.1 in float64: masked embeddings, one identity-activation conv per width, max over
    the windows that start at a real word (the window runs into zero vectors past the end)."""
    w = {v.name: v.numpy().astype(np.float64) for v in conv.weights}
    out = np.zeros((len(ids), conv.output_size))
    for b, doc in enumerate(ids):
        x = w["embeddings"][doc] * (doc > 0)[:, None]
        features = []
        for i, h in enumerate(conv.filter_widths):
            padded = np.concatenate([x, np.zeros((h - 1, x.shape[1]))])
            c = np.stack([np.einsum("he,hef->f", padded[t:t + h], w[f"conv_{i}_kernel"])
                          for t in range(len(doc))]) + w[f"conv_{i}_bias"]
            features.append(c[doc > 0].max(0) if (doc > 0).any() else np.zeros(c.shape[1]))
        out[b] = np.concatenate(features)
    return out


def numpy_gate(gate, h, s):
    """Eq. 3 written out gate by gate from the layer's own weights."""
    w = {v.name: v.numpy().astype(np.float64) for v in gate.weights}
    n = gate.units
    W_z, W_r, W_h = np.split(w["topic_kernel"], 3, axis=1)
    U_z, U_r = np.split(w["hidden_gate_kernel"], 2, axis=1)
    U_h = w["hidden_candidate_kernel"]
    b_z, b_r, b_h = w["gate_bias"][:n], w["gate_bias"][n:], w["candidate_bias"]
    if h.ndim == 3:
        s = s[:, None, :]
    z = sigmoid(s @ W_z + h @ U_z + b_z)
    r = sigmoid(s @ W_r + h @ U_r + b_r)
    candidate = np.tanh(s @ W_h + (r * h) @ U_h + b_h)
    return (1 - z) * h + z * candidate


DOCS = np.array([[3, 7, 1, 9, 4, 0, 0, 0, 0, 0],
                 [5, 0, 0, 0, 0, 0, 0, 0, 0, 0],      # shorter than every window
                 [2, 8, 0, 6, 0, 0, 0, 0, 0, 0],      # a padding id between words
                 [19, 11, 12, 13, 14, 15, 16, 17, 18, 10]])


def test_output_shapes():
    ids = DOCS
    assert DocumentConvolution(VOCAB, EMB, WIDTHS, FILTERS)(ids).shape == (4, 8)
    attention = TopicAttention(TOPICS, TOPIC_DIM)(np.ones((4, 9), "float32"))
    assert attention["attention"].shape == (4, TOPICS)
    assert attention["topic_vector"].shape == (4, TOPIC_DIM)
    out = ConvolutionalTopicModel(VOCAB, OUT, TOPICS, embedding_dim=EMB, filter_widths=WIDTHS,
                                  num_filters=FILTERS, topic_dim=TOPIC_DIM, num_tags=3,
                                  tag_dim=2)(ids, tags=np.array([[1, 2], [0, 0], [3, 0], [1, 0]]))
    assert {k: tuple(v.shape) for k, v in out.items()} == {
        "document_vector": (4, 8 + 2), "attention": (4, TOPICS),
        "mean_topic": (4, TOPIC_DIM), "topic_vector": (4, TOPIC_DIM)}
    gate = TopicGate(6)
    s = np.ones((4, TOPIC_DIM), "float32")
    assert gate([np.ones((4, 3, 6), "float32"), s]).shape == (4, 3, 6)
    assert gate([np.ones((4, 6), "float32"), s]).shape == (4, 6)


def test_document_convolution_initialisation():
    conv = DocumentConvolution(VOCAB, EMB, WIDTHS, FILTERS)
    conv.build((None, None))
    emb = conv.embeddings.numpy()
    assert emb.shape == (VOCAB, EMB) and 0.4 / EMB < np.abs(emb).max() <= 0.5 / EMB
    for i, h in enumerate(WIDTHS):
        kernel = conv.kernels[i].numpy()
        assert kernel.shape == (h, EMB, FILTERS) and np.abs(kernel).max() <= 0.2
        assert not conv.biases[i].numpy().any()
    assert conv.output_size == FILTERS * len(WIDTHS)


def test_document_convolution_matches_numpy():
    conv = make_conv()
    np.testing.assert_allclose(conv(DOCS).numpy(), numpy_document_vector(conv, DOCS), atol=1e-5)


def test_padding_does_not_change_document_vector():
    conv = make_conv()
    short = DOCS[:3]
    long = np.pad(short, ((0, 0), (0, 15)))
    d = conv(short).numpy()
    np.testing.assert_allclose(conv(long).numpy(), d, atol=1e-6)
    conv.embeddings.assign(tf.tensor_scatter_nd_update(conv.embeddings, [[0]], [np.full(EMB, 9.)]))
    np.testing.assert_allclose(conv(long).numpy(), d, atol=1e-6)


def test_all_padding_document_gives_zero_and_finite_gradients():
    conv = make_conv()
    ids = np.stack([np.zeros(10, int), DOCS[0]])
    with tf.GradientTape() as tape:
        d = conv(ids)
        loss = tf.reduce_sum(d ** 2)
    np.testing.assert_array_equal(d.numpy()[0], 0.0)
    assert np.abs(d.numpy()[1]).min() > 0
    for grad in tape.gradient(loss, conv.trainable_weights):
        assert np.isfinite(tf.convert_to_tensor(grad).numpy()).all()


def test_topic_attention_matches_numpy():
    layer = TopicAttention(TOPICS, TOPIC_DIM)
    d = np.random.default_rng(1).normal(size=(6, 9)).astype("float32")
    out = layer(d)
    A, B = layer.topic_inputs.numpy(), layer.topic_outputs.numpy()
    assert A.shape == (TOPICS, 9) and B.shape == (TOPICS, TOPIC_DIM)
    p = softmax(d @ A.T)
    np.testing.assert_allclose(out["attention"].numpy(), p, atol=1e-6)
    np.testing.assert_allclose(out["attention"].numpy().sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(out["topic_vector"].numpy(), p @ B, atol=1e-6)
    np.testing.assert_array_equal(layer.topic_vectors().numpy(), B)


def test_model_dropout_only_in_training():
    model = make_model(dropout=0.5)
    first, second = model(DOCS), model(DOCS)
    for key in first:
        np.testing.assert_array_equal(first[key].numpy(), second[key].numpy())
    np.testing.assert_array_equal(first["topic_vector"].numpy(), first["mean_topic"].numpy())
    np.testing.assert_allclose(first["document_vector"].numpy(),
                               model.convolution(DOCS).numpy(), atol=1e-6)
    trained = model(DOCS, training=True)
    assert not np.allclose(trained["topic_vector"].numpy(), trained["mean_topic"].numpy())
    assert not np.allclose(trained["document_vector"].numpy(), first["document_vector"].numpy())


@pytest.mark.parametrize("dropout_on", ["embeddings", "document"])
def test_dropout_hits_the_embeddings_or_the_document_vector(dropout_on):
    """``document`` (the paper's text): every feature of d in training is 0 or d / keep.
    ``embeddings`` (the authors' code): d is the pooling of dropped word embeddings, which is
    not such a dropped copy of d, and equals the pooling of the embeddings with the same
    elements dropped. s is dropped either way."""
    keras.utils.set_random_seed(4)
    model = make_model(dropout=0.5, dropout_on=dropout_on)
    assert ConvolutionalTopicModel.from_config(model.get_config()).dropout_on == dropout_on
    clean = model(DOCS)["document_vector"].numpy()
    trained = model(DOCS, training=True)
    d = trained["document_vector"].numpy()
    dropped_copy = np.isclose(d, 0.0, atol=1e-7) | np.isclose(d, clean / 0.5, atol=1e-5)
    assert not np.allclose(d, clean)
    assert dropped_copy.all() == (dropout_on == "document")
    assert not np.allclose(trained["topic_vector"].numpy(), trained["mean_topic"].numpy())
    if dropout_on == "embeddings":
        keras.utils.set_random_seed(4)
        again = make_model(dropout=0.5, dropout_on=dropout_on)
        again(DOCS)
        words = again.convolution.embed(DOCS)
        masked = again.dropout_layer(words, training=True)
        np.testing.assert_allclose(again.convolution.pool(masked, DOCS).numpy(), d, atol=1e-5)


def test_dropout_placement_is_checked():
    with pytest.raises(ValueError, match="dropout_on"):
        make_model(dropout_on="d")


def test_model_matches_its_parts():
    model = make_model()
    out = model(DOCS)
    d = numpy_document_vector(model.convolution, DOCS)
    A, B = model.attention.topic_inputs.numpy(), model.topic_vectors().numpy()
    p = softmax(d @ A.T)
    np.testing.assert_allclose(out["attention"].numpy(), p, atol=1e-5)
    np.testing.assert_allclose(out["mean_topic"].numpy(), p @ B, atol=1e-5)
    W, b = model.word_output.kernel.numpy(), model.word_output.bias.numpy()
    np.testing.assert_allclose(model.word_logits(out["topic_vector"]).numpy(),
                               (p @ B) @ W + b, atol=1e-5)


def test_tags_extend_the_document_vector():
    model = make_model(num_tags=4, tag_dim=3)
    tag_table = model.tag_embeddings.numpy()
    assert tag_table.shape == (5, 3) and model.attention.topic_inputs.shape == (TOPICS, 8 + 3)
    tags = np.array([[1, 3], [2, 0], [0, 0], [4, 4]])
    out = model(DOCS, tags=tags)["document_vector"].numpy()
    plain = model(DOCS)["document_vector"].numpy()
    d = model.convolution(DOCS).numpy()
    np.testing.assert_allclose(out[:, :8], d, atol=1e-6)
    np.testing.assert_allclose(plain[:, :8], d, atol=1e-6)
    np.testing.assert_array_equal(plain[:, 8:], 0.0)
    expected = np.stack([tag_table[[t for t in row if t]].sum(0) for row in tags])
    np.testing.assert_allclose(out[:, 8:], expected, atol=1e-6)
    assert not np.allclose(out[0], plain[0])
    zeros = model(DOCS, tags=np.zeros((4, 2), int))
    for key, value in model(DOCS).items():
        np.testing.assert_allclose(zeros[key].numpy(), value.numpy(), atol=1e-6)


def test_tag_embedding_initialisation():
    model = ConvolutionalTopicModel(VOCAB, OUT, TOPICS, num_tags=50, tag_dim=4)
    model.build((None, None))
    table = model.tag_embeddings.numpy()
    assert table.shape == (51, 4) and 0.0008 < np.abs(table).max() <= 0.001


def test_topic_word_is_softmax_of_topic_vectors_through_the_word_head():
    model = make_model()
    beta = model.topic_word().numpy()
    B = model.topic_vectors().numpy()
    W, b = model.word_output.kernel.numpy(), model.word_output.bias.numpy()
    assert beta.shape == (TOPICS, OUT)
    np.testing.assert_allclose(beta.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(beta, softmax(B @ W + b), atol=1e-6)


def test_label_logits():
    model = make_model(num_labels=3, num_tags=2, tag_dim=2, dropout=0.5)
    out = model(DOCS, tags=np.array([[1], [2], [0], [1]]), training=True)
    logits = model.label_logits(out).numpy()
    assert logits.shape == (4, 3)
    features = np.concatenate([out["document_vector"], out["mean_topic"]], -1)
    W, b = model.label_output.kernel.numpy(), model.label_output.bias.numpy()
    np.testing.assert_allclose(logits, features @ W + b, atol=1e-5)
    with pytest.raises(ValueError, match="num_labels"):
        make_model().label_logits(out)
    with pytest.raises(ValueError, match="num_tags"):
        make_model()(DOCS, tags=np.ones((4, 1), int))


@pytest.mark.parametrize("kwargs", [
    {"vocab_size": 0}, {"output_size": -1}, {"num_topics": 2.5}, {"embedding_dim": True},
    {"filter_widths": ()}, {"filter_widths": (2, 0)}, {"filter_widths": 3},
    {"num_filters": 0}, {"topic_dim": 0}, {"dropout": 1.0}, {"dropout": -0.1},
    {"num_tags": -1}, {"tag_dim": 0}, {"num_labels": -2},
], ids=str)
def test_bad_arguments_raise(kwargs):
    config = dict(vocab_size=VOCAB, output_size=OUT, num_topics=TOPICS)
    config.update(kwargs)
    with pytest.raises(ValueError):
        ConvolutionalTopicModel(**config)


def test_bad_layer_arguments_raise():
    with pytest.raises(ValueError, match="units"):
        TopicGate(0)
    with pytest.raises(ValueError, match="num_topics"):
        TopicAttention(0)
    with pytest.raises(ValueError, match="TopicGate expects"):
        TopicGate(4)([np.ones((2, 3, 5), "float32"), np.ones((2, 2), "float32")])


@pytest.mark.parametrize("rank", [2, 3])
def test_topic_gate_matches_numpy(rank):
    gate = TopicGate(6)
    rng = np.random.default_rng(2)
    h = rng.normal(size=(3, 4, 6) if rank == 3 else (3, 6)).astype("float32")
    s = rng.normal(size=(3, 5)).astype("float32")
    gate.build([h.shape, s.shape])
    np.testing.assert_array_equal(gate.gate_bias.numpy(), 1.0)
    np.testing.assert_array_equal(gate.candidate_bias.numpy(), 0.0)
    assert gate.topic_kernel.shape == (5, 18) and gate.hidden_gate_kernel.shape == (6, 12)
    np.testing.assert_allclose(gate([h, s]).numpy(), numpy_gate(gate, h, s), atol=1e-5)
    randomise(gate)
    np.testing.assert_allclose(gate([h, s]).numpy(), numpy_gate(gate, h, s), atol=1e-5)


def test_topic_gate_broadcasts_one_topic_over_time():
    gate = TopicGate(6)
    rng = np.random.default_rng(4)
    h = rng.normal(size=(2, 5, 6)).astype("float32")
    s = rng.normal(size=(2, 3)).astype("float32")
    gate.build([h.shape, s.shape])
    randomise(gate, seed=3)
    sequence = gate([h, s]).numpy()
    for t in range(5):
        np.testing.assert_allclose(sequence[:, t], gate([h[:, t], s]).numpy(), atol=1e-6)


@pytest.mark.parametrize("make, inputs", [
    (lambda: DocumentConvolution(VOCAB, EMB, WIDTHS, FILTERS), lambda: [DOCS]),
    (lambda: TopicAttention(TOPICS, TOPIC_DIM), lambda: [np.ones((2, 9), "float32")]),
    (lambda: ConvolutionalTopicModel(VOCAB, OUT, TOPICS, embedding_dim=EMB, filter_widths=WIDTHS,
                                     num_filters=FILTERS, topic_dim=TOPIC_DIM, dropout=0.3,
                                     num_tags=3, tag_dim=2, num_labels=4), lambda: [DOCS]),
    (lambda: TopicGate(6), lambda: [[np.ones((2, 3, 6), "float32"),
                                     np.ones((2, 4), "float32")]]),
], ids=["DocumentConvolution", "TopicAttention", "ConvolutionalTopicModel", "TopicGate"])
def test_config_round_trip(make, inputs):
    layer = make()
    layer(*inputs())
    randomise(layer)
    expected = layer(*inputs())
    clone = type(layer).from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    clone(*inputs())
    clone.set_weights(layer.get_weights())
    for want, got in zip(keras.tree.flatten(expected), keras.tree.flatten(clone(*inputs()))):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)
