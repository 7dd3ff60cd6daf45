"""The one perplexity definition, checked against a hand-computed example."""
import math

import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.metrics.perplexity import perplexity
from tcnlm_tf.models.base import LanguageModel, ModelOutput

# A 5-word vocabulary (0 <pad>, 1 <unk>, 2 <eos>, 3, 4) with fixed next-word probabilities.
PROBS = np.array([0.0, 0.125, 0.5, 0.25, 0.125], np.float32)


class FixedModel(LanguageModel):
    """Predicts PROBS at every position, whatever the history."""

    def call(self, batch, training=False, state=None):
        return ModelOutput(tf.math.log(tf.gather(PROBS, batch["targets"])))


def test_perplexity_hand_computed_with_eos_included_and_padding_excluded():
    # Two sentences, "3 4 <eos>" and "3 <eos>", padded to length 4.
    targets = tf.constant([[3, 4, 2, 0], [3, 2, 0, 0]])
    batch = {"inputs": targets, "targets": targets,
             "weights": tf.cast(targets != 0, tf.float32)}
    terms = FixedModel().loss_terms(batch)
    # By hand: NLL = 2 ln 4 + ln 8 + 2 ln 2 = ln 512 = 9 ln 2 over 5 predicted tokens,
    # so perplexity = 2 ** (9 / 5).
    assert float(terms["tokens"]) == 5.0
    assert float(terms["nll_sum"]) == pytest.approx(9 * math.log(2), rel=1e-6)
    assert perplexity(terms["nll_sum"], terms["tokens"]) == pytest.approx(2 ** 1.8, rel=1e-6)


def test_uniform_model_has_perplexity_equal_to_vocabulary_size():
    assert perplexity(10 * math.log(7), 10) == pytest.approx(7.0)


def test_perplexity_rejects_no_tokens():
    with pytest.raises(ValueError):
        perplexity(0.0, 0)


def test_a_diverged_model_has_infinite_perplexity_not_an_overflow():
    assert perplexity(1e6, 10) == math.inf
    assert perplexity(7000.0, 10) == pytest.approx(math.exp(700.0))
