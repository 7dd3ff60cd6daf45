"""TCNLM's objective is exact: a sentence cut into several sequences
counts its topic-model term once (or each document once, ``--ntm-weighting document``), and
the gradient clip sees the unscaled model's gradients whatever ``--topic-word-scale`` and
``--topic-kernel-scale`` are."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.config import ModelConfig, RunConfig
from tcnlm_tf.data import pipeline
from tcnlm_tf.data.loading import encode_split
from tcnlm_tf.data.vocab import LM_SPECIALS, TOPIC_SPECIALS, UNK, Vocabulary
from tcnlm_tf.models import build_model
from train.trainer import clip_gradients

WORDS = [f"w{i}" for i in range(20)]
LM = Vocabulary(list(LM_SPECIALS) + WORDS, unk=UNK)
TOPIC = Vocabulary(list(TOPIC_SPECIALS) + WORDS[:12])
RNG = np.random.default_rng(0)
#: document 0: a 70-word sentence (71 targets: 3 sequences of 30) and a 4-word one;
#: document 1: one 5-word sentence
DOCS = [[list(RNG.choice(WORDS, 70)), list(RNG.choice(WORDS, 4))],
        [list(RNG.choice(WORDS, 5))]]
SPLIT = encode_split(DOCS, LM, TOPIC)


def tcnlm(topic_word_scale=30.0, topic_kernel_scale=10.0, weighting="sentence"):
    options = {"num_topics": 3, "num_factors": 4, "ntm_hidden_units": [8],
               "diversity_weight": 0.1, "topic_word_scale": topic_word_scale,
               "topic_kernel_scale": topic_kernel_scale, "ntm_weighting": weighting}
    config = RunConfig(model=ModelConfig(model="tcnlm", hidden_size=8, embedding_dim=6,
                                         dropout=0.0, decoder="softmax", options=options))
    return build_model(config, LM, TOPIC)


def all_examples(model):
    examples = pipeline.sentence_examples(SPLIT, seq_len=30)
    assert len(examples) == 5 and list(examples.sentences) == [0, 0, 0, 1, 2]
    return next(iter(pipeline.sentence_dataset(SPLIT, examples, 10, model.context_spec)))


@pytest.mark.parametrize("weighting", ["sentence", "document"])
def test_a_70_word_sentence_counts_its_topic_model_term_once(weighting):
    model = tcnlm(weighting=weighting)
    batch = all_examples(model)
    aux = float(model.context(batch, training=False).aux_loss)
    ntm = model._ntm(batch)
    term = (ntm["kl"] - ntm["reconstruction"]).numpy().astype(np.float64)   # [5], per example
    np.testing.assert_allclose(term[:3], term[0], rtol=1e-6)   # the 3 sequences share a bow
    diversity = 0.1 * float(model.ntm.diversity())
    if weighting == "sentence":   # 3 sentences, each once
        expected = term[0] + term[3] + term[4] - 3 * diversity
    else:                         # 2 documents, each once: the mean of its examples
        expected = term[:4].mean() + term[4] - 2 * diversity
    np.testing.assert_allclose(aux, expected, rtol=1e-5)


def effective_weights(model):
    """Every weight as the model uses it: stored value times its scale."""
    scales = model.weight_scales(model.trainable_variables)
    return [v.numpy() * s for v, s in zip(model.trainable_variables, scales)]


def gradients(model, batch):
    with tf.GradientTape() as tape:
        terms = model.loss_terms(batch, training=False)
        loss = (terms["nll_sum"] + terms["aux_loss"]) / terms["tokens"]
    return tape.gradient(loss, model.trainable_variables)


def test_clipping_under_scale_equals_clipping_of_the_unscaled_model():
    scaled, plain = tcnlm(30.0, 10.0), tcnlm(1.0, 1.0)
    batch = all_examples(scaled)
    scaled(batch), plain(batch)
    scales = scaled.weight_scales(scaled.trainable_variables)
    assert sorted(set(scales)) == [1.0, 10.0, 30.0] and scales.count(10.0) == 2
    for v, weight, s in zip(plain.trainable_variables, effective_weights(scaled), scales):
        v.assign(weight)   # the same function: plain's weights are scaled's times s
    assert plain.weight_scales(plain.trainable_variables) == [1.0] * len(scales)
    g_scaled, g_plain = gradients(scaled, batch), gradients(plain, batch)
    for a, b, s in zip(g_scaled, g_plain, scales):
        np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(),
                                   s * tf.convert_to_tensor(b).numpy(), rtol=1e-4, atol=1e-6)
    clip = 0.01   # far below the norm: both are clipped
    c_scaled, n_scaled = clip_gradients([tf.convert_to_tensor(g) for g in g_scaled], scales, clip)
    c_plain, n_plain = clip_gradients([tf.convert_to_tensor(g) for g in g_plain],
                                      [1.0] * len(scales), clip)
    assert float(n_plain) > 10 * clip
    np.testing.assert_allclose(float(n_scaled), float(n_plain), rtol=1e-4)
    for a, b, s in zip(c_scaled, c_plain, scales):
        np.testing.assert_allclose(a.numpy(), s * b.numpy(), rtol=1e-4, atol=1e-7)
    # the clip of the stored gradients (tf.clip_by_global_norm) would be another one
    stored_norm = float(tf.linalg.global_norm([tf.convert_to_tensor(g) for g in g_scaled]))
    assert stored_norm > 2 * float(n_plain)


def test_gradients_command_reports_both_norms(tmp_path, capsys):
    """evaluate.gradients: the stored topic-word weights dominate the stored norm; the norm
    of the weights the model uses is the smaller one, and is what the clip sees."""
    from evaluate.gradients import main as gradients
    from tests.test_evaluate import TINY

    result = gradients(TINY + ["--model", "tcnlm", "--num-topics", "4", "--num-factors", "8",
                               "--ntm-hidden", "16,16", "--cache-dir", str(tmp_path)])
    assert result["stored"]["norm"] > result["used"]["norm"] > 0
    assert result["stored"]["shares"][0][0].endswith("topic_word_weights")
    assert "global norm" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        gradients(["--resume"])
    assert "drop --resume" in capsys.readouterr().err
    # the vectors would never be loaded, so --embeddings is refused, even with no file
    with pytest.raises(SystemExit):
        gradients(["--model", "tdlm", "--embeddings", str(tmp_path / "no-such-vectors.bin")])
    assert "--embeddings would load the word vectors: drop it" in capsys.readouterr().err


def test_gradient_norms_are_summed_where_float32_squares_overflow():
    """A float32 gradient of 1e20 is finite, its square is not: the norm and shares come from
    float64 squares (a scale like --topic-word-scale 1e20 inflates the stored gradient so)."""
    from evaluate.gradients import norm_shares

    grads = [tf.constant([3e20, 4e20], tf.float32), tf.constant([1.0], tf.float32)]
    norm, shares = norm_shares(grads, ["big", "small"], top=2)
    assert norm == pytest.approx(5e20, rel=1e-6)
    assert shares[0] == ("big", pytest.approx(1.0)) and shares[1][0] == "small"
    assert 0 < shares[1][1] < 1e-40


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_a_gradient_that_is_not_finite_is_a_one_line_error_naming_its_weights(bad):
    from evaluate.gradients import norm_shares
    from tcnlm_tf.errors import UserError

    grads = [tf.constant([1.0, bad], tf.float32), tf.constant([2.0], tf.float32)]
    with pytest.raises(UserError, match=r"not finite \(inf or NaN\) in ntm/kernel: the model"):
        norm_shares(grads, ["ntm/kernel", "lm/kernel"], top=2)
