"""Every layer in ``layers/`` in a user's own Keras model: registered for serialisation,
``get_config``/``from_config`` round trips, ``model.save``/``load_model`` with equal
predictions, and the README's functional-API example run as written."""
import importlib
import inspect
import pkgutil
import re

import keras
import numpy as np
import pytest

import layers
from tests.conftest import REPO_ROOT

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

B, L, NX, T, V = 4, 6, 5, 3, 30


def _adaptive_softmax():
    h = keras.Input((8,))
    layer = layers.AdaptiveSoftmax(V, cutoffs=(10, 20))
    return keras.Model(h, layer(h)), layer, [np.random.default_rng(1).normal(size=(B, 8))]


def _bag_of_words():
    ids = keras.Input((7,), dtype="int32")
    layer = layers.BagOfWords(V)
    return keras.Model(ids, layer(ids)), layer, [np.random.default_rng(1).integers(0, V, (B, 7))]


def _gaussian_encoder():
    counts = keras.Input((V,))
    layer = layers.GaussianEncoder(V, T, hidden_units=(8,), prior_mean=0.5, prior_stddev=2.0)
    out = layer(counts)
    return keras.Model(counts, [out["mean"], out["log_variance"], out["kl"]]), layer, [
        np.random.default_rng(1).poisson(1.0, (B, V)).astype(np.float32)]


def _neural_topic_model():
    ids = keras.Input((7,), dtype="int32")
    layer = layers.NeuralTopicModel(V, T, hidden_units=(8, 8))
    topics = layer(layers.BagOfWords(V)(ids))["topics"]
    return keras.Model(ids, topics), layer, [np.random.default_rng(1).integers(0, V, (B, 7))]


def _sequence_and_topics():
    rng = np.random.default_rng(1)
    return [rng.normal(size=(B, L, NX)), rng.dirichlet(np.ones(T), B)]


def _topic_compositional_lstm():
    x, t = keras.Input((L, NX)), keras.Input((T,))
    layer = layers.TopicCompositionalLSTM(7, num_factors=4, num_topics=T, return_sequences=True)
    return keras.Model([x, t], layer([x, t])), layer, _sequence_and_topics()


def _topic_compositional_cell():
    x, t = keras.Input((L, NX)), keras.Input((T,))
    layer = layers.TopicCompositionalLSTMCell(7, num_factors=4, num_topics=T)
    h = keras.layers.RNN(layer)(x, initial_state=layer.topic_state(t))
    return keras.Model([x, t], h), layer, _sequence_and_topics()


def _topic_state():
    t = keras.Input((T,))
    cell = layers.TopicCompositionalLSTMCell(7, num_factors=4, num_topics=T)
    layer = layers.TopicState(cell)
    h0, c0, wb_t, ub_t = layer(t)
    return keras.Model(t, [wb_t, ub_t]), layer, _sequence_and_topics()[1:]


def _mixture_of_experts_cell():
    x = keras.Input((L, NX))
    layer = layers.MixtureOfExpertsLSTMCell(5, T)
    return keras.Model(x, keras.layers.RNN(layer)(x)), layer, _sequence_and_topics()[:1]


def _mixture_of_experts_lstm():
    x = keras.Input((L, NX))
    layer = layers.MixtureOfExpertsLSTM(layers.MixtureOfExpertsLSTMCell(5, T),
                                        return_sequences=True)
    return keras.Model(x, layer(x)), layer, _sequence_and_topics()[:1]


def _document_ids():
    ids = np.random.default_rng(1).integers(0, V, (B, 7))
    ids[0, 4:] = 0
    return [ids]


def _document_convolution():
    ids = keras.Input((7,), dtype="int32")
    layer = layers.DocumentConvolution(V, embedding_dim=8, filter_widths=(2, 3), num_filters=4)
    return keras.Model(ids, layer(ids)), layer, _document_ids()


def _topic_attention():
    d = keras.Input((8,))
    layer = layers.TopicAttention(T, topic_dim=5)
    return keras.Model(d, layer(d)), layer, [np.random.default_rng(1).normal(size=(B, 8))]


def _convolutional_topic_model():
    ids, tags = keras.Input((7,), dtype="int32"), keras.Input((2,), dtype="int32")
    layer = layers.ConvolutionalTopicModel(V, V, T, embedding_dim=8, filter_widths=(2, 3),
                                           num_filters=4, topic_dim=5, num_tags=3, tag_dim=2)
    outputs = layer(ids, tags=tags)
    tag_ids = np.random.default_rng(2).integers(0, 4, (B, 2))
    return keras.Model([ids, tags], outputs["topic_vector"]), layer, _document_ids() + [tag_ids]


def _topic_gate():
    h, s = keras.Input((L, 7)), keras.Input((T,))
    layer = layers.TopicGate(7)
    rng = np.random.default_rng(1)
    return keras.Model([h, s], layer([h, s])), layer, [rng.normal(size=(B, L, 7)),
                                                       rng.normal(size=(B, T))]


def _context_case(layer, query_size):
    """``layer`` on [a query sequence [B, L, query_size], s [B, T, 5], mask [B, T]]: example
    0 has no context sentence, example 1 misses its first."""
    q, s, mask = keras.Input((L, query_size)), keras.Input((T, 5)), keras.Input((T,))
    rng = np.random.default_rng(1)
    present = np.ones((B, T))
    present[0] = 0
    present[1, 0] = 0
    return keras.Model([q, s, mask], layer([q, s, mask])), layer, [
        rng.normal(size=(B, L, query_size)), rng.normal(size=(B, T, 5)), present]


def _context_attention():
    return _context_case(layers.ContextAttention(4), 7)


def _late_fusion_lstm():
    return _context_case(layers.LateFusionLSTM(7, attention_size=4), 6)


def _late_fusion_lstm_cell():
    """The cell inside a LateFusionLSTM (which builds its initial state from the context)."""
    model, layer, inputs = _late_fusion_lstm()
    return model, layer.cell, inputs


def _lda_inference():
    counts = keras.Input((V,))
    layer = layers.LDAInference(V, T, alpha=0.1, steps=20)
    rng = np.random.default_rng(1)
    model = keras.Model(counts, layer(counts))
    layer.assign(rng.uniform(0.01, 1.0, (T, V)), rng.uniform(0.1, 5.0, (T, V)))
    return model, layer, [rng.poisson(1.0, (B, V)).astype(np.float32)]


def _topic_rnn_inference():
    counts = keras.Input((V,))
    layer = layers.TopicRNNInference(V, T, hidden_units=(8,))
    out = layer(counts)
    return keras.Model(counts, [out["mean"], out["kl"]]), layer, [
        np.random.default_rng(1).poisson(1.0, (B, V)).astype(np.float32)]


def _topic_rnn_output():
    h, theta = keras.Input((L, 7)), keras.Input((T,))
    layer = layers.TopicRNNOutput(V, T)
    out = layer(h, theta)
    rng = np.random.default_rng(1)
    return keras.Model([h, theta], [out["stop_logit"], out["word_logits"], out["topic_bias"]]), \
        layer, [rng.normal(size=(B, L, 7)), rng.normal(size=(B, T))]


def _sememe_decoder():
    """Three senses of word 4 and 5, one sense elsewhere; sememes 0..3 plus a private one per
    single-sense word (the knowledge base travels in the layer's config)."""
    h = keras.Input((L, 8))
    sense_word = list(range(V)) + [4, 5]
    sense_word.sort()
    edges = [(s, 4 + w) for s, w in enumerate(sense_word)]      # every sense: its word's own
    edges += [(5, 0), (6, 1), (7, 2), (7, 3)]                     # senses of words 4 and 5
    layer = layers.SememeDecoder(V, sense_word, [s for s, _ in edges], [k for _, k in edges],
                                 num_sememes=4 + V, num_bases=2, embedding_dim=6)
    return keras.Model(h, layer(h)), layer, [np.random.default_rng(1).normal(size=(B, L, 8))]


def _mixture_of_softmaxes():
    h = keras.Input((L, 8))
    layer = layers.MixtureOfSoftmaxes(V, num_mixtures=3, embedding_dim=6)
    return keras.Model(h, layer(h)), layer, [np.random.default_rng(1).normal(size=(B, L, 8))]


def _hoisted_lstm():
    x = keras.Input((L, NX))
    layer = layers.HoistedLSTM(7, return_sequences=True, hoist=True)
    return keras.Model(x, layer(x)), layer, [np.random.default_rng(1).normal(size=(B, L, NX))]


def _tied_softmax():
    h = keras.Input((L, 8))
    layer = layers.TiedSoftmax(8, vocab_size=V, embedding_dim=6)
    return keras.Model(h, layer(h)), layer, [np.random.default_rng(1).normal(size=(B, L, 8))]


CASES = {
    layers.AdaptiveSoftmax: _adaptive_softmax,
    layers.BagOfWords: _bag_of_words,
    layers.GaussianEncoder: _gaussian_encoder,
    layers.NeuralTopicModel: _neural_topic_model,
    layers.TopicCompositionalLSTM: _topic_compositional_lstm,
    layers.TopicCompositionalLSTMCell: _topic_compositional_cell,
    layers.TopicState: _topic_state,
    layers.MixtureOfExpertsLSTMCell: _mixture_of_experts_cell,
    layers.MixtureOfExpertsLSTM: _mixture_of_experts_lstm,
    layers.DocumentConvolution: _document_convolution,
    layers.TopicAttention: _topic_attention,
    layers.ConvolutionalTopicModel: _convolutional_topic_model,
    layers.TopicGate: _topic_gate,
    layers.ContextAttention: _context_attention,
    layers.LateFusionLSTM: _late_fusion_lstm,
    layers.LateFusionLSTMCell: _late_fusion_lstm_cell,
    layers.LDAInference: _lda_inference,
    layers.TopicRNNInference: _topic_rnn_inference,
    layers.TopicRNNOutput: _topic_rnn_output,
    layers.SememeDecoder: _sememe_decoder,
    layers.MixtureOfSoftmaxes: _mixture_of_softmaxes,
    layers.TiedSoftmax: _tied_softmax,
    layers.HoistedLSTM: _hoisted_lstm,
}


def layer_classes():
    """Every public Layer class defined in the modules of ``layers`` (all of them, so that a
    new module's layers are found too)."""
    found = set()
    for info in pkgutil.iter_modules(layers.__path__):
        module = importlib.import_module(f"layers.{info.name}")
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, keras.layers.Layer)
                    and obj.__module__ == module.__name__ and not name.startswith("_")):
                found.add(obj)
    return found


def test_every_layer_is_registered_and_covered_here():
    classes = layer_classes()
    assert classes == set(CASES), "add a case for each new layer to CASES"
    for cls in classes:
        assert keras.saving.get_registered_object(f"tcnlm_tf>{cls.__name__}") is cls
        assert cls.__name__ in layers.__all__


@pytest.mark.parametrize("cls", sorted(CASES, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_round_trips_and_reloads_with_equal_predictions(cls, tmp_path):
    keras.utils.set_random_seed(0)
    model, layer, inputs = CASES[cls]()
    config = layer.get_config()
    clone = cls.from_config(config)
    assert type(clone) is cls
    revived = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(revived) is cls and revived.get_config().keys() == config.keys()
    if len(inputs) == 1:            # a one-input model takes the array, not a list of it
        inputs = inputs[0]
    expected = model.predict(inputs, verbose=0)
    model.save(tmp_path / "m.keras")
    reloaded = keras.saving.load_model(tmp_path / "m.keras")
    got = reloaded.predict(inputs, verbose=0)
    assert len(keras.tree.flatten(got)) == len(keras.tree.flatten(expected))
    for want, have in zip(keras.tree.flatten(expected), keras.tree.flatten(got)):
        np.testing.assert_allclose(have, want, atol=1e-6)
    assert reloaded.count_params() == model.count_params()


def readme_example(page: str = "README.md") -> str:
    """The Keras example of ``page`` (README.md, docs/layers.md): the python block after its
    marker comment."""
    text = (REPO_ROOT / page).read_text(encoding="utf-8")
    match = re.search(r"<!-- keras-functional-example -->\s*```python\n(.*?)```", text, re.S)
    assert match, f"{page} lost its functional-API example"
    return match.group(1)


def test_the_layers_page_shows_the_tested_example():
    assert readme_example("docs/layers.md") == readme_example()


def test_readme_functional_example_runs_and_reloads(tmp_path, monkeypatch):
    """The example fits a functional model (an encoder feeding TopicCompositionalLSTMCell in
    keras.layers.RNN) and reloads it from .keras; its own assertion compares predictions."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(readme_example(), "README.md example", "exec"), namespace)
    model, reloaded = namespace["model"], namespace["reloaded"]
    assert (tmp_path / "topic_lm.keras").is_file()
    assert any(isinstance(layer, keras.layers.RNN) and isinstance(layer.cell,
               layers.TopicCompositionalLSTMCell) for layer in reloaded.layers)
    assert model.optimizer.iterations.numpy() > 0          # it was fitted
