"""The decoder registry: one :class:`DecoderSpec` per ``--decoder`` choice.

A decoder is the output layer of a language model: hidden states -> a distribution over the
LM vocabulary. Its spec says everything the generic parts of the project need without
building it: the class that builds it (:class:`tcnlm_tf.decoders.output_layers.Decoder`,
imported only when a model is built), its own options (each a ``train.run`` flag and a key
of ``ModelConfig.decoder_options``), the output-side dropouts its authors used, what a fresh
run fills in from the data, rules a valid configuration meets, and its rows in
``evaluate.compare`` (on the basic LSTM). Flags, validation and compare rows are all derived
from :data:`DECODERS`.

Pure Python (no TensorFlow), so command-line parsing and validation stay fast. Adding a
decoder: a :class:`~tcnlm_tf.decoders.output_layers.Decoder` subclass that builds its layer
(the layer under ``layers/``) and one :class:`DecoderSpec` in :data:`DECODERS` (or
:func:`register_decoder`), as ``tests/test_extension_points.py`` does.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Mapping

from tcnlm_tf.arguments import int_list
from tcnlm_tf.errors import UserError
from tcnlm_tf.options import Option, options_by_name, positive, rate

SEMEME_NORMALIZATIONS = ("left", "symmetric")
#: corpora in Chinese, for which only a HowNet knowledge base makes sense
CHINESE_DATASETS = ("peoples_daily",)


@dataclasses.dataclass(frozen=True)
class DecoderSpec:
    """One ``--decoder`` choice.

    ``target`` is ``module:Class``, a :class:`tcnlm_tf.decoders.output_layers.Decoder`;
    ``dropouts`` maps a setting (``output_dropout``, a ``ModelConfig`` field, or one of the
    decoder's options) to its authors' value as a function of the run's ``--dropout``, filled in
    for a fresh run unless given; ``configure(config)`` completes a fresh run's configuration
    (:class:`~tcnlm_tf.config.RunConfig`; the registry cannot import it) from its data (or
    raises :class:`UserError`); ``vocabulary_check(options, lm_vocab_size)`` returns a message
    when the options do not fit the corpus's vocabulary; ``checks`` are
    ``(rule(ModelConfig) -> bool, message)`` pairs; ``compare_rows`` maps an
    ``evaluate.compare`` row on ``--model lstm`` to the flags after ``--decoder <name>``."""

    name: str
    target: str
    summary: str
    options: tuple[Option, ...] = ()
    dropouts: Mapping[str, Callable[[float], float]] = dataclasses.field(default_factory=dict)
    configure: Callable[[Any], None] | None = None
    vocabulary_check: Callable[[Mapping[str, Any], int], str | None] | None = None
    checks: tuple[tuple[Callable[[Any], bool], str], ...] = ()
    compare_rows: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @property
    def option_names(self) -> set[str]:
        return {option.name for option in self.options}

    def default(self, name: str) -> Any:
        """The default of the option ``name``."""
        return next(option.default for option in self.options if option.name == name)

    def decoder_class(self):
        module, name = self.target.split(":")
        return getattr(importlib.import_module(module), name)


def _increasing_cutoffs(value) -> bool:
    return value is None or all(b > a for a, b in zip([0, *value], value))


def _cutoffs_below_vocabulary(options: Mapping[str, Any], lm_vocab_size: int) -> str | None:
    cutoffs = options.get("cutoffs")
    if cutoffs and cutoffs[-1] >= lm_vocab_size:
        return (f"--cutoffs {','.join(map(str, cutoffs))}: every cutoff must be below the LM "
                f"vocabulary size {lm_vocab_size}; give smaller ones or leave --cutoffs out to "
                "choose them from the vocabulary")
    return None


def _sdlm_knowledge_base(config: Any) -> None:
    """A fresh ``--decoder sdlm`` run (its :class:`~tcnlm_tf.config.RunConfig`
    ``config``): the knowledge base its corpus calls for."""
    options = config.model.decoder_options
    if options.get("knowledge_base") is None:
        if config.data.dataset in CHINESE_DATASETS:
            raise UserError(f"--decoder sdlm on --dataset {config.data.dataset} needs HowNet's "
                            "Chinese sememes: pass --knowledge-base hownet:FILE with the SDLM "
                            "authors' HowNet.txt (LM/data/HowNet.txt of "
                            "github.com/thunlp/SDLM-pytorch); English WordNet would leave "
                            "almost every word a private sense")
        options["knowledge_base"] = "synthetic" if config.data.dataset == "synthetic" \
            else "wordnet"
    elif config.data.dataset in CHINESE_DATASETS and \
            not options["knowledge_base"].startswith("hownet:"):
        raise UserError(f"--decoder sdlm on --dataset {config.data.dataset} needs HowNet's "
                        "Chinese sememes (--knowledge-base hownet:FILE); English WordNet would "
                        "leave almost every word a private sense")


# Options several decoders share are defined once, so one flag means one thing everywhere.
OUTPUT_EMBEDDING_DROPOUT = Option(
    "output_embedding_dropout", float, 0.0,
    "dropout on the output embedding's dimensions, one mask per batch (default: 0; sdlm: "
    "0.5 x --dropout, the SDLM authors' code, 0.3 at their 0.6)", rate, "must be in [0, 1)",
    metavar="RATE")

DECODERS: dict[str, DecoderSpec] = {spec.name: spec for spec in (
    DecoderSpec(
        "adaptive", "tcnlm_tf.decoders.output_layers:AdaptiveDecoder",
        "adaptive softmax (Grave et al. 2016; TCNLM's output layer), a full softmax below "
        "1,000 words",
        options=(Option("cutoffs", int_list, None, "cluster boundaries, e.g. 2000,10000 "
                        "(default: chosen from the vocabulary size)", _increasing_cutoffs,
                        "must be positive and strictly increasing, e.g. 2000,10000",
                        metavar="N,N"),),
        vocabulary_check=_cutoffs_below_vocabulary),
    DecoderSpec(
        "softmax", "tcnlm_tf.decoders.output_layers:SoftmaxDecoder", "a full softmax",
        options=(Option("tie_embeddings", bool, False, "share the input embedding and the "
                        "output weights (Inan et al. 2017; Press and Wolf 2017)"),),
        compare_rows={"lstm-tied": ("--tie-embeddings",)}),
    DecoderSpec(
        "sdlm", "tcnlm_tf.decoders.output_layers:SememeDrivenDecoder",
        "the sememe-driven decoder (Gu et al. 2018), tied to the input embedding",
        options=(
            Option("knowledge_base", str, None, "word -> sense -> sememe source (HowNet.txt, "
                   "Debian's WordNet 3.0, or the synthetic corpus's generator; default: "
                   "synthetic on --dataset synthetic, else wordnet; --dataset peoples_daily "
                   "needs hownet:FILE)", lambda value: value is not None,
                   "is needed: hownet:FILE, wordnet or synthetic",
                   metavar="hownet:FILE|wordnet|synthetic"),
            Option("num_bases", int, 5, "basis matrices R of eq. 10", positive,
                   "must be a positive integer"),
            Option("sememe_normalization", str, SEMEME_NORMALIZATIONS[0], "C_{k,s} of eq. 6",
                   lambda value: value in SEMEME_NORMALIZATIONS,
                   f"must be one of {', '.join(SEMEME_NORMALIZATIONS)}",
                   metavar="|".join(SEMEME_NORMALIZATIONS)),
            OUTPUT_EMBEDDING_DROPOUT),
        # the SDLM authors' tied_lstm_rnn.py: 0.2 + 0.5 d on g, 0.5 d on the output
        # embedding's dimensions (0.5 and 0.3 for their medium model's 0.6; Gu et al. 2018
        # Appendix C.1 says only that these last two rates were tuned apart from d)
        dropouts={"output_dropout": lambda d: 0.2 + 0.5 * d,
                  "output_embedding_dropout": lambda d: 0.5 * d},
        configure=_sdlm_knowledge_base),
    DecoderSpec(
        "mos", "tcnlm_tf.decoders.output_layers:MixtureOfSoftmaxesDecoder",
        "a mixture of softmaxes (Yang et al. 2018), tied to the input embedding",
        options=(
            Option("mixtures", int, 10, "softmaxes mixed", positive,
                   "must be a positive integer"),
            Option("latent_dropout", float, 0.0, "dropout on the latent contexts h_n "
                   "(default: 0.29, Yang et al.'s PTB setting)", rate, "must be in [0, 1)",
                   metavar="RATE"),
            OUTPUT_EMBEDDING_DROPOUT),
        dropouts={"latent_dropout": lambda d: 0.29},     # Yang et al.'s code, their PTB setting
        compare_rows={"lstm-mos": ()}),
)}


def decoder_spec(name: str) -> DecoderSpec:
    if name not in DECODERS:
        raise UserError(f"unknown --decoder {name!r}; choose one of {', '.join(DECODERS)}")
    return DECODERS[name]


def register_decoder(spec: DecoderSpec) -> None:
    """Add ``spec`` to :data:`DECODERS` (an error if its name is taken)."""
    if spec.name in DECODERS:
        raise ValueError(f"a decoder named {spec.name!r} exists already")
    DECODERS[spec.name] = spec


def all_decoder_options() -> dict[str, Option]:
    """Every decoder option by name (a shared option appears once)."""
    return options_by_name(DECODERS.values())


def decoders_with(option: str) -> list[str]:
    return [name for name, spec in DECODERS.items() if option in spec.option_names]


def decoder_rows() -> dict[str, list[str]]:
    """``evaluate.compare`` rows of the decoders, each on the basic LSTM: row name -> the
    flags after ``--model lstm``."""
    return {row: ["--decoder", spec.name, *flags]
            for spec in DECODERS.values() for row, flags in spec.compare_rows.items()}
