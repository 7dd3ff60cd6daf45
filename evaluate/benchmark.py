"""``python -m evaluate.benchmark``: what each part of the project costs, side by side, in one
process, with ratios beside the absolute figures.

Sections (``--sections``, default all four, run in this order):

``recurrent``
    The recurrent layers against ``keras.layers.LSTM`` of the same size on the same batch,
    x [B, L, n_x] (normal noise) and topic vectors t [B, T] (Dirichlet(1), fixed seed):
    ``keras LSTM`` (the reference); ``LSTM, x W hoisted``,
    :class:`layers.hoisted_lstm.HoistedLSTM` with ``hoist=True`` (the same LSTM with x W + b
    computed for all L steps before the loop, which the project's LSTM models run under a
    reduced precision); ``TC-LSTM, step by step``, i.e.
    ``keras.layers.RNN(TopicCompositionalLSTMCell(..., input_gates_given=False))`` from
    ``initial_state=cell.topic_state(t)``, which computes the input half of eq. 13-14 inside
    the recurrence (how the layer used to run); ``TC-LSTM (layer)``,
    ``TopicCompositionalLSTM`` on ``[x, t]``, which computes it for all L steps before the
    loop; ``MoE LSTM``, ``keras.layers.RNN(MixtureOfExpertsLSTMCell(n_h, num_experts=K))``.
    The loss is the sum of the outputs [B, L, n_h] (MoE: [B, L, K n_h]). Besides the time,
    the table gives each layer's multiply-adds per token relative to the LSTM's
    (:func:`multiply_adds_per_token`), the ratio the time would have if every multiply-add
    cost the same (the "floor"), and how far the measured ratio is above it.
``models``
    Whole-model training throughput of every model of the registry
    (:data:`tcnlm_tf.models.registry.MODELS`) and of the LSTM with the decoders no model
    uses by default (``lstm-tied``, ``lstm-mos``) at the small preset, under each precision
    of ``--precisions`` (``train.run --precision``; default float32 and mixed_bfloat16), each
    configured as ``evaluate.compare`` configures its row (the row's own flags, e.g. the
    naive MoE's 30 experts of 100 units, and ``--num-topics`` for the models that take it
    unless the row pins it) and built as ``train.run`` builds it (``build_parser`` /
    ``config_from_args``, ``load_corpus``, ``Trainer`` in a temporary run directory). Every
    (row, precision) pair is a contender of the same rounds; the table gives each
    precision's tokens/s, its ratio to the LSTM's under the same precision, and the
    speed-up of each further precision over the first. One step is
    ``Trainer._train_step`` (forward, backward, gradient all-reduce and clipping, optimiser
    update) on one of the first ``--model-batches`` batches of the unshuffled training split,
    the same batches for every model. Models with further training tasks (TDLM's topic
    model) are timed on their language-model step only. Throughput is predicted tokens (the
    step's ``tokens``) per second; one extra line gives the naive MoE's throughput divided
    by TCNLM's (Wang et al. 2018 factorise the topic-dependent LSTM to avoid the MoE's cost).
``decoders``
    The output layers ``softmax`` (tied full softmax, the reference), ``adaptive``, ``sdlm``
    and ``mos``, built with ``tcnlm_tf.decoders.make_output_layer`` as
    ``benchmarks/bench_decoders.py`` builds them, at each vocabulary size of
    ``--vocab-sizes``. One step is the forward and backward pass of
    ``-mean(layer.target_log_prob(hidden, targets))`` for hidden states [b, l, n_h] (normal
    noise; b, l = ``--decoder-batch``, ``--decoder-seq-len``, smaller than the other sections'
    batch so that MoS's [b, l, mixtures, V] probabilities stay small at V = 40,000) and
    Zipfian targets, with gradients for the hidden states and every trainable weight (the
    shared ``Embedding(V, n_x)`` included). The SDLM decoder reads a random knowledge base
    with the SDLM paper's sparsity (:func:`random_knowledge_base`).
``scaling``
    How the time of one training epoch grows (a) with the corpus: the LSTM language model
    (``--scaling-hidden`` units, ``--scaling-embedding`` embedding) on synthetic corpora of
    ``--corpus-docs`` training documents, and (b) with the number of topics: TCNLM with each
    of ``--topic-counts`` topics on the smallest of those corpora. Each run is a fresh
    ``Trainer`` (temporary run directory, corpora in a temporary cache) that trains one epoch
    with ``Trainer._train_epoch()`` and ``Trainer._end_epoch()`` (validation, checkpoint);
    the wall time of the two calls is set beside the time the trainer's own rate predicts,
    training tokens / ``epoch_summary["tokens_per_sec"]`` (the rate of the progress line).
    Their ratio checks that an epoch costs no more than its progress line says; the
    validation pass and the checkpoint are inside the wall time only, so a ratio a few per
    cent above 1 is expected. Each run's first steps trace its ``tf.function`` steps, a cost
    of about the same size in every run. Least-squares lines give the seconds per 1,000
    training tokens and per topic, and the ratio of the largest to the smallest epoch time.

Timing protocol (recurrent, models, decoders). Every contender is a ``tf.function`` training
step built before any timing. Each gets ``--warmup`` untimed calls (the first one traces);
then ``--rounds`` rounds each time every contender once, in turn, for ``--steps`` steps, the
first contender of a round rotating from round to round (so a contender is not always timed
right after the same other one, on a machine whose load varies). The tables give the median
over the rounds of the time per step, and ratios to the section's reference row. Every figure
is computed in the run.

    python -m evaluate.benchmark                      # every section at its default sizes
    python -m evaluate.benchmark --rounds 2 --steps 1 --sections recurrent --hidden-size 64
    python -m evaluate.benchmark --sections models --models lstm,tcnlm,moe
    python -m evaluate.benchmark --sections models --precisions float32,mixed_bfloat16
    python -m evaluate.benchmark --sections scaling --corpus-docs 100,200,400 --topic-counts 10,50
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tcnlm_tf.arguments import finite_float, integer, integer_list, random_seed  # noqa: E402
from tcnlm_tf.config import DATASETS, ModelConfig, default_cache_dir  # noqa: E402
from tcnlm_tf.errors import UserError, exit_on_user_error  # noqa: E402
from tcnlm_tf.models.registry import MODELS, compare_rows  # noqa: E402
from tcnlm_tf.precision import PRECISIONS  # noqa: E402
from tcnlm_tf.synthetic import SyntheticConfig  # noqa: E402

SECTIONS = ("recurrent", "models", "decoders", "scaling")
#: the output layers and their reference
DECODERS = ("softmax", "adaptive", "sdlm", "mos")
REFERENCE = "softmax"
#: the reference row of the models section
REFERENCE_MODEL = "lstm"
#: the models section's default rows: every registered model, and the LSTM with each
#: decoder its default leaves out (adaptive softmax: lstm; sdlm: the sdlm model)
DEFAULT_MODEL_ROWS = (*MODELS, "lstm-tied", "lstm-mos")
#: Gu et al. 2018, Sec. 3.3 (People's Daily with HowNet): sememe experts per word and senses
#: per sememe expert
EXPERTS_PER_WORD = 3.4
SENSES_PER_EXPERT = 22.0
#: senses per word of the random knowledge base: uniform on 1..MAX_SENSES_PER_WORD
MAX_SENSES_PER_WORD = 3
#: sememes per sense: 1 + Binomial(MAX_SEMEMES_PER_SENSE - 1, p)
MAX_SEMEMES_PER_SENSE = 3
PROGRAM = "python -m evaluate.benchmark"


def machine_line() -> str:
    """One line: CPU model, cores, load, Python and TensorFlow versions."""
    import tensorflow as tf

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = "load avg {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())
    except (OSError, AttributeError):
        load = "load avg n/a"
    return (f"machine: {model}, {os.cpu_count()} logical CPUs, {load}, "
            f"{platform.system()} {platform.machine()}, Python {platform.python_version()}, "
            f"TensorFlow {tf.__version__}")


def ratio(value: float, reference: float | None) -> str:
    return f"{value / reference:.2f}x" if reference else "-"


def decoder_options(knowledge_base, cutoffs, num_bases: int, mixtures: int) -> dict:
    """The options of each of :data:`DECODERS` for ``decoders.make_output_layer``: a tied
    softmax, the adaptive softmax with ``cutoffs``, the SDLM decoder over ``knowledge_base``
    (left normalisation, ``num_bases`` R) and MoS with ``mixtures`` softmaxes."""
    return {"softmax": {"tie": True},
            "adaptive": {"cutoffs": cutoffs},
            "sdlm": {"knowledge_base": knowledge_base, "num_bases": num_bases,
                     "normalization": "left"},
            "mos": {"mixtures": mixtures}}


def zipf_targets(rng, vocab_size: int, shape: tuple[int, ...], exponent: float):
    """Word ids of ``shape`` (int32 tensor) drawn with P(id) proportional to
    ``1 / (id + 1) ** exponent``: ids sorted by decreasing frequency, as in the vocabularies."""
    import numpy as np
    import tensorflow as tf

    weights = 1.0 / np.arange(1, vocab_size + 1) ** exponent
    return tf.constant(rng.choice(vocab_size, size=shape, p=weights / weights.sum()), tf.int32)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are :class:`UserError` (one line, exit status 2)."""

    def error(self, message):
        raise UserError(f"{message} ({PROGRAM} --help lists the flags)")


def _name_list(choices: tuple[str, ...], flag: str) -> Callable[[str], list[str]]:
    """argparse type: a comma list of names out of ``choices`` -> those names in the order of
    ``choices``, without duplicates."""

    def parse(text: str) -> list[str]:
        chosen = [v.strip() for v in text.split(",") if v.strip()]
        unknown = [v for v in chosen if v not in choices]
        if unknown or not chosen:
            raise UserError(f"{flag} {text!r}: "
                            f"{'unknown ' + ', '.join(unknown) if unknown else 'none given'}; "
                            f"choose from {','.join(choices)}")
        return [c for c in choices if c in chosen]

    return parse


def build_parser() -> argparse.ArgumentParser:
    first, _, rest = __doc__.partition("\n\n")
    p = _Parser(prog=PROGRAM, allow_abbrev=False,
                description=first.split(": ", 1)[1].replace("\n", " "),
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="examples:\n" + "\n".join(
                    "  " + line.strip() for line in rest.splitlines()
                    if line.strip().startswith(PROGRAM)))
    row_names = tuple(compare_rows())
    p.add_argument("--sections", default=",".join(SECTIONS),
                   type=_name_list(SECTIONS, "--sections"),
                   help=f"comma list out of {','.join(SECTIONS)} (default: all)")
    timing = p.add_argument_group("timing (recurrent, models, decoders)")
    timing.add_argument("--warmup", type=integer(0), default=2,
                        help="untimed calls per contender before the rounds; the first traces "
                             "(default: 2)")
    timing.add_argument("--rounds", type=integer(1), default=5,
                        help="timed rounds; each times every contender once (default: 5)")
    timing.add_argument("--steps", type=integer(1), default=3,
                        help="training steps per contender per round (default: 3)")
    timing.add_argument("--precisions", default="float32,mixed_bfloat16",
                        type=_name_list(PRECISIONS, "--precisions"),
                        help=f"precisions timed side by side, out of {','.join(PRECISIONS)}: "
                             "the recurrent layers' dtype policy, the models' train.run "
                             "--precision (default: float32,mixed_bfloat16)")
    timing.add_argument("--seed", type=random_seed, default=0,
                        help="seed of the weights, inputs and knowledge bases (default: 0)")
    sizes = p.add_argument_group("sizes (recurrent; the decoders use the hidden and input "
                                 "sizes as their hidden and embedding sizes)")
    sizes.add_argument("--batch-size", type=integer(1), default=64,
                       help="sequences B (default: 64)")
    sizes.add_argument("--seq-len", type=integer(1), default=30, help="steps L (default: 30)")
    sizes.add_argument("--input-size", type=integer(1), default=300,
                       help="input size n_x (default: 300)")
    sizes.add_argument("--hidden-size", type=integer(1), default=600,
                       help="hidden size n_h (default: 600)")
    sizes.add_argument("--num-factors", type=integer(1), default=None,
                       help="TC-LSTM factors per gate n_f (default: the hidden size)")
    sizes.add_argument("--num-topics", type=integer(1), default=50,
                       help="topics T of the TC-LSTM, and of the topic models of the models "
                            "section whose compare row does not pin its own (default: 50)")
    sizes.add_argument("--moe-experts", type=integer(1), default=10,
                       help="experts K of the MoE LSTM (default: 10)")
    models = p.add_argument_group("models")
    models.add_argument("--models", default=",".join(DEFAULT_MODEL_ROWS),
                        type=_name_list(row_names, "--models"),
                        help="comma list of evaluate.compare rows, out of "
                             f"{','.join(row_names)} (default: every model and decoder, "
                             f"{','.join(DEFAULT_MODEL_ROWS)})")
    models.add_argument("--dataset", choices=DATASETS, default=None,
                        help="corpus of the models section (default: apnews when --data-dir "
                             "holds apnews/train.txt, else synthetic)")
    models.add_argument("--data-dir", type=Path, default=Path("../shared/data"),
                        help="directory holding <dataset>/{train,valid,test}.txt "
                             "(default: ../shared/data)")
    models.add_argument("--cache-dir", type=Path, default=None,
                        help="prepared-corpus cache of the models section (default: "
                             f"$TCNLM_CACHE_DIR or .cache, now {default_cache_dir()}); "
                             "the scaling section always uses a temporary one")
    models.add_argument("--model-batches", type=integer(1), default=3,
                        help="training batches the models are timed on, cycled through "
                             "(default: 3)")
    models.add_argument("--synthetic", action="append", default=[], metavar="KEY=VALUE",
                        help="synthetic-corpus setting (a field of "
                             "tcnlm_tf.synthetic.SyntheticConfig), repeatable; applies to "
                             "the synthetic corpora of the models and scaling sections "
                             "(scaling sets train_docs itself)")
    dec = p.add_argument_group("decoders")
    dec.add_argument("--vocab-sizes", type=integer_list(2), default=[10000, 40000],
                     help="vocabulary sizes V (default: 10000,40000)")
    dec.add_argument("--decoder-batch", type=integer(1), default=16,
                     help="sequences b of the decoders' hidden states (default: 16)")
    dec.add_argument("--decoder-seq-len", type=integer(1), default=20,
                     help="steps l of the decoders' hidden states (default: 20)")
    dec.add_argument("--mixtures", type=integer(1), default=ModelConfig.mixtures,
                     help=f"mos softmaxes (default: {ModelConfig.mixtures})")
    dec.add_argument("--num-bases", type=integer(1), default=ModelConfig.num_bases,
                     help=f"sdlm basis matrices R (default: {ModelConfig.num_bases})")
    dec.add_argument("--zipf", type=finite_float, default=1.0,
                     help="exponent of the Zipfian targets (default: 1.0)")
    scale = p.add_argument_group("scaling")
    scale.add_argument("--corpus-docs", type=integer_list(1), default=[250, 500, 1000],
                       help="training documents of the synthetic corpora (default: "
                            "250,500,1000)")
    scale.add_argument("--topic-counts", type=integer_list(1), default=[50, 100, 150],
                       help="TCNLM topic counts, on the smallest corpus (default: 50,100,150)")
    scale.add_argument("--scaling-hidden", type=integer(1), default=64,
                       help="hidden size of the scaling runs (default: 64)")
    scale.add_argument("--scaling-embedding", type=integer(1), default=32,
                       help="embedding size of the scaling runs (default: 32)")
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The flags, checked: a bad value is a :class:`UserError`."""
    args = build_parser().parse_args(argv)
    if not args.zipf >= 0:
        raise UserError(f"--zipf must be >= 0, got {args.zipf}")
    for flag, values in (("--corpus-docs", args.corpus_docs),
                         ("--topic-counts", args.topic_counts)):
        if "scaling" in args.sections and len(set(values)) < 2:
            raise UserError(f"{flag} needs two different values at least, for a slope; "
                            f"got {values}")
    fields = {f.name for f in dataclasses.fields(SyntheticConfig)}
    for item in args.synthetic:
        key = item.split("=", 1)[0].strip()
        if "=" not in item or key not in fields:
            raise UserError(f"--synthetic {item!r}: expected KEY=VALUE with KEY one of "
                            f"{', '.join(sorted(fields))}")
    if args.dataset is None:
        args.dataset = ("apnews" if (args.data_dir / "apnews" / "train.txt").is_file()
                        else "synthetic")
    return args


# -------------------------------------------------------------------------------- timing


def time_contenders(contenders: dict[str, Callable[[int], float]], warmup: int, rounds: int,
                    steps: int) -> dict[str, dict[str, float]]:
    """The common protocol (module docstring). ``contenders[name](i)`` runs training step
    ``i`` (0, 1, ...; a round always runs steps ``0..steps-1``), waits for its results and
    returns the work it did (tokens; 0 where nobody counts). Returns, per contender,
    ``seconds``: the median over the rounds of the seconds per step, ``rate``: the median
    over the rounds of work per second, and ``work``: the median work per step."""
    for run in contenders.values():
        for i in range(warmup):
            run(i)
    names = list(contenders)
    seconds = {name: [] for name in names}
    rates = {name: [] for name in names}
    works = {name: [] for name in names}
    for round_ in range(rounds):
        first = round_ % len(names)
        for name in names[first:] + names[:first]:
            start = time.perf_counter()
            work = sum(contenders[name](i) for i in range(steps))
            elapsed = time.perf_counter() - start
            seconds[name].append(elapsed / steps)
            rates[name].append(work / elapsed)
            works[name].append(work / steps)
    return {name: {"seconds": statistics.median(seconds[name]),
                   "rate": statistics.median(rates[name]),
                   "work": statistics.median(works[name])} for name in names}


def gradient_step(loss_fn: Callable, variables: list) -> Callable[[int], float]:
    """A contender: one ``tf.function`` call of the forward pass ``loss_fn()`` (a scalar) and
    its gradients for every tensor of ``variables``; waits for the loss and the first
    gradient. Raises ``ValueError`` when tracing finds a variable the loss does not reach."""
    import tensorflow as tf

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn()
        grads = tape.gradient(loss, variables)
        missing = [v.name for v, g in zip(variables, grads) if g is None]
        if missing:
            raise ValueError(f"the loss does not depend on {missing}")
        return loss, grads

    def run(_: int) -> float:
        loss, grads = step()
        loss.numpy()
        grads[0].numpy()
        return 0.0

    return run


def unique(variables) -> list:
    """``variables`` without repeats (a shared embedding is listed once)."""
    return list({id(v): v for v in variables}.values())


def print_table(header: tuple[str, ...], rows: list[tuple[str, ...]], left: int = 1) -> None:
    """Aligned plain-text columns: the first ``left`` left-aligned (names), the others
    right-aligned (figures)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return " | ".join(c.ljust(w) if i < left else c.rjust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


# ----------------------------------------------------------------------------- recurrent


def multiply_adds_per_token(input_size: int, hidden_size: int, num_factors: int,
                            num_topics: int, seq_len: int, num_experts: int) -> dict[str, float]:
    """Forward multiply-adds per token of the weights' products (no biases, no element-wise
    work) of the recurrent layers, for input size n_x, hidden size n_h, n_f factors per gate,
    T topics, sequences of L tokens and K experts:

    * ``lstm``: ``4 n_h (n_x + n_h)`` (four gates from x and h);
    * ``tc``, the TC-LSTM (both ways of running it do the same products):
      ``4 n_f n_x`` (W_c x) ``+ 4 n_f n_h`` (U_c h) ``+ 2 * 4 n_f n_h`` (W_a and U_a of the
      four gates) ``+ 2 T 4 n_f / L`` (W_b t and U_b t, once per sequence);
    * ``moe``: ``K 4 n_h (n_x + n_h)``, K LSTMs.
    """
    n_x, n_h, n_f, T, L, K = (input_size, hidden_size, num_factors, num_topics, seq_len,
                              num_experts)
    lstm = 4 * n_h * (n_x + n_h)
    tc = 4 * n_f * n_x + 4 * n_f * n_h + 2 * 4 * n_f * n_h + 2 * T * 4 * n_f / L
    return {"lstm": float(lstm), "tc": float(tc), "moe": float(K * lstm)}


def recurrent_section(args) -> None:
    """Times one training step (forward, and backward to every weight and the inputs x and
    t) of each recurrent layer on x [B, L, n_x] and t [B, T], under each precision of
    ``--precisions`` (the layers' dtype policy: float32 weights, products in the policy's
    compute dtype); the loss is the float32 sum of the outputs [B, L, n_h] ([B, L, K n_h]
    for the MoE). Every (layer, precision) pair is a contender of the same rounds; the
    ratios compare layers under the same precision."""
    import keras
    import numpy as np
    import tensorflow as tf

    from layers.hoisted_lstm import HoistedLSTM
    from layers.mixture_of_experts import MixtureOfExpertsLSTMCell
    from layers.topic_lstm import TopicCompositionalLSTM, TopicCompositionalLSTMCell

    B, L, n_x, n_h, T = (args.batch_size, args.seq_len, args.input_size, args.hidden_size,
                         args.num_topics)
    n_f, K = args.num_factors or n_h, args.moe_experts
    keras.utils.set_random_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    x = tf.Variable(rng.normal(size=(B, L, n_x)).astype("float32"), name="x")
    t = tf.Variable(rng.dirichlet(np.ones(T), size=B).astype("float32"), name="t")

    def layers_under(policy: str) -> dict:
        """name -> (forward pass, layer, the inputs it reads, key of multiply_adds_per_token)
        for layers of dtype policy ``policy``."""
        lstm = keras.layers.LSTM(n_h, return_sequences=True, dtype=policy, name="lstm")
        hoisted = HoistedLSTM(n_h, return_sequences=True, hoist=True, dtype=policy,
                              name="hoisted_lstm")
        cell = TopicCompositionalLSTMCell(n_h, n_f, T, input_gates_given=False, dtype=policy,
                                          name="tc_cell")
        stepwise = keras.layers.RNN(cell, return_sequences=True, dtype=policy,
                                    name="tc_stepwise")
        tc_layer = TopicCompositionalLSTM(n_h, n_f, T, dtype=policy, name="tc_lstm")
        moe = keras.layers.RNN(MixtureOfExpertsLSTMCell(n_h, num_experts=K, dtype=policy),
                               return_sequences=True, dtype=policy, name="moe")
        return {
            "keras LSTM": (lambda: lstm(x), lstm, [x], "lstm"),
            "LSTM, x W hoisted": (lambda: hoisted(x), hoisted, [x], "lstm"),
            "TC-LSTM, step by step": (
                lambda: stepwise(x, initial_state=cell.topic_state(t)), stepwise, [x, t],
                "tc"),
            "TC-LSTM (layer)": (lambda: tc_layer([x, t]), tc_layer, [x, t], "tc"),
            f"MoE LSTM (K={K})": (lambda: moe(x), moe, [x], "moe"),
        }

    layers = {precision: layers_under(precision) for precision in args.precisions}
    contenders = {}
    for precision, named in layers.items():
        for name, (forward, layer, inputs, _) in named.items():
            forward()  # builds the weights eagerly, outside the traced step
            contenders[name, precision] = gradient_step(
                lambda f=forward: tf.reduce_sum(tf.cast(f(), tf.float32)),
                inputs + unique(layer.trainable_weights))
    macs = multiply_adds_per_token(n_x, n_h, n_f, T, L, K)
    print(f"recurrent layers, forward + backward: batch B={B} x L={L} tokens, n_x={n_x}, "
          f"n_h={n_h}, n_f={n_f}, T={T}, K={K}; precisions {', '.join(args.precisions)}; "
          f"floor = multiply-adds per token / the LSTM's ({macs['lstm']:,.0f})", flush=True)
    times = time_contenders(contenders, args.warmup, args.rounds, args.steps)
    rows = []
    for precision, named in layers.items():
        reference = times["keras LSTM", precision]["seconds"]
        for name, (_, _, _, kind) in named.items():
            seconds = times[name, precision]["seconds"]
            floor = macs[kind] / macs["lstm"]
            rows.append((name, precision, f"{seconds * 1e3:.2f}",
                         f"{seconds * 1e6 / (B * L):.1f}", ratio(seconds, reference),
                         f"{floor:.3f}x", f"{seconds / reference / floor:.2f}",
                         ratio(times[name, args.precisions[0]]["seconds"], seconds)))
    print_table(("layer", "precision", "ms/step", "µs/token", "time x LSTM",
                 "floor (MACs x LSTM)", "time ratio / floor",
                 f"speed-up over {args.precisions[0]}"), rows, left=2)


# -------------------------------------------------------------------------------- models


def train_run_config(flags: list[str]):
    """The ``RunConfig`` that ``python -m train.run FLAGS`` trains, validated."""
    from train.run import build_parser as train_parser
    from train.run import config_from_args

    config = config_from_args(train_parser().parse_args(flags))
    config.validate()
    return config


def synthetic_flags(items: list[str]) -> list[str]:
    """``["A=1", "B=2"]`` -> ``["--synthetic", "A=1", "--synthetic", "B=2"]`` (train.run)."""
    return [flag for item in items for flag in ("--synthetic", item)]


def models_section(args) -> None:
    """Times ``Trainer._train_step`` (one optimiser step of the language model: forward,
    backward, all-reduce, clipping, update) of every chosen row under every chosen precision
    on the same training batches [batch size, sequence length] (plus each model's context
    inputs); all (row, precision) pairs alternate in the same rounds."""
    import tensorflow as tf

    from tcnlm_tf import knowledge
    from tcnlm_tf.data import load_corpus
    from train.trainer import Trainer, count_parameters

    rows_of = compare_rows()
    shared = ["--dataset", args.dataset, "--preset", "small", "--seed", str(args.seed)]
    if args.dataset == "synthetic":
        shared += synthetic_flags(args.synthetic)
    else:
        shared += ["--data-dir", str(args.data_dir)]
    quiet = lambda _: None  # noqa: E731
    corpora, contenders, described, notes, shapes = {}, {}, {}, [], set()
    no_due = tf.constant(0.0)
    with tempfile.TemporaryDirectory(prefix="tcnlm-benchmark-") as scratch:
        for name in args.models:
            model, flags = rows_of[name]
            takes_topics = "num_topics" in MODELS[model].option_names
            topics = (["--num-topics", str(args.num_topics)]
                      if takes_topics and "--num-topics" not in flags else [])
            for precision in args.precisions:
                config = train_run_config(shared + flags + topics + ["--precision", precision])
                if config.model.decoder == "sdlm" and config.model.knowledge_base == "wordnet":
                    try:
                        knowledge.find_wordnet_dir()
                    except UserError as err:
                        notes.append(f"{name}: skipped, it needs --knowledge-base wordnet: "
                                     f"{err}")
                        break
                key = repr(config.data)
                if key not in corpora:
                    corpora[key] = load_corpus(config.data, cache_dir=args.cache_dir,
                                               log=lambda m: print(m, file=sys.stderr))
                trainer = Trainer(config, corpora[key], Path(scratch) / f"{name}-{precision}",
                                  log=quiet)
                trainer.prepare()
                batches = list(islice(trainer.distribute(trainer.dataset("train")),
                                      args.model_batches))

                def run(i, trainer=trainer, batches=batches):
                    sums, _ = trainer._train_step(batches[i % len(batches)], None, no_due)
                    return float(sums["tokens"])

                contenders[(name, precision)] = run
                m = config.model
                size = f"{m.num_layers}x{m.hidden_size}, {m.decoder}"
                if takes_topics:
                    size += f", T={m.option('num_topics')}"
                described[name] = (size, count_parameters(trainer.model))
                shapes.add((config.train.batch_size, config.data.seq_len, len(batches)))
                if trainer.tasks and precision == args.precisions[0]:
                    notes.append(f"{name}: language-model step only; its "
                                 f"{', '.join(task.name for task in trainer.tasks)} training "
                                 "step(s) are not timed")
        if not contenders:
            raise UserError("no model left to time: " + "; ".join(notes))
        print(f"models, one training step each (Trainer._train_step): {args.dataset} corpus, "
              f"small preset, " + ", ".join(f"batch {b} x {n}, cycling through the first {k} "
                                            "training batch(es)" for b, n, k in sorted(shapes))
              + f"; precisions {', '.join(args.precisions)}", flush=True)
        times = time_contenders(contenders, args.warmup, args.rounds, args.steps)
    print_model_table(times, described, args.precisions)
    for note in notes:
        print(f"  {note}")
    for precision in args.precisions:
        if ("moe", precision) in times and ("tcnlm", precision) in times:
            print(f"naive MoE tokens/s / TCNLM tokens/s ({precision}): "
                  f"{times['moe', precision]['rate'] / times['tcnlm', precision]['rate']:.2f} "
                  f"(moe {described['moe'][0]}; tcnlm {described['tcnlm'][0]})")


def print_model_table(times: dict[tuple[str, str], dict[str, float]],
                      described: dict[str, tuple[str, int]], precisions: list[str]) -> None:
    """One row per model: its size and parameters, then per precision its ms/step,
    tokens/s and tokens/s relative to the LSTM's under the same precision, then each
    further precision's tokens/s relative to the first's (the speed-up)."""
    names = list(dict.fromkeys(name for name, _ in times))
    header = ["model", "size", "parameters", "tokens/step"]
    for precision in precisions:
        header += [f"{precision} ms/step", f"{precision} tokens/s",
                   f"x {REFERENCE_MODEL} ({precision})"]
    header += [f"{p} / {precisions[0]}" for p in precisions[1:]]
    rows = []
    for name in names:
        size, parameters = described[name]
        first = times[name, precisions[0]]
        row = [name, size, f"{parameters:,}", f"{first['work']:,.0f}"]
        for precision in precisions:
            measured = times[name, precision]
            reference = times.get((REFERENCE_MODEL, precision), {}).get("rate")
            row += [f"{measured['seconds'] * 1e3:.2f}", f"{measured['rate']:,.0f}",
                    ratio(measured["rate"], reference)]
        row += [ratio(times[name, p]["rate"], first["rate"]) for p in precisions[1:]]
        rows.append(tuple(row))
    print_table(tuple(header), rows, left=2)


# ------------------------------------------------------------------------------ decoders


def random_knowledge_base(vocab_size: int, seed: int):
    """A random :class:`~tcnlm_tf.knowledge.KnowledgeBase` over the words ``"0".."V-1"`` with
    the sparsity Gu et al. (2018, Sec. 3.3) report for HowNet: 3.4 sememe experts per word
    and 22 senses per expert.

    Each word gets 1..3 senses (uniform, mean 2) and each sense ``1 + Binomial(2, p)``
    distinct sememes, ``p`` chosen so that a sense has ``3.4 / 2 = 1.7`` sememes on average:
    ``E ~ 3.4 V`` edges, i.e. 3.4 experts per word (sememes drawn at random rarely repeat
    within a word). The number of sememes is ``K = round(E / 22)``, so a sememe is an expert
    of 22 senses on average, and each sense draws its sememes uniformly out of the K. Equal
    sememe sets of one word are one sense (the knowledge module's rule); no sense is
    private. Deterministic in ``seed``."""
    import numpy as np

    from tcnlm_tf.knowledge import KnowledgeBase

    rng = np.random.default_rng(seed)
    senses_per_word = rng.integers(1, MAX_SENSES_PER_WORD + 1, size=vocab_size)
    mean_senses = (1 + MAX_SENSES_PER_WORD) / 2
    p = (EXPERTS_PER_WORD / mean_senses - 1) / (MAX_SEMEMES_PER_SENSE - 1)
    sememes_per_sense = 1 + rng.binomial(MAX_SEMEMES_PER_SENSE - 1, p,
                                         size=int(senses_per_word.sum()))
    num_sememes = max(MAX_SEMEMES_PER_SENSE,
                      round(int(sememes_per_sense.sum()) / SENSES_PER_EXPERT))
    sense_word, edge_sense, edge_sememe = [], [], []
    sizes = iter(sememes_per_sense)
    for word, count in enumerate(senses_per_word):
        sets = {tuple(sorted(rng.choice(num_sememes, size=next(sizes), replace=False)))
                for _ in range(count)}
        for sememes in sorted(sets):
            sense_word.append(word)
            edge_sense.extend([len(sense_word) - 1] * len(sememes))
            edge_sememe.extend(sememes)
    kb = KnowledgeBase(words=[str(w) for w in range(vocab_size)],
                       sense_word=np.asarray(sense_word, np.int32),
                       edge_sense=np.asarray(edge_sense, np.int32),
                       edge_sememe=np.asarray(edge_sememe, np.int32),
                       sememes=[f"sememe{k}" for k in range(num_sememes)],
                       private=np.zeros(len(sense_word), bool), source=f"random(seed={seed})")
    kb.validate()
    return kb


def decoders_section(args) -> None:
    """Times one training step of each output layer at each V: hidden [b, l, n_h] ->
    ``-mean(target_log_prob(hidden, targets [b, l]))``, gradients for the hidden states and
    every trainable weight (the shared Embedding(V, n_x) included)."""
    import keras
    import numpy as np
    import tensorflow as tf

    from layers.adaptive_softmax import default_cutoffs
    from tcnlm_tf import decoders, knowledge

    b, L, H, E = args.decoder_batch, args.decoder_seq_len, args.hidden_size, args.input_size
    print(f"decoders, forward + backward: hidden states [{b}, {L}, {H}], embedding {E}, "
          f"Zipf({args.zipf}) targets, sdlm R={args.num_bases} (left normalisation), "
          f"mos {args.mixtures} mixtures, adaptive default_cutoffs(V); knowledge base: "
          f"random with {EXPERTS_PER_WORD} experts per word and {SENSES_PER_EXPERT:g} senses "
          "per expert (the SDLM paper's)", flush=True)
    rows = []
    for V in args.vocab_sizes:
        keras.utils.set_random_seed(args.seed)
        rng = np.random.default_rng(args.seed)
        kb = random_knowledge_base(V, args.seed)
        options = decoder_options(kb, default_cutoffs(V), args.num_bases, args.mixtures)
        embedding = keras.layers.Embedding(V, E, name="embedding")
        embedding.build((None,))
        targets = zipf_targets(rng, V, (b, L), args.zipf)
        hidden = tf.Variable(rng.normal(size=(b, L, H)).astype("float32"), name="hidden")
        contenders = {}
        for name in DECODERS:
            layer = decoders.make_output_layer(name, options[name], V, H, embedding)
            layer.target_log_prob(hidden[:1, :1], targets[:1, :1])  # builds it eagerly
            contenders[name] = gradient_step(
                lambda layer=layer: -tf.reduce_mean(layer.target_log_prob(hidden, targets)),
                [hidden] + unique(layer.trainable_weights))
        stats = knowledge.statistics(kb)
        print(f"  V={V:,}: knowledge base of {stats['senses']:,} senses, {stats['sememes']:,} "
              f"sememes, {len(kb.edge_sense):,} edges: {stats['experts_per_word']:.2f} experts "
              f"per word, {stats['senses_per_expert']:.1f} senses per expert, "
              f"{stats['senses_per_word']:.2f} senses per word, "
              f"{stats['sememes_per_sense']:.2f} sememes per sense; adaptive cutoffs "
              f"{list(options['adaptive']['cutoffs'])}", flush=True)
        times = time_contenders(contenders, args.warmup, args.rounds, args.steps)
        for name in DECODERS:
            seconds = times[name]["seconds"]
            rows.append((f"{V:,}", name, f"{seconds * 1e3:.2f}",
                         ratio(seconds, times[REFERENCE]["seconds"])))
    print_table(("V", "decoder", "ms/step", f"time x {REFERENCE}"), rows, left=2)


# ------------------------------------------------------------------------------- scaling


def least_squares_slope(xs: list[float], ys: list[float]) -> float:
    """The slope of the least-squares line through the points (xs, ys) (two distinct x at
    least)."""
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    return (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
            / sum((x - mean_x) ** 2 for x in xs))


def one_epoch(flags: list[str], cache_dir: Path) -> dict[str, float]:
    """Trains one epoch of the run ``python -m train.run FLAGS`` would start, in a fresh
    temporary run directory: ``tokens`` (predicted training tokens), ``wall`` (seconds of
    ``_train_epoch()`` + ``_end_epoch()``), ``rate`` (the trainer's tokens/s)."""
    from tcnlm_tf.data import load_corpus
    from train.trainer import Trainer

    quiet = lambda _: None  # noqa: E731
    config = train_run_config(flags)
    corpus = load_corpus(config.data, cache_dir=cache_dir, log=quiet)
    with tempfile.TemporaryDirectory(prefix="tcnlm-benchmark-") as run_dir:
        trainer = Trainer(config, corpus, Path(run_dir), log=quiet)
        trainer.prepare()
        start = time.perf_counter()
        trainer._train_epoch()
        trainer._end_epoch()
        wall = time.perf_counter() - start
    return {"tokens": corpus.splits["train"].num_predicted_tokens(config.data.line_end),
            "wall": wall,
            "rate": trainer.epoch_summary["tokens_per_sec"]}


def scaling_section(args) -> None:
    """One epoch per run (see the module docstring): the LSTM over synthetic corpora of
    ``--corpus-docs`` documents, then TCNLM with each of ``--topic-counts`` topics on the
    smallest; per run the training tokens, the wall seconds, the trainer's rate and the time
    that rate predicts; then least-squares slopes."""
    size = ["--hidden-size", str(args.scaling_hidden), "--embedding-dim",
            str(args.scaling_embedding), "--seed", str(args.seed), "--epochs", "1",
            "--dataset", "synthetic"] + synthetic_flags(args.synthetic)
    corpus_docs = sorted(set(args.corpus_docs))
    print(f"scaling, one epoch per run (Trainer._train_epoch + _end_epoch, fresh trainer "
          f"each): {args.scaling_hidden} units, embedding {args.scaling_embedding}; "
          f"predicted = train tokens / the trainer's tokens/s", flush=True)
    runs = []
    with tempfile.TemporaryDirectory(prefix="tcnlm-benchmark-cache-") as cache:
        for docs in corpus_docs:
            runs.append(("lstm", docs, None, one_epoch(
                size + synthetic_flags([f"train_docs={docs}"]) + ["--model", "lstm"],
                Path(cache))))
        for topics in sorted(set(args.topic_counts)):
            runs.append(("tcnlm", corpus_docs[0], topics, one_epoch(
                size + synthetic_flags([f"train_docs={corpus_docs[0]}"])
                + ["--model", "tcnlm", "--num-topics", str(topics)], Path(cache))))
    rows = []
    for model, docs, topics, r in runs:
        predicted = r["tokens"] / r["rate"]
        rows.append((model, f"{docs:,}", "-" if topics is None else str(topics),
                     f"{r['tokens']:,}", f"{r['wall']:.2f}", f"{r['rate']:,.0f}",
                     f"{predicted:.2f}", f"{r['wall'] / predicted:.3f}"))
    print_table(("model", "train docs", "topics", "train tokens", "wall s", "tokens/s",
                 "predicted s", "wall / (tokens ÷ rate)"), rows, left=1)
    by_size = [r for model, _, topics, r in runs if topics is None]
    by_topics = [(topics, r) for _, _, topics, r in runs if topics is not None]

    def spread(values):
        return f"largest / smallest epoch time {max(values) / min(values):.2f}x"

    walls = [r["wall"] for r in by_size]
    predicted = [r["tokens"] / r["rate"] for r in by_size]
    kilotokens = [r["tokens"] / 1000 for r in by_size]
    topic_walls = [r["wall"] for _, r in by_topics]
    print("slopes (least-squares lines):")
    print(f"  corpus size, wall time: {least_squares_slope(kilotokens, walls):.4f} s per 1,000 "
          f"training tokens; {spread(walls)}")
    print(f"  corpus size, predicted time: {least_squares_slope(kilotokens, predicted):.4f} s "
          f"per 1,000 training tokens; {spread(predicted)}")
    print(f"  topic count, wall time: "
          f"{least_squares_slope([t for t, _ in by_topics], topic_walls):.4f} s per topic; "
          f"{spread(topic_walls)}")


# ---------------------------------------------------------------------------------- main


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    import keras
    import tensorflow as tf

    # The contenders' steps are separate tf.functions of one Python function (one code
    # object), which TensorFlow's frequent-retracing warning counts as retraces of one.
    tf.get_logger().setLevel("ERROR")
    print(machine_line())
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}; sections "
          f"{','.join(args.sections)}; timing: {args.warmup} warm-up call(s), {args.rounds} "
          f"round(s) of {args.steps} step(s), median per step; seed {args.seed}", flush=True)
    sections = {"recurrent": recurrent_section, "models": models_section,
                "decoders": decoders_section, "scaling": scaling_section}
    for name in args.sections:
        print(f"\n== {name}")
        sections[name](args)
        sys.stdout.flush()
    print(f"\ncommand: {PROGRAM} {shlex.join(argv)}".rstrip())


if __name__ == "__main__":
    main()
