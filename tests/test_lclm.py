"""The larger-context LM (Wang and Cho 2016, as Lau et al. 2017's lclm baseline): the
``preceding`` field the pipeline and serving build, the attention with output fusion and the
late-fusion LSTM against NumPy computations of their equations, that only late fusion lets
the recurrence see the context, the model's distributions and a tiny training run."""
import math

import numpy as np
import pytest
import tensorflow as tf

from layers.context_attention import ContextAttention, LateFusionLSTM
from tcnlm_tf.config import ModelConfig, RunConfig
from tcnlm_tf.data import pipeline
from tcnlm_tf.data.loading import SplitArrays, encode_split
from tcnlm_tf.data.vocab import LM_SPECIALS, TOPIC_SPECIALS, UNK, Vocabulary
from tcnlm_tf.models import build_model
from tcnlm_tf.models.lclm import LCLM
from tcnlm_tf.models.registry import MODELS
from tests.conftest import TINY, run_flags

N, W = 3, 2
OPTIONS = {"sentences": N, "words": W}

#: 3 documents, 7 sentences, as (LM ids, topic ids) per sentence
SENTENCES = [
    [([3, 4, 5], [5, 6, 7]), ([8, 9], []), ([3], [8]), ([4, 5, 6, 7, 8], [9, 4])],   # doc 0
    [([6, 7], [3])],                                                                # doc 1
    [([9, 9], [2, 2]), ([5], [1])],                                                 # doc 2
]
#: ``preceding`` of each sentence (N = 3 rows of W = 2 ids, the sentence just before last)
EXPECTED = [
    [[0, 0], [0, 0], [0, 0]],      # a document's first sentence: nothing before it
    [[0, 0], [0, 0], [5, 6]],      # first W of [5, 6, 7]
    [[0, 0], [5, 6], [0, 0]],      # the sentence without a topic word is an empty row
    [[5, 6], [0, 0], [8, 0]],
    [[0, 0], [0, 0], [0, 0]],      # doc 1 does not see doc 0
    [[0, 0], [0, 0], [0, 0]],
    [[0, 0], [0, 0], [2, 2]],
]


def hand_made_split() -> SplitArrays:
    sentences = [s for document in SENTENCES for s in document]
    lm, topic = zip(*sentences)
    return SplitArrays(
        lm_ids=np.concatenate(lm).astype(np.int32),
        sent_offsets=np.cumsum([0] + [len(s) for s in lm]).astype(np.int64),
        topic_ids=np.concatenate([np.asarray(t, np.int32) for t in topic]),
        topic_offsets=np.cumsum([0] + [len(t) for t in topic]).astype(np.int64),
        doc_offsets=np.cumsum([0] + [len(d) for d in SENTENCES]).astype(np.int64),
        doc_lines=np.arange(1, len(SENTENCES) + 1, dtype=np.int64))


def test_preceding_holds_the_bags_of_the_sentences_before_in_the_document():
    split = hand_made_split()
    examples = pipeline.sentence_examples(split, seq_len=4)   # sentence 3 is 2 sequences
    spec = pipeline.ContextSpec(("preceding", "bow"), 4, OPTIONS)
    batch = next(iter(pipeline.sentence_dataset(split, examples, 20, spec)))
    expected = np.asarray(EXPECTED, np.int32)[[0, 1, 2, 3, 3, 4, 5, 6]]
    np.testing.assert_array_equal(batch["preceding"].numpy(), expected)
    assert batch["preceding"].dtype == tf.int32
    # bow beside it is unchanged: doc 0 minus sentence 1 (no topic word), first 4
    np.testing.assert_array_equal(batch["bow"].numpy()[1], [5, 6, 7, 8])


def test_whole_documents_read_their_last_sentences():
    split = hand_made_split()
    rows = pipeline.split_context(pipeline.ContextSpec(("preceding",), options=OPTIONS),
                                  split)["preceding"]
    np.testing.assert_array_equal(rows.numpy(), [[[0, 0], [8, 0], [9, 4]],
                                                 [[0, 0], [0, 0], [3, 0]],
                                                 [[0, 0], [2, 2], [1, 0]]])


# ------------------------------------------------------------------------- serving
WORDS = ["alpha", "beta", "gamma", "delta", "the", "of", "and"]
LM = Vocabulary(list(LM_SPECIALS) + WORDS, unk=UNK)
TOPIC = Vocabulary(list(TOPIC_SPECIALS) + ["alpha", "beta", "gamma", "delta"])


def tiny_config(**options) -> RunConfig:
    return RunConfig(model=ModelConfig(model="lclm", hidden_size=8, embedding_dim=6,
                                       dropout=0.0, options=options))


@pytest.fixture(scope="module")
def serving_module():
    from tcnlm_tf.runs.loading import Run, _dummy_batch
    from tcnlm_tf.serving.module import ServingModule

    config = tiny_config(context_sentences=N, context_words=W)
    model = build_model(config, LM, TOPIC)
    model(_dummy_batch(model))
    return ServingModule(Run(None, config, LM, TOPIC, model, ""))


def test_serving_reads_the_text_before_the_sentence_as_training_does(serving_module):
    """For the last sentence of each document, the training pipeline's ``preceding`` row
    equals serving's for the text before it (TAB-separated; a token-less sentence is left
    out as the corpus reader does, one without a topic word stays as an empty row)."""
    documents = [
        [["alpha", "the", "beta", "gamma"], ["the", "of"], ["delta", "zzz"], ["beta"],
         ["gamma", "alpha"]],
        [["the", "alpha"], ["beta"]],
        [["delta", "and"]],
    ]
    split = encode_split(documents, LM, TOPIC)
    examples = pipeline.sentence_examples(split, seq_len=30)
    batch = next(iter(pipeline.sentence_dataset(
        split, examples, 20, pipeline.ContextSpec(("preceding",), options=OPTIONS))))
    last = split.doc_offsets[1:] - 1
    texts = ["\t".join(" ".join(s) for s in d[:-1]) for d in documents]
    texts[0] = texts[0].replace("zzz\t", "zzz\t\t")                   # an empty sentence
    served = serving_module._context_batch(tf.constant(texts + [""]))["preceding"].numpy()
    np.testing.assert_array_equal(served[:3], batch["preceding"].numpy()[last])
    np.testing.assert_array_equal(served[3], np.zeros((N, W)))
    t = TOPIC.id
    np.testing.assert_array_equal(served[0], [[0, 0], [t("delta"), 0], [t("beta"), 0]])
    assert serving_module.context_rule() == "preceding-sentences"


# ------------------------------------------------------------------------ the layer
def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_fusion(weights, h, s, mask):
    """h' of the docstring's equations, position by position: [B, L, H]."""
    out = np.zeros_like(h)
    for b in range(h.shape[0]):
        for t in range(h.shape[1]):
            real = np.flatnonzero(mask[b])
            z = np.zeros(s.shape[-1])
            if len(real):
                e = np.array([weights["v"] @ np.tanh(s[b, j] @ weights["W_a"]
                                                     + h[b, t] @ weights["U_a"] + weights["b_a"])
                              for j in real])
                alpha = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
                z = alpha @ s[b, real]
            r = sigmoid(z @ weights["W_r"] + h[b, t] @ weights["U_r"] + weights["b_r"])
            out[b, t] = h[b, t] + r * np.tanh(z @ weights["W_z"] + weights["b_z"])
    return out


@pytest.fixture(scope="module")
def fusion():
    """The layer (H = 5, e = 4, a = 3) with fixed random weights, all biases non-zero, and
    inputs: 3 examples of L = 2 positions, N = 3 sentences; example 1 misses sentence 0,
    example 2 has none (a document's first sentence)."""
    rng = np.random.default_rng(0)
    layer = ContextAttention(3)
    h = rng.normal(size=(3, 2, 5)).astype(np.float32)
    s = rng.normal(size=(3, 3, 4)).astype(np.float32)
    mask = np.array([[1, 1, 1], [0, 1, 1], [0, 0, 0]], np.float32)
    layer([h, s, mask])
    weights = {"W_a": layer.context_kernel, "U_a": layer.query_kernel, "b_a": layer.attention_bias,
               "v": layer.score_vector, "W_r": layer.gate_context_kernel,
               "U_r": layer.gate_hidden_kernel, "b_r": layer.gate_bias,
               "W_z": layer.fusion_kernel, "b_z": layer.fusion_bias}
    values = {}
    for name, variable in weights.items():
        values[name] = rng.normal(size=variable.shape).astype(np.float32)
        variable.assign(values[name])
    return layer, values, h, s, mask


def test_the_layer_computes_the_attention_and_fusion_equations(fusion):
    layer, weights, h, s, mask = fusion
    np.testing.assert_allclose(layer([h, s, mask]).numpy(), numpy_fusion(weights, h, s, mask),
                               rtol=1e-5, atol=1e-5)


def test_missing_sentences_get_no_attention_and_no_context_gives_z_zero(fusion):
    layer, weights, h, s, mask = fusion
    alpha = layer.attention(h, s, mask).numpy()                           # [B, L, N]
    np.testing.assert_allclose(alpha[:2].sum(-1), 1.0, atol=1e-6)
    assert (alpha[1, :, 0] == 0).all() and (alpha[2] == 0).all()
    assert (alpha[0] > 0).all()
    # what a missing sentence holds does not matter
    other = s.copy()
    other[1, 0] += 3.0
    other[2] -= 2.0
    np.testing.assert_allclose(layer([h, other, mask]).numpy()[1:],
                               layer([h, s, mask]).numpy()[1:], atol=1e-6)
    # z = 0: h' = h + σ(U_r h + b_r) ⊙ tanh(b_z)
    no_context = h[2] + sigmoid(h[2] @ weights["U_r"] + weights["b_r"]) * np.tanh(weights["b_z"])
    np.testing.assert_allclose(layer([h, s, mask]).numpy()[2], no_context, atol=1e-5)


def test_the_layer_round_trips_its_config():
    layer = ContextAttention(7, name="att")
    again = ContextAttention.from_config(layer.get_config())
    assert again.attention_size == 7 and again.name == "att"
    with pytest.raises(ValueError):
        ContextAttention(0)


def numpy_late_fusion(weights, x, s, mask):
    """h_t of LateFusionLSTMCell's docstring, step by step from zero state: [B, L, n]."""
    batch, length, _ = x.shape
    n = weights["U"].shape[0]
    out = np.zeros((batch, length, n))
    for b in range(batch):
        h, c = np.zeros(n), np.zeros(n)
        real = np.flatnonzero(mask[b])
        for t in range(length):
            z = np.zeros(s.shape[-1])
            if len(real):
                e = np.array([weights["v"] @ np.tanh(s[b, j] @ weights["W_a"]
                                                     + h @ weights["U_a"] + weights["b_a"])
                              for j in real])
                z = (np.exp(e - e.max()) / np.exp(e - e.max()).sum()) @ s[b, real]
            gates = x[b, t] @ weights["W"] + h @ weights["U"] + weights["b"]
            i, f, g, o = (gates[k * n:(k + 1) * n] for k in range(4))
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
            r = sigmoid(z @ weights["W_r"] + c @ weights["U_r"] + weights["b_r"])
            h = sigmoid(o) * (np.tanh(c) + r * np.tanh(z @ weights["W_z"] + weights["b_z"]))
            out[b, t] = h
    return out


def test_the_late_fusion_lstm_computes_its_equations():
    rng = np.random.default_rng(2)
    layer = LateFusionLSTM(5, attention_size=3)
    x = rng.normal(size=(3, 4, 6)).astype(np.float32)
    s = rng.normal(size=(3, 3, 4)).astype(np.float32)
    mask = np.array([[1, 1, 1], [0, 1, 1], [0, 0, 0]], np.float32)
    layer([x, s, mask])
    attention = layer.cell.context_attention
    variables = {"W": layer.cell.kernel, "U": layer.cell.recurrent_kernel, "b": layer.cell.bias,
                 "W_a": attention.context_kernel, "U_a": attention.query_kernel,
                 "b_a": attention.attention_bias, "v": attention.score_vector,
                 "W_r": attention.gate_context_kernel, "U_r": attention.gate_hidden_kernel,
                 "b_r": attention.gate_bias, "W_z": attention.fusion_kernel,
                 "b_z": attention.fusion_bias}
    weights = {}
    for name, variable in variables.items():
        weights[name] = rng.normal(scale=0.5, size=variable.shape).astype(np.float32)
        variable.assign(weights[name])
    np.testing.assert_allclose(layer([x, s, mask]).numpy(), numpy_late_fusion(weights, x, s, mask),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fusion_mode", ["late", "output"])
def test_only_late_fusion_lets_the_recurrence_see_the_context(fusion_mode):
    """Two documents' contexts, the same words. With late fusion h_t (which feeds the next
    step's gates) differs, so the memory carried from step 2 on differs too, while the memory
    of step 1, computed before any context entered, does not; with output fusion the LSTM's
    carried state never depends on the context, only its fused outputs do."""
    tf.keras.utils.set_random_seed(3)
    model = build_model(tiny_config(context_sentences=2, context_words=3,
                                    lclm_fusion=fusion_mode), LM, TOPIC)
    one, other = (model.context(model_batch(p)) for p in (
        [[[0, 0, 0], [1, 2, 0]], [[3, 0, 0], [4, 4, 1]]],
        [[[2, 2, 2], [3, 0, 0]], [[1, 0, 0], [1, 2, 3]]]))
    inputs = model_batch(np.zeros((2, 2, 3)))["inputs"]

    def run(context, steps):
        hidden, [[h, c]] = model.encode(inputs[:, :steps], context)
        return hidden.numpy(), h.numpy(), c.numpy()

    first, second = run(one, 1), run(other, 1)
    assert np.abs(first[0] - second[0]).max() > 1e-4                # the outputs see it
    np.testing.assert_allclose(first[2], second[2], atol=1e-7)       # c_1 never does
    first, second = run(one, 5), run(other, 5)
    assert np.abs(first[0] - second[0]).max() > 1e-4
    if fusion_mode == "late":
        assert isinstance(model.rnns[-1], LateFusionLSTM)
        assert np.abs(first[2] - second[2]).max() > 1e-4             # c_5 saw h_1..h_4
        assert np.abs(first[1] - second[1]).max() > 1e-4
    else:
        assert not any(isinstance(layer, LateFusionLSTM) for layer in model.rnns)
        np.testing.assert_allclose(first[2], second[2], atol=1e-7)
        np.testing.assert_allclose(first[1], second[1], atol=1e-7)


# ------------------------------------------------------------------------ the model
def model_batch(preceding):
    rng = np.random.default_rng(1)
    ids = rng.integers(3, len(LM), size=(2, 6))
    return {"inputs": tf.constant(ids[:, :5], tf.int32),
            "targets": tf.constant(ids[:, 1:], tf.int32), "weights": tf.ones([2, 5]),
            "preceding": tf.constant(preceding, tf.int32)}


def test_the_model_is_a_distribution_that_reads_the_preceding_sentences():
    model = build_model(tiny_config(context_sentences=2, context_words=3), LM, TOPIC)
    assert isinstance(model, LCLM) and model.context_options == {"sentences": 2, "words": 3}
    preceding = [[[0, 0, 0], [1, 2, 0]], [[3, 0, 0], [4, 4, 1]]]
    batch = model_batch(preceding)
    target = model(batch).target_log_probs.numpy()
    context = model.context(batch)
    np.testing.assert_array_equal(context["sentence_mask"].numpy(), [[0, 1], [1, 1]])
    hidden, _ = model.encode(batch["inputs"], context)
    full = model.log_probs(hidden, context).numpy()
    np.testing.assert_allclose(np.exp(full).sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(
        np.take_along_axis(full, batch["targets"].numpy()[..., None], -1)[..., 0], target,
        atol=1e-5)
    changed = model(model_batch([[[0, 0, 0], [3, 0, 0]], [[3, 0, 0], [4, 4, 1]]]))
    changed = changed.target_log_probs.numpy()
    assert np.abs(changed[0] - target[0]).max() > 1e-6
    np.testing.assert_allclose(changed[1], target[1], atol=1e-6)
    # no preceding sentence at all differs from having one
    empty = model(model_batch(np.zeros((2, 2, 3)))).target_log_probs.numpy()
    assert np.abs(empty - target).max() > 1e-6


@pytest.mark.slow
def test_tiny_training_run_end_to_end(tmp_path):
    """A whole epoch through train.run; the reloaded run's evaluation of the test file (the
    evaluate commands' path) gives the test perplexity training reported, and it generates
    from an empty document."""
    from evaluate.common import read_documents, split_file
    from tcnlm_tf.metrics.evaluation import corpus_nll, generate
    from tcnlm_tf.metrics.perplexity import perplexity
    from tcnlm_tf.runs.loading import load_run
    from train.run import main

    flags = ["--model", "lclm", *MODELS["lclm"].test_flags, "--max-steps", "1000"]
    metrics = main(TINY + flags + run_flags(tmp_path, "lclm"))
    assert metrics["stopped"] != "max_steps" and math.isfinite(metrics["test_perplexity"])
    run = load_run(tmp_path / "runs" / "lclm")
    assert run.model.context_options == {"sentences": 2, "words": 6}
    documents = read_documents(split_file(run, "test"))
    assert max(len(d) for d in documents) > 2               # some sentences have 2 before
    nll, tokens = corpus_nll(run, documents)
    assert tokens == metrics["test_tokens"]
    assert perplexity(nll, tokens) == pytest.approx(metrics["test_perplexity"], rel=1e-5)
    [words] = generate(run, None, num=1, greedy=True, max_words=5)
    assert len(words) <= 5
