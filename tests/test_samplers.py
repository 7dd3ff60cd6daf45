"""The samplers of tcnlm_tf.serving.generation, each checked for its defining property on a
toy bigram model whose answers are known: greedy takes the most probable word, top-k never
leaves the k best, top-p keeps the smallest set whose mass reaches p, beam search finds a
sentence at least as probable as greedy's (here strictly more), prompts are read first."""
import math

import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.data.pipeline import EOS_ID
from tcnlm_tf.models.base import Context
from tcnlm_tf.samplers import (BeamSampler, GreedySampler, RandomSampler, TopKSampler,
                               TopPSampler, get_sampler)
from tcnlm_tf.errors import UserError
from tcnlm_tf.serving.generation import beam_ids, filter_logits, generate_ids

# words: 0 <pad>, 1 <unk>, 2 <eos>, 3 "a", 4 "b", 5 "c", 6 "d"
#: P(next | previous) of the toy model: from <eos>, "a" (0.4) is likelier than "b"
#: (0.35) but leads nowhere sure, "b" is followed by <eos> with certainty; so greedy says
#: "a ..." and the most probable sentence is "b".
BIGRAM = {
    EOS_ID: {3: 0.4, 4: 0.35, 5: 0.25},
    3: {5: 0.34, 6: 0.33, EOS_ID: 0.33},
    4: {EOS_ID: 1.0},
    5: {EOS_ID: 0.5, 6: 0.5},
    6: {EOS_ID: 0.6, 3: 0.4},
}
VOCAB = 7


class Bigram:
    """A model with the interface the generators use: its hidden state is the one-hot
    previous word, its next-word log-probabilities the rows of :data:`BIGRAM`."""

    vocab_size = VOCAB

    def __init__(self):
        table = np.full((VOCAB, VOCAB), 1e-12)
        for previous, row in BIGRAM.items():
            for word, p in row.items():
                table[previous, word] = p
        self.table = tf.constant(np.log(table / table.sum(axis=1, keepdims=True)), tf.float32)

    def zero_state(self, batch):
        return [tf.zeros([batch, 1])]

    def encode(self, inputs, context, training=False, state=None):
        return tf.one_hot(inputs, VOCAB), state

    def log_probs(self, hidden, context):
        return tf.matmul(hidden, self.table)


def _sentence_log_prob(words: list[int]) -> float:
    previous, total = EOS_ID, 0.0
    for w in words + [EOS_ID]:
        total += math.log(BIGRAM[previous].get(w, 1e-12))
        previous = w
    return total


def _decode(out, row=0) -> list[int]:
    return [int(i) for i in out["ids"][row, :int(out["num_tokens"][row])]]


def test_greedy_and_beam_on_a_known_answer():
    model = Bigram()
    greedy = generate_ids(model, Context(), 1, 0, 0.0, max_words=6)
    assert _decode(greedy) == [3, 5]     # "a c", then <eos> (a tie with d): 0.4*0.34*0.5
    beam = beam_ids(model, Context(), 1, 3, max_words=6)
    assert _decode(beam) == [4]                            # "b": 0.35 * 1.0
    assert float(beam["log_probability"][0]) == pytest.approx(_sentence_log_prob([4]), abs=1e-5)
    assert float(greedy["log_probability"][0]) == pytest.approx(
        _sentence_log_prob([3, 5]), abs=1e-5)
    assert float(beam["log_probability"][0]) > float(greedy["log_probability"][0])
    one = beam_ids(model, Context(), 1, 1, max_words=6)    # width 1 is greedy
    assert _decode(one) == _decode(greedy)


def test_prompts_are_read_before_generating():
    model = Bigram()
    prompt = tf.constant([[3, 6], [4, 0]])                  # "a d", "b"
    lengths = tf.constant([2, 1])
    out = generate_ids(model, Context(), 2, 0, 0.0, max_words=5, prompt_ids=prompt,
                       prompt_lengths=lengths)
    assert _decode(out, 0) == [] and _decode(out, 1) == []  # after "d" and "b": <eos>
    assert float(out["log_probability"][1]) == pytest.approx(0.0, abs=1e-5)  # P(<eos>|b) = 1
    beam = beam_ids(model, Context(), 2, 2, max_words=5, prompt_ids=tf.constant([[3], [5]]),
                    prompt_lengths=tf.constant([1, 1]))
    assert _decode(beam, 0) == [] and _decode(beam, 1) == []  # P(<eos>|a) .33 beats paths on


def test_top_k_never_leaves_the_k_best():
    model = Bigram()
    for seed in range(30):
        out = generate_ids(model, Context(), 8, seed, 1.0, max_words=1, top_k=1)
        assert set(np.asarray(out["ids"][:, 0]).tolist()) == {3}
        out = generate_ids(model, Context(), 8, seed, 1.0, max_words=1, top_k=2)
        assert set(np.asarray(out["ids"][:, 0]).tolist()) <= {3, 4}
    logits = tf.constant(np.random.default_rng(0).normal(size=(50, 30)), tf.float32)
    for k in (1, 3, 29, 30, 100):
        kept = np.isfinite(filter_logits(logits, top_k=k).numpy())
        best = np.argsort(-logits.numpy(), axis=1)[:, :min(k, 30)]
        assert (kept.sum(axis=1) == min(k, 30)).all()
        assert np.take_along_axis(kept, best, axis=1).all()


def test_top_p_keeps_the_smallest_set_reaching_p():
    rng = np.random.default_rng(1)
    logits = tf.constant(rng.normal(scale=2.0, size=(200, 40)), tf.float32)
    probabilities = tf.nn.softmax(logits).numpy()
    for p in (0.05, 0.3, 0.5, 0.9, 0.99):
        kept = np.isfinite(filter_logits(logits, top_p=p).numpy())
        mass = (probabilities * kept).sum(axis=1)
        assert (mass >= p - 1e-6).all()
        # minimal: without its least probable kept word the set falls short of p
        least = np.where(kept, probabilities, np.inf).min(axis=1)
        assert (mass - least < p).all()
        # the kept words are the most probable ones
        assert (np.where(kept, probabilities, np.inf).min(axis=1)
                >= np.where(kept, -np.inf, probabilities).max(axis=1)).all()
    assert np.array_equal(filter_logits(logits, top_p=1.0).numpy(), logits.numpy())
    model = Bigram()
    # from <eos>: P(a) = 0.4 < 0.5 <= P(a) + P(b): top-p 0.5 samples only "a" and "b"
    words = {int(i) for seed in range(20) for i in generate_ids(
        model, Context(), 8, seed, 1.0, max_words=1, top_p=0.5)["ids"][:, 0]}
    assert words == {3, 4}


def test_temperature_sampling_is_seeded_and_spread():
    model = Bigram()
    a = generate_ids(model, Context(), 64, 7, 1.0, max_words=4)
    b = generate_ids(model, Context(), 64, 7, 1.0, max_words=4)
    assert np.array_equal(a["ids"], b["ids"])
    assert set(np.asarray(a["ids"][:, 0]).tolist()) == {3, 4, 5}


def test_samplers_by_name_and_their_inputs():
    assert get_sampler("greedy") == GreedySampler()
    assert get_sampler("top_k") == TopKSampler()
    assert get_sampler(TopPSampler(p=0.3)) == TopPSampler(p=0.3)
    assert GreedySampler().inputs()["temperature"] == 0.0
    assert TopKSampler(k=3, temperature=0.7).inputs() == {
        "temperature": 0.7, "top_k": 3, "top_p": 1.0, "beam_width": 0}
    assert BeamSampler(num_beams=4).inputs()["beam_width"] == 4
    assert RandomSampler(temperature=2.0).inputs()["top_k"] == 0
    for bad in (lambda: get_sampler("nucleus"), lambda: TopKSampler(k=0),
                lambda: TopPSampler(p=0.0), lambda: TopPSampler(p=1.5),
                lambda: BeamSampler(num_beams=0), lambda: RandomSampler(temperature=0.0)):
        with pytest.raises(UserError):
            bad()
