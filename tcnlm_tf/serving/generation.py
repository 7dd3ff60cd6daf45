"""The sentence generators, used by ``evaluate.generate``, the Python API
(:mod:`tcnlm_tf.serving.api`) and the exported ``generate*`` signatures: word by word from
``<eos>`` and a zero state, conditioned on a :class:`~tcnlm_tf.models.base.Context` (for a
topic model, the context of a topic vector: Wang et al. 2018 §5.3, Lau et al. 2017 §7),
after an optional prompt that is read first, until ``<eos>`` or ``max_words`` words.

* :func:`generate_ids` samples: greedy (temperature <= 0), or from p^(1/temperature)
  renormalised, optionally cut to the k most probable words (top-k) and to the smallest set
  of most probable words whose mass reaches p (top-p, Holtzman et al. 2020), the samplers
  KerasHub names ``GreedySampler``, ``RandomSampler``, ``TopKSampler`` and ``TopPSampler``;
* :func:`beam_ids` keeps the ``width`` most probable partial sentences (KerasHub's
  ``BeamSampler``: sequence log-probability, no length normalisation).

Both return the same dictionary. TensorFlow ops only, so they run in a SavedModel as well
as eagerly. Prompts are id rows ``prompt_ids`` [B, P] with their lengths [B]: row b's first
``prompt_lengths[b]`` inputs after ``<eos>`` are its prompt's words, each read as the model
reads a sentence; the generated words follow.
"""
from __future__ import annotations

import tensorflow as tf

from tcnlm_tf.config import MAX_GENERATED_WORDS
from tcnlm_tf.data.pipeline import EOS_ID, PAD_ID, UNK_ID
from tcnlm_tf.models.base import Context

#: the most beams a ``beam_width`` input of an exported signature may ask for
MAX_BEAM_WIDTH = 32


def filter_logits(logits: tf.Tensor, top_k: tf.Tensor | int = 0,
                  top_p: tf.Tensor | float = 1.0) -> tf.Tensor:
    """``logits`` [B, V] with every word outside the sampler's set at -inf: ``top_k`` > 0
    keeps the k largest (ties with the k-th kept), ``top_p`` < 1 then keeps the smallest set
    of the largest whose probability (softmax of the logits) sums to at least p (ties with
    the last one kept). ``top_k`` <= 0 and ``top_p`` >= 1 leave ``logits`` as they are."""
    vocab = tf.shape(logits)[-1]
    top_k = tf.cast(top_k, tf.int32)
    top_p = tf.cast(top_p, logits.dtype)
    k = tf.where(top_k > 0, tf.minimum(top_k, vocab), vocab)
    kth = tf.math.top_k(logits, k=k).values[:, -1:]                      # [B, 1]
    logits = tf.where(logits < kth, -float("inf"), logits)
    ordered = tf.sort(logits, axis=-1, direction="DESCENDING")           # [B, V]
    before = tf.cumsum(tf.nn.softmax(ordered), axis=-1, exclusive=True)  # mass above each
    needed = before < top_p                                              # the first always
    last = tf.reduce_min(tf.where(needed, ordered, float("inf")), axis=-1, keepdims=True)
    return tf.where((top_p < 1.0) & (logits < last), -float("inf"), logits)


def _banned(vocab_size: int, allow_unk: bool) -> tf.Tensor:
    """bool [V]: the words never generated (``<pad>``; ``<unk>`` unless ``allow_unk``)."""
    banned = [PAD_ID] if allow_unk else [PAD_ID, UNK_ID]
    return tf.reduce_any(tf.range(vocab_size)[:, None] == banned, axis=1)


def _prompts(batch: tf.Tensor, prompt_ids: tf.Tensor | None, prompt_lengths: tf.Tensor | None
             ) -> tuple[tf.Tensor, tf.Tensor]:
    """``(ids [B, P + 1], lengths [B])``: the prompts with one padding column (so that
    :func:`_forced` can index them at any step), or an empty prompt per row."""
    if prompt_ids is None:
        return tf.fill([batch, 1], EOS_ID), tf.zeros([batch], tf.int32)
    ids = tf.cast(prompt_ids, tf.int32)
    return tf.pad(ids, [[0, 0], [0, 1]], constant_values=EOS_ID), tf.cast(prompt_lengths,
                                                                          tf.int32)


def _forced(prompt_ids: tf.Tensor, i: tf.Tensor) -> tf.Tensor:
    """The prompt word each row reads as input ``i + 1`` (meaningful where ``i`` is inside
    the row's prompt): int32 [B]."""
    return prompt_ids[:, tf.minimum(i, tf.shape(prompt_ids)[1] - 1)]


def _longest(prompt_lengths: tf.Tensor) -> tf.Tensor:
    """The longest prompt, 0 for an empty batch."""
    return tf.reduce_max(tf.concat([prompt_lengths, [0]], 0))


def _continuations(tokens: tf.Tensor, log_probs: tf.Tensor, prompt_lengths: tf.Tensor,
                   max_words: int) -> dict[str, tf.Tensor]:
    """The generated part of each row of ``tokens`` [B, n] (prompt, then generated words;
    ``log_probs`` [B, n] the model's log-probability of each): ``ids`` int32 [B, max_words]
    (``<eos>`` from the end of each sentence on), ``num_tokens`` int32 [B] (words before the
    first ``<eos>``), ``log_probability`` float32 [B] (of the words and of the ``<eos>`` that
    ended the sentence, if it ended before ``max_words``)."""
    width = tf.shape(tokens)[1]
    extra = tf.maximum(_longest(prompt_lengths) + max_words - width, 0)
    tokens = tf.pad(tokens, [[0, 0], [0, extra]], constant_values=EOS_ID)
    log_probs = tf.pad(log_probs, [[0, 0], [0, extra]])
    positions = prompt_lengths[:, None] + tf.range(max_words)[None, :]   # [B, max_words]
    ids = tf.reshape(tf.gather(tokens, positions, batch_dims=1), [-1, max_words])
    ended = tf.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=1) > 0      # from the first <eos>
    ids = tf.where(ended, EOS_ID, ids)
    num_tokens = tf.reduce_sum(tf.cast(~ended, tf.int32), axis=1)
    scored = tf.range(max_words)[None, :] <= num_tokens[:, None]          # words and <eos>
    log_probability = tf.reduce_sum(
        tf.where(scored, tf.gather(log_probs, positions, batch_dims=1), 0.0), axis=1)
    return {"ids": ids, "num_tokens": num_tokens, "log_probability": log_probability}


def generate_ids(model, context: Context, batch: tf.Tensor, seed: tf.Tensor,
                 temperature: tf.Tensor, max_words: int = MAX_GENERATED_WORDS,
                 allow_unk: bool = False, top_k: tf.Tensor | int = 0,
                 top_p: tf.Tensor | float = 1.0, prompt_ids: tf.Tensor | None = None,
                 prompt_lengths: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
    """Generate ``batch`` sentences, each after its prompt. ``seed`` int64 [] makes
    sampling repeatable (step i draws with the stateless seed (seed, i)); ``temperature``
    float32 [] (<= 0: the most probable word at each step); ``top_k``/``top_p`` as
    :func:`filter_logits`, applied to the tempered distribution. ``<pad>`` is never
    generated, ``<unk>`` only with ``allow_unk``.

    Returns ``ids`` int32 [batch, max_words] (the generated words after the prompt,
    ``<eos>`` from the end of each sentence on), ``num_tokens`` int32 [batch] (words before
    the first ``<eos>``) and ``log_probability`` float32 [batch] (natural log, under the
    model itself, before temperature and filtering, of the words and the ending ``<eos>``)."""
    banned = _banned(model.vocab_size, allow_unk)
    temperature = tf.cast(temperature, tf.float32)
    greedy = temperature <= 0.0
    scale = tf.where(greedy, 1.0, temperature)
    seed = tf.cast(seed, tf.int64)
    prompt_ids, prompt_lengths = _prompts(batch, prompt_ids, prompt_lengths)
    steps = _longest(prompt_lengths) + max_words

    def step(i, token, state, out, scores, done):
        hidden, state = model.encode(token[:, None], context, training=False, state=state)
        log_p = model.log_probs(hidden[:, -1], context)                      # [B, V]
        allowed = tf.where(banned, -float("inf"), log_p)
        sampled = tf.random.stateless_categorical(
            filter_logits(allowed / scale, top_k, top_p), 1,
            seed=tf.stack([seed, tf.cast(i, tf.int64)]), dtype=tf.int32)[:, 0]
        nxt = tf.where(greedy, tf.argmax(allowed, axis=-1, output_type=tf.int32), sampled)
        forced = i < prompt_lengths
        nxt = tf.where(forced, _forced(prompt_ids, i), nxt)
        scores = scores.write(i, tf.gather(log_p, nxt, batch_dims=1))
        done = done | (~forced & (nxt == EOS_ID)) | (i + 1 >= prompt_lengths + max_words)
        return i + 1, nxt, state, out.write(i, nxt), scores, done

    def going(i, token, state, out, scores, done):
        # stop once every sentence has ended (after one step, so an empty batch stacks)
        return (i < steps) & ((i == 0) | ~tf.reduce_all(done))

    out = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[None])
    scores = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[None])
    _, _, _, out, scores, _ = tf.while_loop(
        going, step, (tf.constant(0), tf.fill([batch], EOS_ID), model.zero_state(batch), out,
                      scores, tf.zeros([batch], tf.bool)))
    return _continuations(tf.transpose(out.stack()), tf.transpose(scores.stack()),
                          prompt_lengths, max_words)


def beam_ids(model, context: Context, batch: tf.Tensor, width: tf.Tensor | int,
             max_words: int = MAX_GENERATED_WORDS, allow_unk: bool = False,
             prompt_ids: tf.Tensor | None = None, prompt_lengths: tf.Tensor | None = None
             ) -> dict[str, tf.Tensor]:
    """Beam search: for each of ``batch`` rows, the ``width`` partial sentences of the
    highest log-probability are extended by every word at each step and the ``width`` best
    kept; a sentence that has ended (``<eos>``, or ``max_words`` words) keeps its score.
    Returns the best sentence of each row, as :func:`generate_ids` does (its
    ``log_probability`` is the score the search maximised). Width 1 is greedy decoding."""
    vocab = model.vocab_size
    banned = _banned(vocab, allow_unk)
    width = tf.cast(width, tf.int32)
    rows = batch * width
    prompt_ids, prompt_lengths = _prompts(batch, prompt_ids, prompt_lengths)
    total = _longest(prompt_lengths) + max_words
    beam_prompts = tf.repeat(prompt_ids, width, axis=0)                   # [B W, P + 1]
    beam_lengths = tf.repeat(prompt_lengths, width)                       # [B W]
    beam_context = context.repeat(width)
    words = tf.range(vocab)[None, :]

    def only(ids):                   # [B W, V]: 0 for ids[b], -inf for every other word
        return tf.where(words == ids[:, None], 0.0, -float("inf"))

    def step(i, token, state, tokens, log_probs, scores, finished):
        hidden, state = model.encode(token[:, None], beam_context, training=False,
                                     state=state)
        log_p = model.log_probs(hidden[:, -1], beam_context)                  # [B W, V]
        forced = i < beam_lengths
        stopped = finished | (i >= beam_lengths + max_words)
        extension = tf.where(stopped[:, None], only(tf.fill([rows], EOS_ID)),
                             tf.where(forced[:, None], only(_forced(beam_prompts, i)),
                                      tf.where(banned, -float("inf"), log_p)))
        candidates = tf.reshape(tf.reshape(scores, [rows, 1]) + extension, [batch, -1])
        best = tf.math.top_k(candidates, k=width)                             # [B, W]
        # reshaped to the loop variables' shapes, so that shapes known before the loop
        # stay known through it
        source = tf.reshape(best.indices // vocab + tf.range(batch)[:, None] * width,
                            tf.shape(token))                                  # [B W]
        nxt = tf.reshape(best.indices % vocab, tf.shape(token))
        state = tf.nest.map_structure(lambda s: tf.gather(s, source), state)
        was_forced, was_stopped = tf.gather(forced, source), tf.gather(stopped, source)
        chosen = tf.gather(tf.gather(log_p, source), nxt, batch_dims=1)
        column = tf.range(total)[None, :] == i
        tokens = tf.where(column, nxt[:, None], tf.gather(tokens, source))
        log_probs = tf.where(column, tf.where(was_forced | was_stopped, 0.0, chosen)[:, None],
                             tf.gather(log_probs, source))
        finished = (tf.gather(finished, source) | was_stopped
                    | (~was_forced & (nxt == EOS_ID)))
        return (i + 1, nxt, state, tokens, log_probs, tf.reshape(best.values, tf.shape(scores)),
                finished)

    def going(i, token, state, tokens, log_probs, scores, finished):
        return (i < total) & ((i == 0) | ~tf.reduce_all(finished))

    # every row starts from one beam (the others at -inf), so its first free step fills
    # the beams with distinct words
    scores = tf.tile(tf.concat([[0.0], tf.fill([width - 1], -float("inf"))], 0)[None],
                     [batch, 1])
    _, _, _, tokens, log_probs, scores, _ = tf.while_loop(
        going, step, (tf.constant(0), tf.fill([rows], EOS_ID), model.zero_state(rows),
                      tf.fill([rows, total], EOS_ID), tf.zeros([rows, total]), scores,
                      tf.zeros([rows], tf.bool)))
    chosen = tf.range(batch) * width + tf.argmax(scores, axis=1, output_type=tf.int32)
    return _continuations(tf.gather(tokens, chosen), tf.gather(log_probs, chosen),
                          prompt_lengths, max_words)
