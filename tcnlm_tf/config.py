"""Run configuration: data, model and training settings, with the papers' presets.

Presets (Wang et al. 2018 §5 "Setup"; Lau et al. 2017 Table 1):

==========  ======  =======  =========  =======  ==========  =====  =====
preset      layers  hidden   embedding  dropout  seq length  batch  lr
==========  ======  =======  =========  =======  ==========  =====  =====
``small``   1       600      300        0.4      30          64     1e-3
``large``   2       900      300        0.4      30          64     1e-3
``medium``  2       650      650        0.4      30          64     1e-3
==========  ======  =======  =========  =======  ==========  =====  =====

``medium`` is Zaremba et al.'s medium LSTM, the SDLM paper's (Gu et al. 2018) baseline size;
its protocol (stream mode, BPTT 35, batch 20, SGD at 20, dropout 0.6) is set by flags, see
the README.

A :class:`RunConfig` is saved as ``config.json`` in every run directory and reloaded by
``--resume``, the evaluators and the exporter.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from tcnlm_tf.arguments import DATASET_NAME, MAX_INTEGER
from tcnlm_tf.data.corpus import atomic_write
from tcnlm_tf.data.vocab import TOP_AMONG
from tcnlm_tf.decoders.registry import DECODERS, all_decoder_options, decoder_spec
from tcnlm_tf.errors import UserError
from tcnlm_tf.models.registry import all_options, spec_of
from tcnlm_tf.options import SAME_AS_DEFAULT, check_settings
from tcnlm_tf.precision import PRECISIONS

#: the corpora the papers name (peoples_daily: the SDLM paper's People's Daily split, one
#: sentence per line); --dataset also takes any other name, a corpus of one's own in
#: <data-dir>/<name>/, read with the general settings (general_settings_note)
DATASETS = ("synthetic", "apnews", "imdb", "bnc", "peoples_daily")
#: sentence: each sentence on its own; document: state carried within a document; stream:
#: the whole split as one token stream, state carried throughout (the PyTorch
#: word-language-model protocol of the SDLM paper)
MODES = ("sentence", "document", "stream")
#: --init: Keras's initialisers, or PyTorch's as the SDLM authors' code starts (layers.initializers)
INITS = ("keras", "pytorch")
#: modes whose batches continue the previous batch's lanes (the LSTM state is carried)
STATEFUL_MODES = ("document", "stream")
#: a sentence's document context (tcnlm_tf.data.pipeline): the rest of its document (both
#: papers' protocol) or only the text before it (causal, Zheng, Vafa and Blei 2023)
CONTEXTS = ("rest", "preceding")
#: --long-sentences (sentence mode): a sentence longer than the sequence length is cut into
#: pieces; reset: each piece starts from a zero state (the TDLM authors' code, util.py
#: gen_data and tdlm_model.py's zero initial_state, so every paper result of this protocol);
#: carry: each piece starts from the state the piece before it ended in (Zheng, Vafa and
#: Blei's revisiting-tglms code), as if the sentence were one sequence
LONG_SENTENCES = ("reset", "carry")
#: --line-end (stream mode): eos, an ``<eos>`` after every line, predicted like a word (the
#: PyTorch word-language-model example; what sentence and document mode predict too); none,
#: only the words (the SDLM authors' data.py: every People's Daily line ends in its "。")
LINE_ENDS = ("eos", "none")
OPTIMIZERS = ("adam", "sgd")
#: --strategy: all local devices of one process, or one process per machine (TF_CONFIG)
STRATEGIES = ("mirrored", "multi_worker")
#: where generation stops if no <eos> came (evaluate.generate, the SavedModel's generate)
MAX_GENERATED_WORDS = 40

DATA_DIR_ENV = "TCNLM_DATA_DIR"
CACHE_DIR_ENV = "TCNLM_CACHE_DIR"
RUNS_DIR_ENV = "TCNLM_RUNS_DIR"

#: settings added since runs were first saved, with the value that a config.json without
#: them was trained with (where it is not the new default): a reloaded run keeps its own
LEGACY: dict[str, dict[str, Any]] = {
    "data": {"topic_top_among": "lm_vocab"},
}

PRESETS: dict[str, dict[str, Any]] = {
    "small": {"num_layers": 1, "hidden_size": 600},
    "large": {"num_layers": 2, "hidden_size": 900},
    "medium": {"num_layers": 2, "hidden_size": 650, "embedding_dim": 650},
}


def carries_state(config: "RunConfig") -> bool:
    """Whether a run's batches continue the previous batch's lanes (the LSTM state carried):
    document and stream mode, and sentence mode with ``--long-sentences carry``."""
    return (config.model.mode in STATEFUL_MODES
            or config.data.long_sentences == LONG_SENTENCES[1])


def default_data_dir() -> Path:
    """``$TCNLM_DATA_DIR`` if set, else ``./data``; corpora live in ``<dir>/<dataset>/``."""
    return Path(os.environ.get(DATA_DIR_ENV, "data"))


def check_data_dir_given(dataset: str, data_dir: str | Path | None) -> None:
    """Refuse a ``--data-dir`` given for the synthetic corpus, which reads no files: without
    ``--dataset`` the command would otherwise train on synthetic data in silence."""
    if data_dir is not None and dataset == "synthetic":
        raise UserError("--data-dir is where the corpus of --dataset NAME is (NAME/train.txt, "
                        "...); --dataset synthetic (the default) generates its corpus and "
                        "reads none: add --dataset, or drop --data-dir")


def default_cache_dir() -> Path:
    """``$TCNLM_CACHE_DIR`` if set, else ``./.cache``: preprocessed corpora and synthetic data."""
    return Path(os.environ.get(CACHE_DIR_ENV, ".cache"))


def default_runs_dir() -> Path:
    """``$TCNLM_RUNS_DIR`` if set, else ``./runs``: where run and comparison directories go
    (point it outside a checkout or scratch space that gets wiped: runs take days)."""
    return Path(os.environ.get(RUNS_DIR_ENV, "runs"))


def _check_types(name: str, section: type, given: dict[str, Any]) -> None:
    """``ValueError`` for a value of ``given`` whose type is not that of its field's default
    (for the fields with a bool, int, float or str default; an int may stand for a float)."""
    for field in dataclasses.fields(section):
        if field.name not in given or field.default is dataclasses.MISSING:
            continue
        default, value = field.default, given[field.name]
        if isinstance(default, bool):
            fits = isinstance(value, bool)
        elif isinstance(default, int):
            fits = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            fits = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif isinstance(default, str):
            fits = isinstance(value, str)
        else:
            continue
        if not fits:
            raise ValueError(f"{name}.{field.name} should be of type {type(default).__name__}, "
                             f"got {value!r}")


@dataclasses.dataclass
class DataConfig:
    """Which corpus and how to turn it into examples (Wang et al. 2018 §5 preprocessing)."""

    dataset: str = "synthetic"
    data_dir: str = dataclasses.field(default_factory=lambda: str(default_data_dir()))
    min_freq: int = 10              # LM vocabulary: words seen >= min_freq times
    topic_min_docs: int = 100       # topic vocabulary: words in >= this many documents
    topic_top_fraction: float = 0.001   # topic vocabulary: drop the most frequent 0.1 % types
    topic_top_among: str = "types"  # ... of every word type (TDLM's code) or of the LM words
    stopwords: str | None = None    # None: the project's own list (tcnlm_tf/data/resources)
    max_bow: int = 300              # words of document context per sentence
    context: str = "rest"           # a sentence's document context: one of CONTEXTS
    line_end: str = "eos"           # stream mode: an <eos> after each line or not (LINE_ENDS)
    seq_len: int = 30               # LM sequence length
    long_sentences: str = "reset"   # sentence mode: pieces of a long sentence (LONG_SENTENCES)
    max_doc_tokens: int = 100_000   # longer documents are skipped (and counted)
    synthetic: dict[str, Any] = dataclasses.field(default_factory=dict)  # SyntheticConfig fields


@dataclasses.dataclass
class ModelConfig:
    """Model architecture; ``preset`` fills layers/hidden size unless given explicitly,
    ``options`` holds the model's own settings (its :class:`~tcnlm_tf.models.registry.ModelSpec`
    lists them, with their defaults) and ``decoder_options`` the decoder's (its
    :class:`~tcnlm_tf.decoders.registry.DecoderSpec`)."""

    model: str = "lstm"
    preset: str = "small"
    mode: str = "sentence"          # 'sentence' (papers' protocol) or 'document' (state carried)
    num_layers: int = 1
    hidden_size: int = 600
    embedding_dim: int = 300
    dropout: float = 0.4
    decoder: str = "adaptive"       # one of tcnlm_tf.decoders.registry.DECODERS
    # on g, after the last recurrent layer (None: dropout; a decoder's spec may fill in its
    # authors' value in a fresh run)
    output_dropout: float | None = None
    # starting weights: 'keras' (Keras's initialisers) or 'pytorch' (the SDLM authors')
    init: str = "keras"
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    decoder_options: dict[str, Any] = dataclasses.field(default_factory=dict)

    def option(self, name: str) -> Any:
        """The model option ``name`` (its default when unset)."""
        if name in self.options:
            return self.options[name]
        return next(o.default for o in spec_of(self.model).options if o.name == name)

    def decoder_option(self, name: str) -> Any:
        """The decoder option ``name`` (its default when unset)."""
        if name in self.decoder_options:
            return self.decoder_options[name]
        return decoder_spec(self.decoder).default(name)


@dataclasses.dataclass
class TrainConfig:
    """Optimisation: Adam (or plain SGD), gradient-norm clipping, LR decay on plateau, early
    stopping."""

    optimizer: str = "adam"
    batch_size: int = 64
    epochs: int = 10
    learning_rate: float = 1e-3
    clip_norm: float = 5.0
    lr_decay: float = 0.5           # multiply the LR by this when validation does not improve
    lr_decay_start: int = 1         # first epoch whose end may decay it (and count for patience)
    patience: int = 2               # stop after this many epochs without improvement
    max_steps: int | None = None    # stop (with a checkpoint) after this many optimiser steps
    seed: int = 0
    log_every: int = 20             # TensorBoard scalars every this many steps
    checkpoint_minutes: float = 10.0  # also checkpoint mid-epoch this often (0: epoch ends only)
    keep_checkpoints: int = 3       # newest training checkpoints kept (a damaged one falls back)
    strategy: str = "mirrored"      # or "multi_worker": one process per machine, from TF_CONFIG
    # the layers' dtype policy (tcnlm_tf.precision.PRECISIONS): float32 by default (bf16
    # missed the quality bar, RESULTS.md), as runs saved before the setting existed trained
    precision: str = "float32"


@dataclasses.dataclass
class RunConfig:
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "RunConfig":
        sections = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}
        values = {}
        for name, section in sections.items():
            given = dict(raw.get(name, {}))
            if name == "model" and "softmax" in given:   # before --decoder replaced --softmax
                given["decoder"] = {"full": "softmax"}.get(given.pop("softmax"), "adaptive")
            if name == "model":   # before model options had their own dict, every run
                # stored every topic-model setting: keep those of its own model
                known = spec_of(given.get("model", "lstm")).option_names
                moved = {k: given.pop(k) for k in list(given) if k in all_options()}
                given.setdefault("options", {}).update(
                    {k: v for k, v in moved.items() if k in known})
                # an option added since the run was saved: what the run was trained with
                for option in spec_of(given.get("model", "lstm")).options:
                    if option.name not in given["options"] and \
                            option.legacy is not SAME_AS_DEFAULT:
                        given["options"][option.name] = option.legacy
                # a run saved before decoder options had their own dict stored every
                # decoder's settings beside the model's: keep those of its own decoder
                decoder = DECODERS.get(given.get("decoder", "adaptive"))
                moved = {k: given.pop(k) for k in list(given) if k in all_decoder_options()}
                if decoder is not None:
                    given.setdefault("decoder_options", {}).update(
                        {k: v for k, v in moved.items() if k in decoder.option_names})
            for key, value in LEGACY.get(name, {}).items():
                given.setdefault(key, value)
            unknown = set(given) - {f.name for f in dataclasses.fields(section)}
            if unknown:
                raise UserError(f"config.json has unknown {name} settings {sorted(unknown)}: "
                                "it was written by another version of tcnlm-tf")
            _check_types(name, section, given)
            values[name] = section(**given)
        return cls(**values)

    def save(self, path: Path) -> None:
        """``config.json``, written atomically (a reader never sees half a file)."""
        text = json.dumps(self.to_dict(), indent=2) + "\n"
        atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))

    @classmethod
    def load(cls, path: Path) -> "RunConfig":
        path = Path(path)
        if not path.is_file():
            raise UserError(f"no run configuration at {path}: is this a run directory "
                            "made by `python -m train.run`?")
        damaged = (f"{path} is damaged (%s): restore it from a copy; the weights do not "
                   "depend on it, but the model is rebuilt from it")
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise UserError(f"cannot read {path} ({error.strerror}): check its permissions, "
                            "or restore it from a copy") from None
        except UnicodeDecodeError as error:
            raise UserError(damaged % f"not UTF-8 text: {error.reason} at byte "
                                      f"{error.start}") from None
        except json.JSONDecodeError as error:
            raise UserError(damaged % f"not JSON: {error.msg} at line {error.lineno}, "
                                      f"column {error.colno}") from None
        sections = ("data", "model", "train")
        if not isinstance(raw, dict) or not all(isinstance(raw.get(s, {}), dict)
                                                for s in sections):
            raise UserError(damaged % "expected an object with the objects "
                                      f"{', '.join(sections)}")
        try:
            return cls.from_dict(raw)
        except (TypeError, ValueError, KeyError) as error:
            raise UserError(damaged % f"{type(error).__name__}: {error}") from None

    def validate_for_vocabulary(self, lm_vocab_size: int) -> None:
        """Reject settings that do not fit the corpus's LM vocabulary (known once it is
        loaded, before any model is built)."""
        check = decoder_spec(self.model.decoder).vocabulary_check
        problem = check and check(self.model.decoder_options, lm_vocab_size)
        if problem:
            raise UserError(problem)

    def _integers(self):
        """``(name, value)`` of every integer setting, model options and lists included."""
        sections = [dataclasses.asdict(self.data), dataclasses.asdict(self.model),
                    dataclasses.asdict(self.train), self.model.options,
                    self.model.decoder_options]
        for section in sections:
            for name, value in section.items():
                values = value if isinstance(value, (list, tuple)) else [value]
                for item in values:
                    if isinstance(item, int) and not isinstance(item, bool) \
                            and name != "seed":           # seed: NumPy's range, checked above
                        yield name, item

    def validate(self) -> None:
        """Reject invalid settings and flag combinations before any work starts."""
        d, m, t = self.data, self.model, self.train
        spec = spec_of(m.model)
        checks = [
            (bool(DATASET_NAME.fullmatch(d.dataset)),
             f"--dataset {d.dataset!r} is not a corpus name: name the folder under --data-dir "
             "that holds train.txt, valid.txt and test.txt (letters, digits, _ . -)"),
            (m.mode in MODES, f"unknown --mode {m.mode!r}; choose one of {MODES}"),
            (m.decoder in DECODERS,
             f"unknown --decoder {m.decoder!r}; choose one of {', '.join(DECODERS)}"),
            (t.optimizer in OPTIMIZERS,
             f"unknown --optimizer {t.optimizer!r}; choose one of {OPTIMIZERS}"),
            (m.preset in PRESETS, f"unknown --preset {m.preset!r}; choose one of {tuple(PRESETS)}"),
            (d.min_freq >= 1, "--min-freq must be >= 1"),
            (d.seq_len >= 2, "--seq-len must be >= 2"),
            (d.max_bow >= 1, "--max-bow must be >= 1"),
            (d.topic_min_docs >= 1,
             "--topic-min-docs must be >= 1 (training documents a topic word appears in)"),
            (0.0 <= d.topic_top_fraction < 1.0,
             "--topic-top-fraction must be in [0, 1) (the share of most frequent words left "
             "out of the topic vocabulary)"),
            (d.max_doc_tokens >= 1, "--max-doc-tokens must be >= 1 (longer documents are "
                                    "skipped)"),
            (d.context in CONTEXTS, f"unknown --context {d.context!r}; choose one of {CONTEXTS}"),
            (d.line_end in LINE_ENDS,
             f"unknown --line-end {d.line_end!r}; choose one of {LINE_ENDS}"),
            (d.line_end == LINE_ENDS[0] or m.mode == "stream",
             f"--line-end {d.line_end} only applies to --mode stream (sentence and document "
             "mode always predict an <eos> after each sentence)"),
            (d.long_sentences in LONG_SENTENCES,
             f"unknown --long-sentences {d.long_sentences!r}; choose one of {LONG_SENTENCES}"),
            (d.long_sentences == LONG_SENTENCES[0] or m.mode == "sentence",
             f"--long-sentences {d.long_sentences} only applies to --mode sentence (document "
             "and stream mode carry the state through every sentence)"),
            (d.topic_top_among in TOP_AMONG,
             f"unknown --topic-top-among {d.topic_top_among!r}; choose one of {TOP_AMONG}"),
            (m.num_layers >= 1 and m.hidden_size >= 1 and m.embedding_dim >= 1,
             "--num-layers, --hidden-size and --embedding-dim must be positive"),
            (0.0 <= m.dropout < 1.0, "--dropout must be in [0, 1)"),
            (m.output_dropout is None or 0.0 <= m.output_dropout < 1.0,
             "--output-dropout must be in [0, 1)"),
            (m.init in INITS, f"unknown --init {m.init!r}; choose one of {INITS}"),
            (t.precision in PRECISIONS,
             f"unknown --precision {t.precision!r}; choose one of {PRECISIONS}"),
            (t.batch_size >= 1, "--batch-size must be >= 1"),
            (0 <= t.seed < 2 ** 32, "--seed must be in [0, 2^32) (NumPy's seed range)"),
            (t.log_every >= 1, "--log-every must be >= 1 (steps between TensorBoard scalars)"),
            (t.epochs >= 1, "--epochs must be >= 1"),
            (t.patience >= 1, "--patience must be >= 1 (epochs without a better validation "
                              "perplexity before training stops)"),
            (t.learning_rate > 0, "--learning-rate must be positive"),
            (t.clip_norm > 0, "--clip-norm must be positive"),
            (0 < t.lr_decay <= 1, "--lr-decay must be in (0, 1]"),
            (t.lr_decay_start >= 1, "--lr-decay-start must be >= 1 (an epoch number)"),
            (t.max_steps is None or t.max_steps >= 1, "--max-steps must be >= 1"),
            (t.checkpoint_minutes >= 0, "--checkpoint-minutes must be >= 0"),
            (t.keep_checkpoints >= 2, "--keep-checkpoints must be >= 2 (one to fall back to "
                                      "when the newest is damaged)"),
            (t.strategy in STRATEGIES,
             f"unknown --strategy {t.strategy!r}; choose one of {STRATEGIES}"),
            (m.mode in spec.modes,
             f"--model {m.model} trains in {' or '.join(spec.modes)} mode; "
             f"use --mode {spec.modes[0]}"),
            (not d.synthetic or d.dataset == "synthetic",
             "--synthetic settings only apply to --dataset synthetic"),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(message)
        for name, value in self._integers():
            if abs(value) > MAX_INTEGER:
                raise UserError(f"--{name.replace('_', '-')} {value} is too large: at most "
                                f"{MAX_INTEGER:,} (2^31 - 1), the largest size TensorFlow's "
                                "shapes and this project's counters take")
        check_settings(f"--model {m.model}", spec, m.options, m.option, m)
        check_settings(f"--decoder {m.decoder}", DECODERS[m.decoder], m.decoder_options,
                       m.decoder_option, m)


def apply_decoder_defaults(config: RunConfig, explicit: set[str]) -> None:
    """A fresh run's decoder settings (a saved configuration keeps the values it was trained
    with): every option of the decoder gets a value in ``decoder_options``, the decoder's
    authors' output-side dropouts (``DecoderSpec.dropouts``) are filled from the run's
    ``dropout`` unless set explicitly, then the spec's ``configure`` completes them from the
    data."""
    model = config.model
    spec = decoder_spec(model.decoder)
    for option in spec.options:
        model.decoder_options.setdefault(option.name, option.default)
    for name, rate in spec.dropouts.items():
        if name not in explicit:
            value = round(rate(model.dropout), 6)
            if name in spec.option_names:
                model.decoder_options[name] = value
            else:
                setattr(model, name, value)
    if spec.configure is not None:
        spec.configure(config)


def apply_preset(model: ModelConfig, explicit: set[str]) -> None:
    """Fill the preset's sizes, then the model's own defaults (e.g. the naive MoE's Table 6
    sizes), unless set explicitly; every option of the model gets a value in ``options``."""
    spec = spec_of(model.model)
    defaults = {**PRESETS[model.preset], **spec.defaults}
    for option in spec.options:
        model.options.setdefault(option.name, defaults.get(option.name, option.default))
    for key, value in defaults.items():
        if key not in explicit and key not in spec.option_names:
            setattr(model, key, value)
