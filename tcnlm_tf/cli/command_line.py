"""The ``python -m train.run`` command line: its parser and the run configuration its flags
make (:func:`config_from_args`, :func:`resumed_config`), a library that the command, the
evaluators that take training flags (``evaluate.gradients``, ``evaluate.knowledge_base``),
``evaluate.compare`` and the benchmarks share. Every model's and decoder's flags come from
their registries (:mod:`tcnlm_tf.models.registry`, :mod:`tcnlm_tf.decoders.registry`).
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any, Callable

from tcnlm_tf.arguments import dataset_name, finite_float
from tcnlm_tf.config import (CONTEXTS, DATASETS, INITS, LINE_ENDS, LONG_SENTENCES, MODES,
                             OPTIMIZERS, PRESETS, STRATEGIES, DataConfig, ModelConfig,
                             RunConfig, TrainConfig, apply_decoder_defaults, apply_preset,
                             check_data_dir_given, default_cache_dir, default_data_dir,
                             default_runs_dir)
from tcnlm_tf.data.loading import corpus_location
from tcnlm_tf.data.vocab import TOP_AMONG
from tcnlm_tf.decoders.registry import DECODERS, all_decoder_options, decoder_spec, decoders_with
from tcnlm_tf.errors import UserError
from tcnlm_tf.models.registry import MODELS, all_options, models_with
from tcnlm_tf.options import Option
from tcnlm_tf.precision import DEFAULT_PRECISION_HELP, PRECISIONS
from tcnlm_tf.runs import provenance
from tcnlm_tf.runs.directory import RunDirectory

#: what ``python -m train.run --help`` says it does
DESCRIPTION = "train a language model and report its test perplexity."

#: flags that may change when a run is resumed (the training budget, and the learning rate
#: to continue after a non-finite loss); all others are fixed
RESUMABLE = {"epochs", "max_steps", "patience", "log_every", "checkpoint_minutes",
             "keep_checkpoints", "learning_rate", "precision"}
#: data settings that are file locations: stored absolute, compared as files on --resume
PATH_SETTINGS = ("data_dir", "stopwords")
#: topic-vocabulary document-frequency threshold: the papers' 100 for their corpora, 5 for
#: the small synthetic corpus whose topic words are spread over fewer documents
TOPIC_MIN_DOCS = {"synthetic": 5, **{name: 100 for name in DATASETS if name != "synthetic"}}
#: the general threshold, for a corpus of one's own: its size is not known, and the papers'
#: 100 leaves a corpus of a few thousand documents with hardly a topic word
GENERAL_TOPIC_MIN_DOCS = 10

FIELDS = {
    "data": {f.name for f in dataclasses.fields(DataConfig)},
    "model": {f.name for f in dataclasses.fields(ModelConfig)} - {"options", "decoder_options"},
    "train": {f.name for f in dataclasses.fields(TrainConfig)},
}


def key_value(text: str) -> tuple[str, Any]:
    """An argparse type: ``KEY=VALUE``, the value an int, else a float, else the text."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key.strip(), int(value)
    except ValueError:
        try:
            return key.strip(), float(value)
        except ValueError:
            return key.strip(), value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m train.run", allow_abbrev=False,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  python -m train.run                      # LSTM on the synthetic corpus\n"
               "  python -m train.run --dataset apnews --data-dir ../shared/data --model lstm\n"
               "  python -m train.run --dataset bnc --preset large --mode document\n"
               "  python -m train.run --model sdlm --knowledge-base synthetic\n"
               "  python -m train.run --run-name bnc-lstm --resume\n"
               "Bring corpora in the TDLM format (one document per line, sentences separated\n"
               "by a TAB, tokens by a space) or make them with `python -m train.prepare`.")
    # Defaults are None here and resolved in config_from_args, so we know what was explicit.
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", type=dataset_name, metavar="NAME",
                      help=f"corpus: one the papers name ({', '.join(DATASETS)}; each with its "
                      "paper's settings) or any folder <data-dir>/NAME holding your own "
                      "train.txt, valid.txt and test.txt, read with the general settings "
                      "(default: synthetic)")
    data.add_argument("--data-dir", help=f"directory holding <dataset>/{{train,valid,test}}.txt "
                      f"(default: $TCNLM_DATA_DIR or ./data, now {default_data_dir()})")
    data.add_argument("--cache-dir", type=Path, default=None,
                      help=f"preprocessed-corpus cache (default: $TCNLM_CACHE_DIR or ./.cache, "
                      f"now {default_cache_dir()})")
    data.add_argument("--min-freq", type=int, help="LM vocabulary: minimum word count (10)")
    data.add_argument("--topic-min-docs", type=int,
                      help="topic vocabulary: minimum document frequency (100; synthetic: 5)")
    data.add_argument("--topic-top-fraction", type=finite_float, metavar="FRACTION",
                      help="topic vocabulary: the fraction of most frequent words left out "
                      "(0.001, both papers' 0.1 %%)")
    data.add_argument("--topic-top-among", choices=TOP_AMONG,
                      help="topic vocabulary: the most frequent 0.1 %% of which words are left "
                      "out: types (every word type of the training split, the TDLM authors' "
                      "code) or lm_vocab (the LM vocabulary's words; runs saved before "
                      "this option existed used it) (default: types)")
    data.add_argument("--stopwords", help="stop-word list for the topic vocabulary "
                      "(default: tcnlm_tf/data/resources/stopwords_en.txt)")
    data.add_argument("--max-bow", type=int, help="document-context words per sentence (300)")
    data.add_argument("--context", choices=CONTEXTS,
                      help="what a sentence's document context holds, in training and "
                      "evaluation: rest: the document minus the sentence (both papers); "
                      "preceding: only the sentences before it (causal, as a document LSTM "
                      "reads); models without document context ignore it (default: rest)")
    data.add_argument("--line-end", choices=LINE_ENDS,
                      help="--mode stream: eos, an <eos> after every line, predicted like a "
                      "word (the PyTorch word-language-model example; what sentence and "
                      "document mode predict); none, only the words, as the SDLM authors' "
                      "data.py (People's Daily lines end in their own '。') (default: eos)")
    data.add_argument("--seq-len", type=int, help="LM sequence length (30)")
    data.add_argument("--long-sentences", choices=LONG_SENTENCES,
                      help="--mode sentence: a sentence longer than --seq-len is cut into "
                      "pieces, each from a zero state (reset: the TDLM authors' code, the "
                      "papers' protocol) or from the state the piece before it ended in "
                      "(carry: Zheng, Vafa and Blei's code, as one sequence) (default: reset)")
    data.add_argument("--max-doc-tokens", type=int,
                      help="skip (and count) documents longer than this (100000)")
    data.add_argument("--synthetic", type=key_value, action="append", metavar="KEY=VALUE",
                      help="synthetic-corpus setting, repeatable, e.g. --synthetic train_docs=500 "
                      "(fields of tcnlm_tf.data.synthetic.SyntheticConfig)")
    model = parser.add_argument_group("model")
    model.add_argument("--model", choices=list(MODELS),
                       help="; ".join(f"{name}: {spec.summary}" for name, spec in MODELS.items())
                       + " (default: lstm)")
    model.add_argument("--preset", choices=sorted(PRESETS),
                       help="small: 1x600 LSTM, large: 2x900, medium: 2x650 with 650-d "
                       "embeddings (default: small; a model may set its own sizes, e.g. "
                       "--model moe: Table 6's 30 experts of 1x100)")
    model.add_argument("--mode", choices=MODES,
                       help="sentence: each sentence on its own (papers' protocol); document: "
                       "state carried across a document's sentences; stream: the split as "
                       "one token stream in --batch-size lanes, state carried throughout "
                       "(the SDLM paper's protocol) (default: sentence)")
    model.add_argument("--num-layers", type=int, help="override the preset's LSTM layers")
    model.add_argument("--hidden-size", type=int, help="override the preset's LSTM size")
    model.add_argument("--embedding-dim", type=int, help="word embedding size (300)")
    model.add_argument("--dropout", type=finite_float, help="dropout rate (0.4)")
    model.add_argument("--decoder", choices=list(DECODERS),
                       help="output layer: " + "; ".join(
                           f"{name}: {spec.summary}" for name, spec in DECODERS.items())
                       + " (default: adaptive)")
    model.add_argument("--output-dropout", type=finite_float, metavar="RATE",
                       help="dropout on g, the last recurrent layer's output that the "
                       "decoder reads (default: --dropout; --decoder sdlm: 0.2 + 0.5 x "
                       "--dropout, the SDLM authors' code, 0.5 at their 0.6)")
    model.add_argument("--init", choices=INITS,
                       help="starting weights: keras (Keras's initialisers: embeddings "
                       "U(+-0.05), Glorot and orthogonal LSTM weights, unit forget bias) or "
                       "pytorch (the SDLM authors' code: embeddings U(+-0.1), every plain "
                       "LSTM layer's weights and biases U(+-1/sqrt(H)) as torch.nn.LSTM; "
                       "other layers keep their own) (default: keras)")
    own = parser.add_argument_group("model options (each applies to the models named)")
    for option in all_options().values():
        users = models_with(option.name)
        overrides = [f"{name}: {MODELS[name].defaults[option.name]}" for name in users
                     if option.name in MODELS[name].defaults]
        default = ", ".join([repr(option.default)] + overrides)
        option.add_to(own, f"[{', '.join(users)}] {option.help} (default: {default})")
    decoder = parser.add_argument_group("decoder options (each applies to the decoders named)")
    for option in all_decoder_options().values():
        described = ("" if "default:" in option.help or option.type is bool
                     else f" (default: {option.default!r})")
        option.add_to(decoder, f"[{', '.join(decoders_with(option.name))}] {option.help}"
                      + described)
    train = parser.add_argument_group("training")
    train.add_argument("--precision", choices=PRECISIONS,
                       help="the layers' dtype policy: float32, or mixed_bfloat16 / "
                       "mixed_float16 (float32 variables, the language model's matrix "
                       "products in bfloat16 / float16, normalisers, losses and topic models "
                       "in float32; mixed_float16 with loss scaling, for GPUs). Checkpoints "
                       "are float32 under every policy, so --resume may change it "
                       f"(default: {DEFAULT_PRECISION_HELP})")
    train.add_argument("--optimizer", choices=OPTIMIZERS,
                       help="adam, or plain sgd as the PyTorch LM example (default: adam)")
    train.add_argument("--batch-size", type=int, help="global batch size (64; with --strategy "
                       "multi_worker, across all workers)")
    train.add_argument("--epochs", type=int, help="maximum epochs (10)")
    train.add_argument("--learning-rate", "--lr", type=finite_float, help="learning rate (0.001)")
    train.add_argument("--clip-norm", type=finite_float, help="global gradient-norm clip (5.0)")
    train.add_argument("--lr-decay", type=finite_float,
                       help="LR factor after an epoch without improvement (0.5)")
    train.add_argument("--lr-decay-start", type=int,
                       help="the first epoch whose end may decay the LR; earlier epochs keep "
                       "it and do not count toward --patience (1; the SDLM authors' script: "
                       "15)")
    train.add_argument("--patience", type=int,
                       help="stop after this many epochs without improvement (2)")
    train.add_argument("--max-steps", type=int, help="stop after this many optimiser steps, "
                       "with a checkpoint to --resume from")
    train.add_argument("--seed", type=int, help="random seed for weights and shuffling (0)")
    train.add_argument("--log-every", type=int, help="TensorBoard scalars every N steps (20)")
    train.add_argument("--checkpoint-minutes", type=finite_float,
                       help="also save a checkpoint this often within an epoch, so a killed "
                       "run loses at most this much work on --resume (10; 0: epoch ends only)")
    train.add_argument("--keep-checkpoints", type=int,
                       help="newest checkpoints kept; --resume falls back to an older one when "
                       "the newest is damaged (3; at least 2)")
    train.add_argument("--strategy", choices=STRATEGIES,
                       help="mirrored: every local GPU (or the CPU) of this process; "
                       "multi_worker: one process per machine, the cluster and this process's "
                       "place in it from $TF_CONFIG, the run directory on a shared filesystem "
                       "(default: mirrored)")
    run = parser.add_argument_group("run directory")
    run.add_argument("--runs-dir", type=Path, default=default_runs_dir(),
                     help="where run directories are created (default: $TCNLM_RUNS_DIR or "
                          f"./runs, now {default_runs_dir()})")
    run.add_argument("--run-name", help="run directory name "
                     "(default: <dataset>-<model>[-document|-stream])")
    run.add_argument("--resume", action="store_true",
                     help="continue the run in --runs-dir/--run-name from its latest checkpoint")
    run.add_argument("--config", type=Path, metavar="PATH",
                     help="start a new run with the configuration of PATH: a config.json, or "
                     "the run directory or results/ record holding one (every setting "
                     "included); flags given beside it replace its values, e.g. --seed 1, "
                     "and --data-dir says where its corpus is (a record names none)")
    return parser


def explicit_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Config fields and model options the user set on the command line (argparse defaults
    are None)."""
    names = set().union(*FIELDS.values(), all_options(), all_decoder_options())
    return {k: v for k, v in vars(args).items() if k in names and v is not None}


def chosen_options(explicit: dict[str, Any], options: dict[str, Option], spec: Any, flag: str,
                   owners: Callable[[str], list[str]]) -> dict[str, Any]:
    """The ``explicit`` settings that are ``options`` of the registered ``spec`` chosen by
    ``flag`` (``--model``, ``--decoder``); one that belongs to others only (``owners(name)``)
    is an error."""
    for name in options.keys() & explicit.keys():
        if name not in spec.option_names:
            raise UserError(f"{options[name].option_string} does not apply to {flag} "
                            f"{spec.name}; it is an option of {flag} "
                            f"{'/'.join(owners(name))}")
    return {name: explicit[name] for name in options.keys() & explicit.keys()}


def corpus_note(data: DataConfig) -> str | None:
    """The line that says which settings a corpus of one's own gets (None for the papers'
    corpora and the synthetic one, which keep their own)."""
    if data.dataset in DATASETS:
        return None
    stopwords = data.stopwords or "the built-in English stop-word list"
    return (f"corpus {data.dataset!r} is not one the papers name, so it gets the general "
            f"settings: LM vocabulary the words seen at least {data.min_freq} times "
            f"(--min-freq), topic vocabulary the words in at least {data.topic_min_docs} "
            f"training documents (--topic-min-docs), less the stop words ({stopwords}; "
            "--stopwords)")


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """A fresh run's configuration: dataclass defaults, preset, the model's own defaults,
    then explicit flags, then the decoder's defaults. A model (decoder) option given for a
    model (decoder) that has no such option is an error."""
    explicit = explicit_settings(args)
    check_data_dir_given(args.dataset or "synthetic", args.data_dir)
    config = RunConfig()
    set_explicit(config, explicit, args.synthetic)
    if "topic_min_docs" not in explicit:
        config.data.topic_min_docs = TOPIC_MIN_DOCS.get(config.data.dataset,
                                                        GENERAL_TOPIC_MIN_DOCS)
    # stored absolute: the run is evaluated and resumed from other working directories
    for name in PATH_SETTINGS:
        setattr(config.data, name, resolved(getattr(config.data, name)))
    apply_preset(config.model, set(explicit))     # may choose the decoder (--model sdlm)
    set_decoder_options(config, explicit)
    apply_decoder_defaults(config, set(explicit))
    return config


def set_explicit(config: RunConfig, explicit: dict[str, Any],
                 synthetic: list[tuple[str, Any]] | None) -> None:
    """The ``explicit`` settings (:func:`explicit_settings`) and ``--synthetic`` values set on
    ``config``: its fields and its model's options (an option of another model is an
    error)."""
    for section, names in FIELDS.items():
        target = getattr(config, section)
        for name in names & explicit.keys():
            setattr(target, name, explicit[name])
    config.model.options.update(chosen_options(explicit, all_options(), MODELS[config.model.model],
                                               "--model", models_with))
    if synthetic:
        config.data.synthetic = dict(synthetic)


def set_decoder_options(config: RunConfig, explicit: dict[str, Any]) -> None:
    """The ``explicit`` options of ``config``'s decoder set on it (an option of another
    decoder is an error)."""
    config.model.decoder_options.update(chosen_options(
        explicit, all_decoder_options(), decoder_spec(config.model.decoder), "--decoder",
        decoders_with))


#: settings that --config cannot change: they choose which options and sizes the file holds
FIXED_BY_CONFIG = ("model", "decoder", "preset")


def config_from_file(args: argparse.Namespace) -> RunConfig:
    """A fresh run's configuration from ``--config`` (a ``config.json`` or the directory
    holding one: a run directory or a record): every setting as saved, then the flags given
    beside it. Its corpus is found through ``--data-dir`` (else the file's own directory
    when that holds it, else ``$TCNLM_DATA_DIR`` or ``./data``); a ``<data-dir>/…`` path
    (:mod:`tcnlm_tf.runs.provenance`) is read inside it."""
    path = args.config / "config.json" if args.config.is_dir() else args.config
    config = RunConfig.load(path)
    explicit = explicit_settings(args)
    changed = [name for name in FIXED_BY_CONFIG if name in explicit
               and explicit[name] != getattr(config.model, name)]
    if changed:
        raise UserError(f"--{changed[0]} cannot change what --config {path} trains (its "
                        f"options and sizes are those of --model {config.model.model}, "
                        f"--decoder {config.model.decoder}); start from flags instead")
    check_data_dir_given(explicit.get("dataset", config.data.dataset), args.data_dir)
    set_explicit(config, explicit, args.synthetic)
    set_decoder_options(config, explicit)
    if config.data.dataset != "synthetic":
        saved = config.data.data_dir
        if "data_dir" in explicit or saved == provenance.DATA_DIR:
            config.data.data_dir = resolved(explicit.get("data_dir", default_data_dir()))
        else:
            config.data.data_dir = corpus_location(config.data)
    config.data.stopwords = resolved(provenance.expand_path(config.data.stopwords,
                                                            config.data.data_dir))
    return config


def resumed_config(args: argparse.Namespace, run_dir: Path) -> RunConfig:
    """The saved configuration of ``run_dir`` with the training-budget flags applied."""
    config = RunConfig.load(RunDirectory(run_dir).config)
    explicit = explicit_settings(args)
    saved = {name: getattr(getattr(config, section), name)
             for section, names in FIELDS.items() for name in names}
    saved.update({name: config.model.options.get(name) for name in all_options()})
    saved.update({name: config.model.decoder_options.get(name) for name in all_decoder_options()})
    # repeating the run's own command with --resume is fine; changing a fixed setting is not
    if args.synthetic:
        explicit["synthetic"] = dict(args.synthetic)

    def same(name: str) -> bool:
        if name in PATH_SETTINGS:
            return resolved(explicit[name]) == resolved(saved[name])
        return explicit[name] == saved[name]

    fixed = sorted(n for n in set(explicit) - RESUMABLE - {"data_dir"} if not same(n))
    if fixed:
        names = ", ".join("--" + n.replace("_", "-") for n in fixed)
        allowed = ", ".join("--" + n.replace("_", "-") for n in sorted(RESUMABLE))
        raise UserError(f"{names} cannot change when resuming {run_dir} (its config.json "
                        f"fixes them); only {allowed} and --data-dir (the corpus's new "
                        "location) can")
    for name in RESUMABLE & explicit.keys():
        setattr(config.train, name, explicit[name])
    # --max-steps bounds one invocation: a saved value does not stop the resumed one.
    config.train.max_steps = explicit.get("max_steps")
    # the corpus may have moved: a new --data-dir (or $TCNLM_DATA_DIR) is taken, and the
    # vocabulary check (_check_vocabularies) refuses data that builds other vocabularies
    config.data.data_dir = corpus_location(config.data, explicit.get("data_dir"))
    return config


def resolved(path: str | None) -> str | None:
    """``path`` absolute (None stays None)."""
    return None if path is None else str(Path(path).expanduser().resolve())
