"""Confidence intervals of perplexity ratios from per-document test scores.

Every run that ``train.run`` tests records, beside its test perplexity, each test document's
summed NLL and predicted-token count (``metrics.json`` ``test_documents``: ``{"nll": [D],
"tokens": [D]}``). Two rows of a comparison scored on the same test split can then be
compared without their weights.

:func:`paired_bootstrap` gives the perplexity ratio of a row to a reference row and its
percentile interval. Each of ``samples`` bootstrap replicates draws the D test documents with
replacement, the *same* draw for both rows (paired: a document that is hard for one model is
hard for the other, so the shared difficulty cancels), and independently for each row draws
its seeds with replacement (so the interval also holds the seed-to-seed spread, not only the
test-set sampling). A row's perplexity in a replicate is the mean over its drawn seeds of
``exp(sum NLL / sum tokens)`` over the drawn documents, as the table's test perplexity is the
mean over seeds; the ratio is the row's over the reference's. The point estimate is that
ratio on the documents and seeds as they are.

With one seed per row the interval holds the test-set sampling only; it cannot show the seed
spread, which the table then cannot claim to have measured.
"""
from __future__ import annotations

import dataclasses

import numpy as np

#: replicates drawn per interval, and the chunk drawn at a time (memory: chunk x D indices)
SAMPLES = 10_000
CHUNK = 500


@dataclasses.dataclass(frozen=True)
class Interval:
    """A ratio and its percentile interval at ``level``."""

    ratio: float
    low: float
    high: float
    level: float
    seeds: int

    def __str__(self) -> str:
        return f"{self.ratio:.3f} [{self.low:.3f}, {self.high:.3f}]"


def document_scores(metrics: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """(NLL [D], tokens [D]) of a run's test documents from its ``metrics``; None for a run
    recorded without them."""
    scores = metrics.get("test_documents")
    if not scores:
        return None
    return np.asarray(scores["nll"], np.float64), np.asarray(scores["tokens"], np.float64)


def check_same_documents(scores: dict[str, list[tuple[np.ndarray, np.ndarray]]]) -> None:
    """``ValueError`` unless every run of every row scored the same test documents (the same
    number, with the same token counts)."""
    reference = None
    for row, runs in scores.items():
        for nll, tokens in runs:
            if reference is None:
                reference = (row, tokens)
            elif len(tokens) != len(reference[1]) or not np.array_equal(tokens, reference[1]):
                raise ValueError(f"rows {reference[0]} and {row} were scored on different test "
                                 "documents (their per-document token counts differ): their "
                                 "ratio cannot be paired")


def _perplexities(runs: list[tuple[np.ndarray, np.ndarray]], documents: np.ndarray,
                  seeds: np.ndarray) -> np.ndarray:
    """[R]: per replicate, the mean over the drawn ``seeds`` [R, S] (indices into ``runs``)
    of each run's perplexity over the drawn ``documents`` [R, D]."""
    per_run = np.stack([np.exp(nll[documents].sum(1) / tokens[documents].sum(1))
                        for nll, tokens in runs])                          # [S, R]
    return np.take_along_axis(per_run.T, seeds, axis=1).mean(1)


def paired_bootstrap(scores: dict[str, list[tuple[np.ndarray, np.ndarray]]], reference: str,
                     samples: int = SAMPLES, level: float = 0.95, seed: int = 0
                     ) -> dict[str, Interval]:
    """The perplexity ratio of every row of ``scores`` (row -> one (NLL [D], tokens [D]) per
    seed) to the row ``reference``, with its paired bootstrap interval at ``level`` (see
    the module docstring); the same ``seed`` draws the same replicates."""
    if reference not in scores:
        raise ValueError(f"the reference row {reference!r} has no per-document scores")
    check_same_documents(scores)
    num_documents = len(scores[reference][0][1])
    rng = np.random.default_rng(seed)
    ratios: dict[str, list[np.ndarray]] = {row: [] for row in scores}
    for start in range(0, samples, CHUNK):
        size = min(CHUNK, samples - start)
        documents = rng.integers(0, num_documents, (size, num_documents))
        drawn = {row: rng.integers(0, len(runs), (size, len(runs)))
                 for row, runs in scores.items()}
        base = _perplexities(scores[reference], documents, drawn[reference])
        for row, runs in scores.items():
            ratios[row].append(_perplexities(runs, documents, drawn[row]) / base)
    everything = np.arange(num_documents)[None]

    def point(runs):
        return _perplexities(runs, everything, np.arange(len(runs))[None])[0]

    tail = (1.0 - level) / 2 * 100
    result = {}
    for row, runs in scores.items():
        values = np.concatenate(ratios[row])
        low, high = np.percentile(values, [tail, 100 - tail])
        result[row] = Interval(float(point(runs) / point(scores[reference])), float(low),
                               float(high), level, len(runs))
    return result
