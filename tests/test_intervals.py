"""The paired bootstrap of perplexity ratios (``evaluate.intervals``) on per-document scores
whose answer is known, and the comparison table's interval column."""
import math

import numpy as np
import pytest

from evaluate.compare_report import RunKey, aggregate, table
from evaluate.intervals import document_scores, paired_bootstrap


def documents(seed=0, count=120):
    """Per-document (NLL [D], tokens [D]) of a made-up reference run."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(20, 400, count).astype(float)
    return rng.uniform(3.5, 5.5, count) * tokens, tokens


def shifted(scores, nats):
    """A run whose every token costs ``nats`` more than in ``scores``: perplexity x e^nats
    on any set of documents."""
    nll, tokens = scores
    return nll + nats * tokens, tokens


def test_a_row_against_itself_is_one_without_spread():
    reference = documents()
    found = paired_bootstrap({"a": [reference], "b": [reference]}, "a", samples=600)
    assert (found["b"].ratio, found["b"].low, found["b"].high) == (1.0, 1.0, 1.0)


def test_a_constant_shift_per_token_is_its_exponential_in_every_replicate():
    reference = documents()
    found = paired_bootstrap({"ref": [reference], "worse": [shifted(reference, 0.1)],
                              "better": [shifted(reference, -0.05)]}, "ref", samples=600)
    for row, nats in (("worse", 0.1), ("better", -0.05)):
        interval = found[row]
        assert interval.ratio == pytest.approx(math.exp(nats), rel=1e-12)
        assert interval.low == pytest.approx(math.exp(nats), rel=1e-12)
        assert interval.high == pytest.approx(math.exp(nats), rel=1e-12)


def test_seeds_are_resampled_so_the_interval_spans_their_spread():
    """Two seeds at e^0.02 and e^0.08 the reference's perplexity: a replicate draws both
    seeds twice, once each or the other twice (1/4, 1/2, 1/4), so its ratio is e^0.02, their
    mean or e^0.08, and the 2.5 % and 97.5 % percentiles are the two seeds' own ratios."""
    reference = documents()
    low, high = math.exp(0.02), math.exp(0.08)
    found = paired_bootstrap({"ref": [reference],
                              "row": [shifted(reference, 0.02), shifted(reference, 0.08)]},
                             "ref", samples=2000)["row"]
    assert found.ratio == pytest.approx((low + high) / 2, rel=1e-12)
    assert found.low == pytest.approx(low, rel=1e-12)
    assert found.high == pytest.approx(high, rel=1e-12)
    assert found.seeds == 2


def test_pairing_cancels_the_difficulty_the_documents_share():
    """Two rows whose documents vary a lot in difficulty but whose per-document difference is
    small: the paired interval is about as wide as the difference's own standard error
    (delta method), far narrower than the unpaired spread of either row's perplexity."""
    rng = np.random.default_rng(3)
    nll, tokens = documents(seed=3, count=400)
    noise = rng.normal(0.03, 0.05, len(tokens)) * tokens      # the row's extra NLL per document
    found = paired_bootstrap({"ref": [(nll, tokens)], "row": [(nll + noise, tokens)]}, "ref",
                             samples=4000)["row"]
    # delta method for log(ratio) = (sum noise) / (sum tokens) with documents resampled
    log_ratio_se = np.std(noise - tokens * noise.sum() / tokens.sum()) * math.sqrt(
        len(tokens)) / tokens.sum()
    width = math.log(found.high) - math.log(found.low)
    assert width == pytest.approx(2 * 1.96 * log_ratio_se, rel=0.15)
    unpaired = np.std(nll / tokens) / math.sqrt(len(tokens))
    assert width < unpaired


def test_rows_scored_on_other_documents_cannot_be_paired():
    nll, tokens = documents()
    with pytest.raises(ValueError, match="different test documents"):
        paired_bootstrap({"ref": [(nll, tokens)], "row": [(nll[:-1], tokens[:-1])]}, "ref",
                         samples=10)


def metrics(scores, seed=0):
    nll, tokens = scores
    return {"test_perplexity": float(np.exp(nll.sum() / tokens.sum())),
            "best_valid_perplexity": 1.0, "size": "1x8", "parameters": 10,
            "epochs": [{"epoch": 1, "valid_perplexity": 1.0, "seconds": 1.0,
                        "tokens_per_sec": 1.0}], "stopped": "early_stopping",
            "test_documents": {"nll": nll.tolist(), "tokens": tokens.tolist()},
            "provenance": [{"from_step": 0, "commit": "0123456789abcdef" + str(seed),
                            "dirty": False}]}


def test_the_table_shows_each_rows_interval_and_commit():
    reference = documents()
    runs = {RunKey("lstm-document", None, 0, None): metrics(reference),
            RunKey("lstm", None, 0, None): metrics(shifted(reference, 0.1))}
    text = table(aggregate(runs, {}), {})
    ratio = math.exp(0.1)
    assert f"| {ratio:.3f} [{ratio:.3f}, {ratio:.3f}] |" in text
    assert "| 1.000 [1.000, 1.000] |" in text and "0123456 |" in text
    assert document_scores({}) is None
