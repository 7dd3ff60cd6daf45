"""The one perplexity definition every model, baseline and oracle in this project reports.

    perplexity = exp(total negative log-likelihood / number of predicted tokens)

with natural logarithms; ``<eos>`` is a predicted token (one per sentence), padding is not.
"""
from __future__ import annotations

import math


def perplexity(total_nll: float, num_tokens: float) -> float:
    """exp(total_nll / num_tokens); ``num_tokens`` counts real targets (``<eos>`` included).
    A mean NLL beyond float range (a diverging model) gives ``inf``, not an OverflowError."""
    if num_tokens <= 0:
        raise ValueError("perplexity needs at least one predicted token")
    try:
        return math.exp(float(total_nll) / float(num_tokens))
    except OverflowError:
        return math.inf
