"""The one sentence generator, used by ``evaluate.generate`` and by the exported
``generate`` signatures: word by word from ``<eos>`` and a zero state, conditioned on a
:class:`~tcnlm_tf.models.base.Context` (for a topic model, the context of a topic vector:
Wang et al. 2018 §5.3, Lau et al. 2017 §7), greedy or sampled from p^(1/temperature)
renormalised, until ``<eos>`` or ``max_words`` words. TensorFlow ops only, so it runs in a
SavedModel as well as eagerly.
"""
from __future__ import annotations

import tensorflow as tf

from tcnlm_tf.config import MAX_GENERATED_WORDS
from tcnlm_tf.data.pipeline import EOS_ID, PAD_ID, UNK_ID
from tcnlm_tf.models.base import Context


def generate_ids(model, context: Context, batch: tf.Tensor, seed: tf.Tensor,
                 temperature: tf.Tensor, max_words: int = MAX_GENERATED_WORDS,
                 allow_unk: bool = False) -> dict[str, tf.Tensor]:
    """Generate ``batch`` sentences. ``seed`` int64 [] makes sampling repeatable;
    ``temperature`` float32 [] (<= 0: the most probable word at each step). ``<pad>`` is
    never generated, ``<unk>`` only with ``allow_unk``.

    Returns ``ids`` int32 [batch, max_words] (``<eos>`` from the end of each sentence on)
    and ``num_tokens`` int32 [batch] (words before the first ``<eos>``)."""
    vocab_size = model.vocab_size
    banned = [PAD_ID] if allow_unk else [PAD_ID, UNK_ID]
    banned = tf.reduce_any(tf.range(vocab_size)[:, None] == banned, axis=1)
    temperature = tf.cast(temperature, tf.float32)
    greedy = temperature <= 0.0
    scale = tf.where(greedy, 1.0, temperature)
    seed = tf.cast(seed, tf.int64)

    def step(i, token, state, out, done):
        hidden, state = model.encode(token[:, None], context, training=False, state=state)
        log_p = tf.where(banned, -float("inf"), model.log_probs(hidden[:, -1], context))
        sampled = tf.random.stateless_categorical(
            log_p / scale, 1, seed=tf.stack([seed, tf.cast(i, tf.int64)]),
            dtype=tf.int32)[:, 0]
        nxt = tf.where(greedy, tf.argmax(log_p, axis=-1, output_type=tf.int32), sampled)
        return i + 1, nxt, state, out.write(i, nxt), done | (nxt == EOS_ID)

    def going(i, token, state, out, done):
        # stop once every sentence has ended (after one step, so an empty batch stacks)
        return (i < max_words) & ((i == 0) | ~tf.reduce_all(done))

    state = model.zero_state(batch)
    start = tf.fill([batch], EOS_ID)
    out = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[None])
    steps, _, _, out, _ = tf.while_loop(
        going, step, (tf.constant(0), start, state, out, tf.zeros([batch], tf.bool)))
    ids = tf.transpose(out.stack())                                      # [B, steps]
    ids = tf.reshape(tf.pad(ids, [[0, 0], [0, max_words - steps]], constant_values=EOS_ID),
                     [-1, max_words])
    ended = tf.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=1) > 0     # from the first <eos>
    ids = tf.where(ended, EOS_ID, ids)
    return {"ids": ids, "num_tokens": tf.reduce_sum(tf.cast(~ended, tf.int32), axis=1)}
