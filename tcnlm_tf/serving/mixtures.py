"""The topic vector t that conditions generation: one topic, or a mixture of topics.

Pure Python (no TensorFlow, no numpy), so the TF Serving client can use it as well as
``evaluate.generate``.
"""
from __future__ import annotations

from tcnlm_tf.errors import UserError


def topic_mixture(num_topics: int, topic: int | None = None,
                  mixture: dict[int, float] | None = None) -> list[float]:
    """t [T]: one-hot e_topic (conditioning on the topic-th factor only, as the TCNLM paper
    does), or the mixture {topic: weight} normalised to sum to 1."""
    choose = f"give a topic in 0..{num_topics - 1}"
    weights = {topic: 1.0} if topic is not None else dict(mixture or {})
    t = [0.0] * num_topics
    for k, w in weights.items():
        if not 0 <= k < num_topics:
            raise UserError(f"topic {k} out of range: {choose}")
        if w < 0:
            raise UserError(f"topic weight {w} for topic {k} is negative: {choose} or a "
                            "mixture of them with non-negative weights")
        t[k] += w
    total = sum(t)
    if total <= 0:
        raise UserError(f"{choose} or a mixture of them with positive weights "
                        "(--topic I or --mixture I:W,J:W)")
    return [w / total for w in t]
