"""The model registry: one :class:`ModelSpec` per ``--model`` choice.

A spec says everything the generic parts of the project need to know about a model without
building it: its class (imported only when a model is built), its own options (each becomes
a ``train.run`` flag and a key of ``ModelConfig.options``), the sizes and option values it
uses instead of the preset's, the modes it trains in, whether it has topics, its rows in
``evaluate.compare`` and the flags that make a tiny instance for the test suite. The name
lists, flags, compare rows and test parameters are all derived from :data:`MODELS`.

This module is pure Python (no TensorFlow), so command-line parsing and validation stay fast.
Adding a model: write ``tcnlm_tf/models/<name>.py`` (a subclass of
:class:`~tcnlm_tf.models.base.LanguageModel`), put its layers under ``layers/``, and add one
:class:`ModelSpec` to :data:`MODELS` below.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Mapping

from tcnlm_tf.arguments import int_list
from tcnlm_tf.decoders.registry import decoder_rows
from tcnlm_tf.errors import UserError
from tcnlm_tf.options import Option, options_by_name, positive, positive_list, positive_or_none

# Options several models share are defined once, so one flag means one thing everywhere.
NUM_TOPICS = Option("num_topics", int, 50, "topics T (the papers use 50/100/150)",
                    positive, "must be a positive integer")
NTM_HIDDEN = Option("ntm_hidden_units", int_list, [256, 256],
                    "neural-topic-model encoder layer sizes", positive_list,
                    "sizes must be positive integers", flag="--ntm-hidden", metavar="N,N")
DIVERSITY = Option("diversity_weight", float, 0.1,
                   "lambda of the topic diversity regulariser, eq. 18 of Wang et al.",
                   lambda v: v >= 0, "must be >= 0")
TOPIC_WORD_SCALE = Option("topic_word_scale", float, 30.0,
                          "the topic model's word logits are this times their weights, so Adam "
                          "moves them this many times faster (1 = plain)", positive,
                          "must be positive")
#: how per-example document-context terms are weighted (tcnlm_tf.data.pipeline, context_weight)
WEIGHTINGS = ("sentence", "document")
NTM_WEIGHTING = Option("ntm_weighting", str, WEIGHTINGS[0],
                       "weight of each example's topic-model term: sentence (eq. 17 once per "
                       "sentence and its document minus the sentence, as the paper; a sentence "
                       "cut into several sequences counts once) or document (once per "
                       "document per epoch: Topic-RNN's per-document ELBO)",
                       lambda v: v in WEIGHTINGS,
                       f"must be one of {', '.join(WEIGHTINGS)}", metavar="|".join(WEIGHTINGS))
#: what conditions a topic-guided LM: the inferred t, or a constant uniform t (an ablation
#: that keeps the architecture without the topic information)
TOPIC_INPUTS = ("inferred", "uniform")
TOPIC_INPUT = Option("topic_input", str, TOPIC_INPUTS[0],
                     "what t the LM reads: inferred (the topic model's, the paper) or uniform "
                     "(1/T everywhere, in training and evaluation: the architecture without "
                     "topic information; the topic model still trains)",
                     lambda v: v in TOPIC_INPUTS, f"must be one of {', '.join(TOPIC_INPUTS)}",
                     metavar="|".join(TOPIC_INPUTS))
#: LCLM's --lclm-fusion (tcnlm_tf.models.lclm)
LCLM_FUSIONS = ("late", "output")
#: TDLM's --topic-dropout-on (layers.topic_attention.DROPOUT_PLACEMENTS)
TOPIC_DROPOUT_PLACEMENTS = ("embeddings", "document")
#: every model's: pre-trained vectors for its word-embedding tables (Lau et al. 2017,
#: footnote 10: all compared models start from the same word2vec vectors)
EMBEDDINGS = Option("embeddings", str, None,
                    "word2vec file (text or binary, e.g. from python -m train.word2vec) that "
                    "initialises the model's word-embedding tables: the LM's input embedding "
                    "and, where there is one, the topic side's (TDLM's document words, LCLM's "
                    "context words); words it lacks keep a random initialisation",
                    metavar="FILE")
NTM_OPTIONS = (NUM_TOPICS, NTM_HIDDEN, DIVERSITY, TOPIC_WORD_SCALE, NTM_WEIGHTING, TOPIC_INPUT)
NTM_TEST_FLAGS = ("--num-topics", "4", "--ntm-hidden", "16,16")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One ``--model`` choice.

    ``target`` is ``module:Class``; ``defaults`` are ``ModelConfig`` fields and option values
    that replace the preset's (e.g. the naive MoE's 30 experts of 100 units); ``compare_rows``
    maps an ``evaluate.compare`` row name to the extra ``train.run`` flags that make it;
    ``test_flags`` make a tiny instance for the tests (beside their tiny sizes); ``checks``
    are ``(rule(ModelConfig) -> bool, message)`` pairs that a valid configuration meets."""

    name: str
    target: str
    summary: str
    options: tuple[Option, ...] = ()
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    modes: tuple[str, ...] = ("sentence",)
    has_topics: bool = False
    compare_rows: Mapping[str, tuple[str, ...]] | None = None
    test_flags: tuple[str, ...] = ()
    checks: tuple[tuple[Callable[[Any], bool], str], ...] = ()

    @property
    def rows(self) -> Mapping[str, tuple[str, ...]]:
        return self.compare_rows if self.compare_rows is not None else {self.name: ()}

    @property
    def option_names(self) -> set[str]:
        return {option.name for option in self.options}

    def __post_init__(self):
        # every model has an LM word-embedding table, so every model takes --embeddings
        if EMBEDDINGS not in self.options:
            object.__setattr__(self, "options", self.options + (EMBEDDINGS,))

    def model_class(self):
        module, name = self.target.split(":")
        return getattr(importlib.import_module(module), name)


MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in (
    ModelSpec(
        "lstm", "tcnlm_tf.models.lstm:LSTMLanguageModel",
        "the basic LSTM language model (the papers' baseline)",
        modes=("sentence", "document", "stream"),
        # lstm-1x1000: TCNLM's parameter count (within 5 % on the APNEWS sample: 9.0M vs 9.2M)
        compare_rows={"lstm": (), "lstm-1x1000": ("--hidden-size", "1000"),
                      "lstm-document": ("--mode", "document")}),
    ModelSpec(
        "tcnlm", "tcnlm_tf.models.topic_guided:TCNLM",
        "Topic Compositional Neural Language Model (Wang et al. 2018)",
        options=NTM_OPTIONS + (
            Option("num_factors", int, None, "factors per gate n_f (default: the hidden size)",
                   positive_or_none, "must be a positive integer"),
            Option("topic_kernel_scale", float, 10.0,
                   "W_b and U_b are this times their weights, so Adam moves them this many "
                   "times faster (1 = plain)", positive, "must be positive")),
        has_topics=True, test_flags=NTM_TEST_FLAGS + ("--num-factors", "8"),
        compare_rows={"tcnlm": (), "tcnlm-constant-t": ("--topic-input", "uniform")}),
    ModelSpec(
        "moe", "tcnlm_tf.models.topic_guided:NaiveMoE",
        "naive mixture of LSTM experts mixed by the topic model (Wang et al. 2018, eq. 7-8)",
        options=NTM_OPTIONS,
        defaults={"num_topics": 30, "num_layers": 1, "hidden_size": 100},
        has_topics=True, compare_rows={"moe": ("--num-topics", "30")},
        test_flags=NTM_TEST_FLAGS,
        checks=((lambda m: m.num_layers == 1,
                 "--model moe mixes single-layer LSTM experts (eq. 7-8); use --num-layers 1"),)),
    ModelSpec(
        "sdlm", "tcnlm_tf.models.sdlm:SDLM",
        "Sememe-Driven Language Model: tied LSTM + sparse product of sememe experts "
        "(Gu et al. 2018)",
        defaults={"decoder": "sdlm"}, modes=("sentence", "document", "stream"),
        checks=((lambda m: m.decoder == "sdlm",
                 "--model sdlm is the LSTM with --decoder sdlm; for another decoder use "
                 "--model lstm --decoder ..."),)),
    ModelSpec(
        "tdlm", "tcnlm_tf.models.tdlm:TDLM",
        "Topically Driven Neural Language Model (Lau et al. 2017)",
        options=(
            NUM_TOPICS,
            Option("filter_widths", int_list, [2], "convolution filter widths h",
                   positive_list, "must be positive integers", metavar="H,H"),
            Option("num_filters", int, 20, "filters per width a", positive,
                   "must be a positive integer"),
            Option("topic_dim", int, 50, "size b of the topic vector s", positive,
                   "must be a positive integer"),
            Option("topic_dropout", float, 0.6,
                   "topic-model dropout rate (the paper's keep probability 0.4)",
                   lambda v: 0 <= v < 1, "must be in [0, 1)"),
            Option("topic_dropout_on", str, TOPIC_DROPOUT_PLACEMENTS[0],
                   "what the topic-model dropout hits besides s: embeddings (the document's "
                   "word embeddings before the convolution, the authors' code) or document "
                   "(the pooled d, the paper's text)",
                   lambda v: v in TOPIC_DROPOUT_PLACEMENTS,
                   f"must be one of {', '.join(TOPIC_DROPOUT_PLACEMENTS)}",
                   metavar="|".join(TOPIC_DROPOUT_PLACEMENTS), legacy="document"),
            Option("topic_targets", int, 3, "document words m1 the topic model predicts per "
                   "example", positive, "must be a positive integer"),
            Option("doc_labels", str, None, "directory with train.txt (valid.txt, test.txt): "
                   "one label per corpus line, trained as a classification task (Sec. 6.1)",
                   metavar="DIR"),
            Option("doc_tags", str, None, "directory with train.txt (valid.txt, test.txt): "
                   "each corpus line's tags, TAB-separated, as learned vectors (Sec. 6.2)",
                   metavar="DIR"),
            Option("tag_dim", int, 5, "size f of a tag vector", positive,
                   "must be a positive integer")),
        has_topics=True,
        compare_rows={"tdlm": (), "tdlm-dropout-document": ("--topic-dropout-on", "document")},
        test_flags=("--num-topics", "4", "--num-filters", "6", "--topic-dim", "8")),
    ModelSpec(
        "lda_lstm", "tcnlm_tf.models.lda_lstm:LDALSTM",
        "LSTM whose output is concatenated with a pre-trained LDA's document-topic "
        "distribution (Lau et al. 2017's lstm+lda; Wang et al. 2018 Table 2)",
        options=(
            NUM_TOPICS,
            Option("lda_alpha", float, 0.1, "LDA's symmetric document-topic prior alpha",
                   positive, "must be positive"),
            Option("lda_eta", float, 0.01, "LDA's symmetric topic-word prior eta",
                   positive, "must be positive"),
            Option("lda_passes", int, 10, "passes of gensim's LDA over the training documents",
                   positive, "must be a positive integer"),
            Option("lda_inference_steps", int, 50, "variational E-step iterations that infer a "
                   "document's topic distribution (in the graph, as gensim's inference)",
                   positive, "must be a positive integer")),
        has_topics=True, test_flags=("--num-topics", "4", "--lda-passes", "2")),
    ModelSpec(
        "lclm", "tcnlm_tf.models.lclm:LCLM",
        "Larger-context LM: attention over the bags of words of the preceding sentences, "
        "fused late with the LSTM's memory cell (Wang and Cho 2016)",
        options=(
            Option("context_sentences", int, 4, "preceding sentences of the document read as "
                   "context (4, as tuned by Lau et al. 2017)", positive,
                   "must be a positive integer"),
            Option("context_words", int, 50, "topic-vocabulary words kept per context sentence",
                   positive, "must be a positive integer"),
            Option("lclm_fusion", str, LCLM_FUSIONS[0],
                   "where the attended context enters: late (fused with the memory cell "
                   "into h_t, which feeds the next step: Wang and Cho 2016) or output (added "
                   "to the finished LSTM output: the output layer alone sees it)",
                   lambda v: v in LCLM_FUSIONS, f"must be one of {', '.join(LCLM_FUSIONS)}",
                   metavar="|".join(LCLM_FUSIONS), legacy="output")),
        compare_rows={"lclm": (), "lclm-output-fusion": ("--lclm-fusion", "output")},
        test_flags=("--context-sentences", "2", "--context-words", "6")),
    ModelSpec(
        "topic_rnn", "tcnlm_tf.models.topic_rnn:TopicRNN",
        "Topic-RNN: a Gaussian document vector theta biases the non-stop-word softmax "
        "(Dieng, Wang, Gao, Paisley 2017)",
        options=(NUM_TOPICS, NTM_HIDDEN, NTM_WEIGHTING),
        # the paper's ELBO is per document: its KL once per document, not once per sentence
        # (which held theta at the prior: tcnlm_tf/models/topic_rnn.py)
        defaults={"decoder": "softmax", "ntm_weighting": "document"}, has_topics=True,
        compare_rows={"topic_rnn": (),
                      "topic_rnn-kl-per-sentence": ("--ntm-weighting", "sentence")},
        test_flags=NTM_TEST_FLAGS,
        checks=((lambda m: m.decoder == "softmax" and not m.decoder_option("tie_embeddings"),
                 "--model topic_rnn adds b^T theta to a full softmax's logits; use --decoder "
                 "softmax without --tie-embeddings"),)),
)}


def spec_of(name: str) -> ModelSpec:
    if name not in MODELS:
        raise UserError(f"unknown --model {name!r}; choose one of {', '.join(MODELS)}")
    return MODELS[name]


def all_options() -> dict[str, Option]:
    """Every model option by name (a shared option appears once)."""
    return options_by_name(MODELS.values())


def models_with(option: str) -> list[str]:
    return [name for name, spec in MODELS.items() if option in spec.option_names]


#: the model the decoders' compare rows train (:func:`tcnlm_tf.decoders.registry.decoder_rows`)
DECODER_ROWS_MODEL = "lstm"


def compare_rows() -> dict[str, tuple[str, list[str]]]:
    """``evaluate.compare`` row name -> (model name, the row's train.run flags): every
    model's rows, the decoders' after those of the basic LSTM they train."""
    rows = {}
    for spec in MODELS.values():
        rows.update({row: (spec.name, ["--model", spec.name, *flags])
                     for row, flags in spec.rows.items()})
        if spec.name == DECODER_ROWS_MODEL:
            rows.update({row: (spec.name, ["--model", spec.name, *flags])
                         for row, flags in decoder_rows().items()})
    return rows
