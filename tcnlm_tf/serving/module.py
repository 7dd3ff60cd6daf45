"""The inference graph that ``python -m train.export`` writes as a SavedModel for TF Serving.

:class:`ServingModule` wraps a trained run's model with its vocabularies as in-graph
``tf.lookup`` tables, so clients send and receive **strings**. Text is in the corpus format:
tokens separated by spaces (tokenised and cased as the training corpus was), and a document
is its sentences separated by TABs. Words outside the LM vocabulary become ``<unk>``; words
outside the topic vocabulary are left out of the bag of words, as in training.

Signatures (B = batch, N = longest row; every output is padded past each row's length):

``score`` (also ``serving_default``, which has no ``documents`` input)
    ``sentences`` string [B], ``documents`` string [B] (context: "" for none) ->
    ``tokens`` string [B, N] (the predicted tokens, the sentence's words then ``<eos>``;
    only the words for a stream-mode run trained with ``--line-end none``),
    ``token_log_probs`` float32 [B, N] (natural log; 0 past the end), ``num_tokens`` int32
    [B], ``log_likelihood`` float32 [B] and ``perplexity`` float32 [B] (exp of the mean
    negative log-probability).
``next_words``
    ``context`` string [B] (the sentence so far), ``documents`` string [B], ``k`` int32 []
    -> ``words`` string [B, k] and ``probabilities`` float32 [B, k], most probable first
    (k >= 1, else an ``InvalidArgument`` error; a k beyond the vocabulary gives every word
    but ``<pad>``, whose probabilities then sum to 1 - P(<pad>), about 1e-6 short of 1 for a
    trained model).
``infer_topics`` (topic models)
    ``documents`` string [B] -> ``topics`` float32 [B, T] (the model's topic proportions:
    TCNLM's posterior-mean t, TDLM's attention p, LDA+LSTM's q, Topic-RNN's softmax of the
    posterior-mean theta).
``generate``
    topic models: ``topics`` float32 [B, T] (a topic mixture; one-hot for topic i, the
    paper's way of conditioning on one topic; a row with a negative entry or not summing to
    1 is an ``InvalidArgument`` error); other models: ``num_sentences`` int32 []
    (those with document context generate from an empty document); both:
    ``seed`` int64 [], ``temperature`` float32 [] (<= 0: greedy) -> ``sentences`` string
    [B], ``tokens`` string [B, 40], ``num_tokens`` int32 [B]. A sentence ends at ``<eos>``
    or after 40 words; ``<unk>`` is never generated.
``generate_from_document`` (topic models)
    ``documents`` string [B], ``seed``, ``temperature`` -> as ``generate``, conditioned on
    each document as the model reads it when scoring (its ``context``: TCNLM's posterior-mean
    t, TDLM's s = B^T p, Topic-RNN's posterior-mean theta).
``generate_sampled`` and ``generate_sampled_from_document``
    as ``generate`` and ``generate_from_document`` (the one without topics takes no
    ``num_sentences``: it generates one sentence per prompt), with a sampler and prompts:
    ``prompts`` string [B] (words to continue, read after ``<eos>`` as the start of the
    sentence; "" for none), ``top_k`` int32 [] (> 0: only the k most probable words;
    0: off), ``top_p`` float32 [] (< 1: only the smallest set of most probable words whose
    probability reaches p; 1: off), ``beam_width`` int32 [] (>= 2: beam search with that
    many beams, up to 32, ignoring temperature, top_k and top_p; 0 or 1: sampling) ->
    ``sentences`` string [B] (each prompt's words, then the generated ones), ``tokens``
    string [B, 40] and ``num_tokens`` int32 [B] (the generated words only), and
    ``log_probability`` float32 [B] (the model's log-probability of the generated words and
    the ``<eos>`` that ended them, given the prompt). ``generate`` and
    ``generate_from_document`` keep their inputs, so the requests of clients written for
    them still work.
``topic_words`` (topic models)
    ``top_n`` int32 [] -> ``words`` string [T, top_n] and ``probabilities`` float32
    [T, top_n]: each topic's most probable words (special tokens left out), as
    ``evaluate.topics`` lists them.

How the context enters follows the run's training: models with document-context inputs
read ``documents`` through the same builder as training
(:func:`tcnlm_tf.data.pipeline.document_context`) and the model's own ``context``: the topic
models the first ``max_bow`` topic-vocabulary words of the document (in training, the
document minus the sentence, or with ``--context preceding`` the text before it), a model
that reads ``preceding`` (the LCLM) the topic words of the document's last N sentences, so
its ``documents`` input is the text *before* the sentence (in training, the N sentences
before it); a document-mode LSTM reads them as
the text before the sentence (``<eos>`` after each of its sentences, none with ``--line-end
none``) and carries its state
into the sentence; a sentence-mode LSTM ignores them. In sentence mode a sentence longer than
the training sequence length is scored in windows of that length, each from a zero state,
exactly as ``evaluate.perplexity`` and training do, so the numbers agree.

Two string variables describe the export to Python clients that ``tf.saved_model.load`` it:
``model_type`` (the ``--model`` name) and ``context_kind`` (see :meth:`ServingModule.context_rule`).

Everything is TensorFlow ops (no ``tf.py_function``): the SavedModel loads and runs where
only TensorFlow is installed.
"""
from __future__ import annotations

from typing import Callable

import tensorflow as tf

from tcnlm_tf.config import MAX_GENERATED_WORDS, STATEFUL_MODES, carries_state
from tcnlm_tf.data import pipeline
from tcnlm_tf.data.pipeline import EOS_ID, PAD_ID, UNK_ID
from tcnlm_tf.data.vocab import PAD
from tcnlm_tf.metrics.topic_words import is_special
from tcnlm_tf.models.base import Context, has_topics
from tcnlm_tf.runs.loading import Run
from tcnlm_tf.serving.generation import MAX_BEAM_WIDTH, beam_ids, generate_ids

SCALAR_SEED = tf.TensorSpec([], tf.int64, name="seed")
SCALAR_TEMPERATURE = tf.TensorSpec([], tf.float32, name="temperature")
#: the sampler inputs of the generate_sampled signatures, after their conditioning inputs
SAMPLER_SPECS = [tf.TensorSpec([None], tf.string, name="prompts"), SCALAR_SEED,
                 SCALAR_TEMPERATURE, tf.TensorSpec([], tf.int32, name="top_k"),
                 tf.TensorSpec([], tf.float32, name="top_p"),
                 tf.TensorSpec([], tf.int32, name="beam_width")]


def serving_function(function, input_signature) -> tf.types.experimental.PolymorphicFunction:
    """``function`` as a ``tf.function`` of ``input_signature``, not converted by AutoGraph:
    the serving functions write their loops as ``tf.while_loop`` and their branches as
    ``tf.cond``, so conversion changes no op, and it was half of an export's time."""
    return tf.function(function, input_signature=input_signature, autograph=False)


def _table(words: list[str], default: int) -> tf.lookup.StaticHashTable:
    """word -> id for ``words`` (ids are list positions), ``default`` for any other string."""
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(words, tf.string), tf.range(len(words), dtype=tf.int32)),
        default_value=default)


#: the most sentences one ``generate`` request of a model without topics may ask for
MAX_GENERATED_SENTENCES = 10_000
#: how far a row of ``generate``'s topics may sum from 1 (float32 sums of T proportions)
TOPIC_SUM_TOLERANCE = 1e-3


def checked_topics(topics: tf.Tensor) -> tf.Tensor:
    """``topics`` [B, T] unchanged if every row is a distribution (no negative entry, sums
    to 1 within :data:`TOPIC_SUM_TOLERANCE`); otherwise an ``InvalidArgument`` error that
    says so."""
    with tf.control_dependencies([
            tf.debugging.assert_non_negative(
                topics, message="generate: topics must be non-negative (a distribution over "
                                "topics, e.g. one-hot for one topic)"),
            tf.debugging.assert_less_equal(
                tf.abs(tf.reduce_sum(topics, axis=-1) - 1.0), TOPIC_SUM_TOLERANCE,
                message="generate: each row of topics must sum to 1")]):
        return tf.identity(topics)


def same_length(signature: str, name: str, values: tf.Tensor, documents: tf.Tensor
                ) -> tuple[tf.Tensor, tf.Tensor]:
    """``values`` [B] and ``documents`` [B] unchanged if they have the same length;
    otherwise an ``InvalidArgument`` error naming both (one document, or "", per row:
    a shorter list was broadcast or failed in a reshape)."""
    with tf.control_dependencies([tf.debugging.assert_equal(
            tf.size(values), tf.size(documents),
            message=f"{signature}: {name} and documents must have the same length (one "
                    f"document, or \"\" for none, per entry of {name})")]):
        return tf.identity(values), tf.identity(documents)


def checked_generation(temperature: tf.Tensor, num_sentences: tf.Tensor | None = None
                       ) -> tuple[tf.Tensor, tf.Tensor | None]:
    """``temperature`` (and ``num_sentences``) unchanged if finite (and in
    [0, :data:`MAX_GENERATED_SENTENCES`]); otherwise an ``InvalidArgument`` error naming
    the input."""
    checks = [tf.debugging.assert_all_finite(
        temperature, message="generate: temperature must be a finite number (<= 0: the most "
                             "probable word at each step)")]
    if num_sentences is not None:
        checks += [tf.debugging.assert_non_negative(
                       num_sentences, message="generate: num_sentences must be >= 0"),
                   tf.debugging.assert_less_equal(
                       num_sentences, MAX_GENERATED_SENTENCES,
                       message=f"generate: num_sentences must be at most "
                               f"{MAX_GENERATED_SENTENCES} per request")]
    with tf.control_dependencies(checks):
        return (tf.identity(temperature),
                None if num_sentences is None else tf.identity(num_sentences))


def traced_once(method: Callable[..., dict]) -> Callable[..., dict]:
    """``method(context, *args)``, run inside a trace through one ``tf.function`` of the
    context's tensors: the signatures that condition on topic proportions and those that
    condition on documents build contexts of the same tensors, so they call one traced graph
    of the generation loop (the longest trace of an export) instead of tracing it once
    each. Run eagerly (the signatures' Python functions), ``method`` itself."""
    traced = tf.function(lambda tensors, *args: method(Context(tensors), *args),
                         autograph=False)
    return lambda context, *args: (traced(context.tensors, *args) if tf.inside_function()
                                   else method(context, *args))


class _ModelHolder:
    """Keeps the Keras model out of tf.Module's tracking (see ServingModule.__init__)."""

    def __init__(self, model):
        self.model = model


class ServingModule(tf.Module):
    """A run's model, vocabularies and settings as TF functions with string inputs.

    Build it from a :class:`~tcnlm_tf.runs.loading.Run`; :meth:`signatures` gives the functions to
    export. The same functions run eagerly on the in-memory model, which is how the tests
    compare an export with the model it came from.
    """

    def __init__(self, run: Run):
        super().__init__(name="tcnlm_serving")
        # The functions use the Keras model; the SavedModel tracks its variables, not the
        # model (tf.saved_model.save would otherwise trace the model's own call as a
        # signature). The holder is a plain object, which tf.Module does not track.
        self._holder = _ModelHolder(run.model)
        self.model_variables = [v.value for v in run.model.variables]
        self.topic_model = has_topics(run.model)
        self.context_spec = run.model.context_spec
        self.carries_state = run.config.model.mode in STATEFUL_MODES
        # a row read in one pass: state carried through it (sentence mode with
        # --long-sentences carry too), else cut into seq_len windows from zero states
        self.one_pass = carries_state(run.config)
        # stream mode with --line-end none: no <eos> is read or predicted after a line
        self.line_eos = run.config.data.line_end == "eos"
        self.seq_len = run.config.data.seq_len
        # for clients that load the SavedModel in Python (evaluate.score): what the model is
        # and how its documents input is read
        self.model_type = tf.Variable(run.config.model.model, trainable=False, name="model_type")
        self.context_kind = tf.Variable(self.context_rule(), trainable=False, name="context_kind")
        # a literal <pad> in the text is <unk>, as in training (tcnlm_tf.data.loading.encode_split)
        self.lm_table = _table([w if w != PAD else "" for w in run.lm_vocab.words], UNK_ID)
        self.lm_words = tf.constant(run.lm_vocab.words, tf.string)
        self.vocab_size = len(run.lm_vocab)
        if self.context_spec.fields:
            self.topic_table = _table(run.topic_vocab.words, PAD_ID)   # unknown: left out
        if self.topic_model:
            self.num_topics = run.model.num_topics
            # the words of the columns of the model's topic-word matrix, and which of them
            # are special tokens (never listed)
            columns = (run.lm_vocab if run.model.topic_vocabulary == "lm"
                       else run.topic_vocab).words
            self.topic_word_words = tf.constant(columns, tf.string)
            self.topic_word_special = tf.constant([is_special(w) for w in columns], tf.bool)

        self.score = serving_function(self._score, input_signature=[
            tf.TensorSpec([None], tf.string, name="sentences"),
            tf.TensorSpec([None], tf.string, name="documents")])
        self.score_sentences = serving_function(
            # inside a trace, score's graph (traced once for both signatures)
            lambda sentences: (self.score if tf.inside_function() else self._score)(
                sentences, tf.fill(tf.shape(sentences), "")),
            input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
        self.next_words = serving_function(self._next_words, input_signature=[
            tf.TensorSpec([None], tf.string, name="context"),
            tf.TensorSpec([None], tf.string, name="documents"),
            tf.TensorSpec([], tf.int32, name="k")])
        if self.topic_model:
            self.infer_topics = serving_function(
                lambda documents: {"topics": self._topics(documents)},
                input_signature=[tf.TensorSpec([None], tf.string, name="documents")])
            generate, generate_sampled = (traced_once(self._generate),
                                          traced_once(self._generate_sampled))
            self.generate = serving_function(
                lambda topics, seed, temperature: generate(
                    self.model.topic_context(checked_topics(topics)), tf.shape(topics)[0],
                    seed, checked_generation(temperature)[0]),
                input_signature=[tf.TensorSpec([None, self.num_topics], tf.float32,
                                                name="topics"),
                                 SCALAR_SEED, SCALAR_TEMPERATURE])
            self.generate_from_document = serving_function(
                lambda documents, seed, temperature: generate(
                    self._context(documents), tf.shape(documents)[0], seed,
                    checked_generation(temperature)[0]),
                input_signature=[tf.TensorSpec([None], tf.string, name="documents"),
                                 SCALAR_SEED, SCALAR_TEMPERATURE])
            self.generate_sampled = serving_function(
                lambda topics, prompts, seed, temperature, top_k, top_p, beam_width:
                generate_sampled(self.model.topic_context(checked_topics(topics)),
                                 tf.shape(topics)[0], prompts, seed, temperature, top_k, top_p,
                                 beam_width),
                input_signature=[tf.TensorSpec([None, self.num_topics], tf.float32,
                                               name="topics"), *SAMPLER_SPECS])
            self.generate_sampled_from_document = serving_function(
                lambda documents, prompts, seed, temperature, top_k, top_p, beam_width:
                generate_sampled(self._context(documents), tf.shape(documents)[0], prompts,
                                 seed, temperature, top_k, top_p, beam_width),
                input_signature=[tf.TensorSpec([None], tf.string, name="documents"),
                                 *SAMPLER_SPECS])
            self.topic_words = serving_function(self._topic_words, input_signature=[
                tf.TensorSpec([], tf.int32, name="top_n")])
        else:
            self.generate = serving_function(
                lambda num_sentences, seed, temperature: self._generate_without_topics(
                    num_sentences, seed, temperature),
                input_signature=[tf.TensorSpec([], tf.int32, name="num_sentences"),
                                 SCALAR_SEED, SCALAR_TEMPERATURE])
            self.generate_sampled = serving_function(
                lambda prompts, seed, temperature, top_k, top_p, beam_width:
                self._generate_sampled(self._context(tf.fill(tf.shape(prompts), "")),
                                       tf.shape(prompts)[0], prompts, seed, temperature,
                                       top_k, top_p, beam_width),
                input_signature=SAMPLER_SPECS)

    def context_rule(self) -> str:
        """How the ``documents`` input is read: ``preceding-sentences`` (models with a
        context field of kind ``sentences``, e.g. ``preceding``: the text before the
        sentence, of which they read the last sentences' topic words), ``bag-of-words``
        (other models with document-context inputs trained with ``--context rest``: the
        document minus the sentence), ``preceding-bag-of-words`` (the same trained with ``--context
        preceding``: the text before the sentence), ``preceding-text`` (document- or
        stream-mode LSTM) or ``ignored``."""
        if self.context_spec.reads("sentences"):
            return "preceding-sentences"
        if self.context_spec.fields:
            return ("preceding-bag-of-words" if self.context_spec.protocol == "preceding"
                    else "bag-of-words")
        return "preceding-text" if self.carries_state else "ignored"

    @property
    def model(self):
        return self._holder.model

    def signatures(self) -> dict[str, tf.types.experimental.PolymorphicFunction]:
        """Signature name -> ``tf.function`` (each with its input signature), for
        ``tf.saved_model.save``. Functions, not their concrete functions: ``save`` traces
        each one once, in its save context, for the signature and for the module's attribute
        alike, where a concrete function traced beforehand was traced a second time there
        (half of an export's time)."""
        functions = {"serving_default": self.score_sentences, "score": self.score,
                     "next_words": self.next_words, "generate": self.generate,
                     "generate_sampled": self.generate_sampled}
        if self.topic_model:
            functions.update(infer_topics=self.infer_topics,
                             generate_from_document=self.generate_from_document,
                             generate_sampled_from_document=self.generate_sampled_from_document,
                             topic_words=self.topic_words)
        return functions

    # ------------------------------------------------------------------ text -> ids
    def _word_ids(self, text: tf.Tensor) -> tf.RaggedTensor:
        """Space-separated tokens [B] -> LM ids, ragged [B, (n)]."""
        return self.lm_table.lookup(tf.strings.split(text))

    def _document_ids(self, documents: tf.Tensor) -> tf.RaggedTensor:
        """TAB-separated sentences [B] -> LM ids with ``<eos>`` after each sentence (unless
        the run's ``--line-end`` is none); a sentence without a token is left out, as the
        corpus reader does: ragged [B, (n)]."""
        sentences = tf.strings.split(documents, "\t")                   # [B, (s)]
        words = self.lm_table.lookup(tf.strings.split(sentences.values))   # [S, (w)]
        rows = words
        if self.line_eos:
            eos = tf.fill([words.nrows(), 1], EOS_ID)
            rows = tf.concat([words, eos], axis=1)                    # [S, (w + 1)]
        kept = words.row_lengths() > 0
        rows = tf.ragged.boolean_mask(rows, kept)
        document_of = tf.boolean_mask(sentences.value_rowids(), kept)
        return tf.RaggedTensor.from_value_rowids(
            rows.values, tf.repeat(document_of, rows.row_lengths()),
            nrows=tf.shape(documents, out_type=tf.int64)[0])

    def _context_batch(self, documents: tf.Tensor) -> dict[str, tf.Tensor]:
        """The model's document-context fields for whole ``documents`` [B] (``preceding``:
        their last sentences), made by the training pipeline's builder from the
        topic-vocabulary ids of their sentences (a sentence without a token is left out, as
        the corpus reader does; one without a topic word stays, as an empty row)."""
        sentences = tf.strings.split(documents, "\t")                      # [B, (s)]
        words = tf.strings.split(sentences.values)                         # [S, (w)]
        kept = words.row_lengths() > 0
        ids = self.topic_table.lookup(tf.ragged.boolean_mask(words, kept))  # [S', (w)]
        ids = tf.ragged.boolean_mask(ids, ids > 0)                         # [S', (t)]
        document_of = tf.boolean_mask(sentences.value_rowids(), kept)
        per_document = tf.RaggedTensor.from_value_rowids(
            tf.range(tf.size(document_of, out_type=tf.int64)), document_of,
            nrows=tf.shape(documents, out_type=tf.int64)[0])              # [B, (s')]
        bounds = tf.stack([per_document.row_starts(), per_document.row_limits()], axis=1)
        return pipeline.document_context(self.context_spec, pipeline.padded_ids(ids.flat_values),
                                         ids.row_splits, bounds)

    def _context(self, documents: tf.Tensor) -> Context:
        if not self.context_spec.fields:
            return Context()
        return self.model.context(self._context_batch(documents), training=False)

    def _topics(self, documents: tf.Tensor) -> tf.Tensor:
        return self.model.infer_topics(self._context_batch(documents), training=False)

    # -------------------------------------------------------------- the LM itself
    def _streams(self, text: tf.Tensor, documents: tf.Tensor, end: bool
                 ) -> tuple[tf.RaggedTensor, tf.Tensor]:
        """The id streams the model reads, ``<eos>`` first (and last with ``end``, unless the
        run's ``--line-end`` is none), and how
        many ids of each belong to the document prefix (document and stream mode only): [B]."""
        words = self._word_ids(text)
        batch = words.nrows()
        eos = tf.fill([batch, 1], EOS_ID)
        parts = [eos]
        if self.carries_state:
            prefix = self._document_ids(documents)
            parts.append(prefix)
            prefix_length = tf.cast(prefix.row_lengths(), tf.int32)
        else:
            prefix_length = tf.zeros([batch], tf.int32)
        parts.append(words)
        if end and self.line_eos:
            parts.append(eos)
        return tf.concat(parts, axis=1), prefix_length

    def _hidden(self, inputs: tf.Tensor, context: Context) -> tf.Tensor:
        """Recurrent outputs for dense ``inputs`` [B, N] (padded with 0): [B, N, ...].

        Sentence mode restarts from a zero state every ``seq_len`` positions, as training
        cut long sentences (``--long-sentences reset``); document and stream mode, and sentence
        mode with ``--long-sentences carry``, read each row in one pass, which equals its
        windows with carried state."""
        if self.one_pass:
            return self.model.encode(inputs, context, training=False)[0]
        batch, length = tf.shape(inputs)[0], tf.shape(inputs)[1]
        windows = (length + self.seq_len - 1) // self.seq_len
        padded = tf.pad(inputs, [[0, 0], [0, windows * self.seq_len - length]])
        chunks = tf.reshape(padded, [batch * windows, self.seq_len])
        hidden = self.model.encode(chunks, context.repeat(windows), training=False)[0]
        rest = tf.shape(hidden)[2:]
        hidden = tf.reshape(hidden, tf.concat([[batch, windows * self.seq_len], rest], 0))
        return hidden[:, :length]

    def _score(self, sentences: tf.Tensor, documents: tf.Tensor) -> dict[str, tf.Tensor]:
        sentences, documents = same_length("score", "sentences", sentences, documents)
        stream, prefix_length = self._streams(sentences, documents, end=True)
        inputs = stream[:, :-1].to_tensor(default_value=PAD_ID)
        targets = stream[:, 1:].to_tensor(default_value=PAD_ID)
        context = self._context(documents)
        log_probs = self.model.target_log_prob(self._hidden(inputs, context), targets, context)
        # the sentence's targets start after the prefix: its words, then <eos> (if read)
        num_tokens = tf.cast(stream.row_lengths(), tf.int32) - 1 - prefix_length
        width = tf.reduce_max(tf.concat([num_tokens, [0]], 0))     # 0 for an empty batch
        positions = prefix_length[:, None] + tf.range(width)[None, :]
        valid = tf.range(width)[None, :] < num_tokens[:, None]
        positions = tf.where(valid, positions, 0)
        token_log_probs = tf.where(valid, tf.gather(log_probs, positions, batch_dims=1), 0.0)
        token_ids = tf.gather(targets, positions, batch_dims=1)
        log_likelihood = tf.reduce_sum(token_log_probs, axis=1)
        return {
            "tokens": tf.where(valid, tf.gather(self.lm_words, token_ids), ""),
            "token_log_probs": token_log_probs,
            "num_tokens": num_tokens,
            "log_likelihood": log_likelihood,
            "perplexity": tf.exp(-log_likelihood / tf.cast(tf.maximum(num_tokens, 1),
                                                           tf.float32)),
        }

    def next_word_log_probs(self, context: tf.Tensor, documents: tf.Tensor) -> tf.Tensor:
        """log P(next word | ``context``, ``documents``) over the whole LM vocabulary,
        ``<pad>`` included: [B, V], each row summing to 1 in probability."""
        stream, _ = self._streams(context, documents, end=False)
        inputs = stream.to_tensor(default_value=PAD_ID)
        topic_context = self._context(documents)
        hidden = self._hidden(inputs, topic_context)
        last = tf.cast(stream.row_lengths(), tf.int32) - 1
        return self.model.log_probs(tf.gather(hidden, last, batch_dims=1), topic_context)

    def _next_words(self, context: tf.Tensor, documents: tf.Tensor, k: tf.Tensor
                    ) -> dict[str, tf.Tensor]:
        """The k most probable next words and their probabilities under the model;
        ``<pad>`` is never returned, so with k at the vocabulary size the probabilities sum
        to 1 - P(<pad>) (about 1e-6 for a trained model, which never sees <pad> as a
        target)."""
        context, documents = same_length("next_words", "context", context, documents)
        log_p = self.next_word_log_probs(context, documents)
        log_p = tf.where(tf.range(self.vocab_size) == PAD_ID, -float("inf"), log_p)
        tf.debugging.assert_positive(k, message="next_words: k must be >= 1")
        k = tf.minimum(k, self.vocab_size - 1)
        best = tf.math.top_k(log_p, k=k)
        return {"words": tf.gather(self.lm_words, best.indices),
                "probabilities": tf.exp(best.values)}

    def _generate_without_topics(self, num_sentences: tf.Tensor, seed: tf.Tensor,
                                 temperature: tf.Tensor) -> dict[str, tf.Tensor]:
        """``generate`` of a model without topics: ``num_sentences`` sentences."""
        temperature, num_sentences = checked_generation(temperature, num_sentences)
        return self._generate(self._context(tf.fill([num_sentences], "")), num_sentences,
                              seed, temperature)

    def _generate(self, context: Context, batch: tf.Tensor, seed: tf.Tensor,
                  temperature: tf.Tensor) -> dict[str, tf.Tensor]:
        """Sample (or, at temperature <= 0, take the argmax) word by word from ``<eos>``,
        conditioned on ``context`` (a topic vector's, or a document's: the same context the
        model scores that document's sentences with)."""
        text = self._text(generate_ids(self.model, context, batch, seed, temperature))
        words = tf.RaggedTensor.from_tensor(text["tokens"], lengths=text["num_tokens"])
        return {**text, "sentences": tf.strings.reduce_join(words, axis=1, separator=" ")}

    def _text(self, out: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The generated ids of :func:`generate_ids` as ``tokens`` string [B, 40] ("" from
        the end of each sentence on) and their ``num_tokens`` [B]."""
        ended = tf.range(MAX_GENERATED_WORDS)[None, :] >= out["num_tokens"][:, None]
        return {"tokens": tf.where(ended, "", tf.gather(self.lm_words, out["ids"])),
                "num_tokens": out["num_tokens"]}

    def _generate_sampled(self, context: Context, batch: tf.Tensor, prompts: tf.Tensor,
                          seed: tf.Tensor, temperature: tf.Tensor, top_k: tf.Tensor,
                          top_p: tf.Tensor, beam_width: tf.Tensor) -> dict[str, tf.Tensor]:
        """``batch`` sentences after ``prompts`` [batch], conditioned on ``context``, with
        the sampler the scalar inputs describe (beam search where ``beam_width`` >= 2)."""
        temperature, _ = checked_generation(temperature)
        with tf.control_dependencies([
                tf.debugging.assert_equal(tf.size(prompts), batch, message=(
                    "generate_sampled: give one prompt (\"\" for none) per sentence to "
                    "generate: prompts and topics/documents must have the same length")),
                tf.debugging.assert_non_negative(
                    top_k, message="generate_sampled: top_k must be >= 0 (0: off)"),
                tf.debugging.assert_positive(
                    top_p, message="generate_sampled: top_p must be in (0, 1] (1: off)"),
                tf.debugging.assert_less_equal(
                    top_p, 1.0, message="generate_sampled: top_p must be in (0, 1] (1: off)"),
                tf.debugging.assert_non_negative(
                    beam_width, message="generate_sampled: beam_width must be >= 0"),
                tf.debugging.assert_less_equal(
                    beam_width, MAX_BEAM_WIDTH,
                    message=f"generate_sampled: beam_width must be at most {MAX_BEAM_WIDTH}")]):
            words = tf.strings.split(prompts)                          # [B, (p)]
        ids = self.lm_table.lookup(words)
        prompt = {"prompt_ids": ids.to_tensor(default_value=EOS_ID),
                  "prompt_lengths": tf.cast(ids.row_lengths(), tf.int32)}
        out = tf.cond(
            beam_width > 1,
            lambda: beam_ids(self.model, context, batch, beam_width, **prompt),
            lambda: generate_ids(self.model, context, batch, seed, temperature, top_k=top_k,
                                 top_p=top_p, **prompt))
        text = self._text(out)
        both = tf.concat([words, tf.RaggedTensor.from_tensor(text["tokens"],
                                                             lengths=out["num_tokens"])], 1)
        return {**text, "sentences": tf.strings.reduce_join(both, axis=1, separator=" "),
                "log_probability": out["log_probability"]}

    def _topic_words(self, top_n: tf.Tensor) -> dict[str, tf.Tensor]:
        """The ``top_n`` most probable words of every topic and their probabilities:
        [T, top_n] each (``top_n`` >= 1; at most the number of words that are not special
        tokens)."""
        tf.debugging.assert_positive(top_n, message="topic_words: top_n must be >= 1")
        special = self.topic_word_special
        beta = tf.where(special, -1.0, tf.cast(self.model.topic_word(), tf.float32))
        n = tf.minimum(top_n, tf.reduce_sum(tf.cast(~special, tf.int32)))
        best = tf.math.top_k(beta, k=n)
        return {"words": tf.gather(self.topic_word_words, best.indices),
                "probabilities": best.values}
