"""The ``peers`` section: this project's whole training step against the same model written
in plain PyTorch (``torch.nn``, :mod:`benchmarks.torch_peers`), on the same batches, in
alternating rounds in one process (:func:`benchmarks.harness.time_contenders`; each
contender's ``--warmup`` calls trace our step and warm PyTorch's kernels).

Workloads (``--peer-workloads``), each configured by ``train.run`` flags and built as the
``models`` section builds a row (``build_parser`` / ``config_from_args``, ``load_corpus``,
``Trainer`` in a temporary run directory):

``pd-tied-medium``         the SDLM paper's People's Daily baseline as the project trains it
                           (``docs/training.md``): 2 x 650 LSTM, embedding 650 tied to the
                           full softmax, dropout 0.6, stream mode, batch 20 x 35, plain SGD at
                           20, gradients clipped to norm 0.25;
``apnews-small-softmax``   the APNEWS small preset (1 x 600 LSTM, embedding 300, dropout 0.4,
                           sentences of batch 64 x 30, Adam at 1e-3, clip norm 5) with the
                           full softmax (``--decoder softmax``);
``apnews-small-adaptive``  the same with the preset's adaptive softmax; the PyTorch side is
                           ``nn.AdaptiveLogSoftmaxWithLoss`` with the project's cutoffs and
                           div_value 4 (tail projections of H / 4^(i+1) units).

Corpora: generated, never read from ``--data-dir``. Each is written in the TDLM format to a
temporary ``<dir>/apnews`` or ``<dir>/peoples_daily`` (so the project's settings for that
corpus apply) from random token ids over exactly the real LM vocabulary, 13,469 words for
People's Daily (the size behind the 15,533,519 parameters of the recorded tied-medium run)
and 4,809 for the APNEWS sample, special tokens included: the first documents draw words
from a Zipf law (exponent 1) in sentences of 5 to 29 words (an APNEWS batch then predicts
about 1,100-1,200 of its 64 x 30 positions, as the sample's do), the last ones hold every
word ``--min-freq`` times so that each enters the vocabulary. Both sides train on the same
first ``--peer-batches`` training batches, cycled; our side from a zero state each step (as
the ``models`` section), PyTorch's from ``nn.LSTM``'s zero state.

One step each side: forward, loss (the weighted mean NLL of the real targets, the output
layer run at their positions only, as the project's step runs it), backward, gradient
clipping, optimiser update; ``mixed_bfloat16`` is the project's ``--precision
mixed_bfloat16`` against ``torch.autocast("cpu", dtype=torch.bfloat16)`` around the forward
pass and loss. Where PyTorch's first step raises (its oneDNN LSTM has no bfloat16 kernel on
a CPU without bfloat16 instructions), that row times our side alone and the table says why.

Threads (``--peer-threads``): TensorFlow cannot change its thread pools once started, so
each count runs in a child process (``python -m benchmarks.sections.peers``) whose
TensorFlow has that many intra-op threads and 1 inter-op thread
(``TF_NUM_INTRAOP_THREADS``/``TF_NUM_INTEROP_THREADS`` and ``tf.config.threading``) and
whose PyTorch has ``torch.set_num_threads`` of it; each child times both sides and prints
its figures as one JSON line, and this process prints one table. The children inherit the
environment: on cores shared with other jobs, PyTorch's OpenMP threads spin while waiting
for each other unless ``OMP_WAIT_POLICY=passive`` (the heading says which).

Figures: ms per step each side; torch ms / our ms (above 1: ours is faster); each side's
bfloat16 speed-up over its own float32 step; each side's share of its framework's matmul
peak: the step's floating-point operations per second over that of one [n, n] x [n, n]
product (``--peer-matmul-size``) in the same framework, precision and thread count, a
contender of the same rounds as the steps (so both see the same load). A step's operations
are counted from its matrix products only: 2 x multiply-adds x 3 (the forward product and
the two of its backward pass) for the LSTM's input and recurrent products at every position
and the output layer's (a full softmax at every position; the adaptive softmax's head at
every position and each tail cluster at the positions whose target lies in it, as both
sides evaluate them), averaged over the batches.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from itertools import islice
from pathlib import Path

import numpy as np

from benchmarks.harness import (Parser, add_timing_arguments, cpu_model, name_list,
                                print_table, time_contenders)
from tcnlm_tf.arguments import integer, integer_list
from tcnlm_tf.errors import UserError, exit_on_user_error

#: the Keras backends it runs under (it times TensorFlow training steps)
BACKENDS = ("tensorflow",)
#: workload -> (the corpus it reads, its train.run flags)
WORKLOADS = {
    "pd-tied-medium": ("peoples_daily", [
        "--model", "lstm", "--preset", "medium", "--decoder", "softmax", "--tie-embeddings",
        "--dropout", "0.6", "--mode", "stream", "--line-end", "none", "--seq-len", "35",
        "--batch-size", "20", "--optimizer", "sgd", "--learning-rate", "20",
        "--clip-norm", "0.25", "--min-freq", "1"]),
    "apnews-small-softmax": ("apnews", ["--model", "lstm", "--preset", "small",
                                        "--decoder", "softmax"]),
    "apnews-small-adaptive": ("apnews", ["--model", "lstm", "--preset", "small",
                                         "--decoder", "adaptive"]),
}
#: each corpus's LM vocabulary size, special tokens included
VOCABULARIES = {"peoples_daily": 13_469, "apnews": 4_809}
#: the precisions both frameworks run (benchmarks.torch_peers.AUTOCAST)
PEER_PRECISIONS = ("float32", "mixed_bfloat16")
#: sentences of the generated corpora: words per sentence (uniform), sentences per document
SENTENCE_WORDS = (5, 29)
SENTENCES_PER_DOCUMENT = 10
#: how a child marks the line of its results on its standard output
RESULT_MARK = "peers-result: "
PROGRAM = "python -m benchmarks.sections.peers"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("peers")
    group.add_argument("--peer-workloads", default=",".join(WORKLOADS),
                       type=name_list(tuple(WORKLOADS), "--peer-workloads"),
                       help=f"comma list out of {','.join(WORKLOADS)} (default: all)")
    group.add_argument("--peer-threads", type=integer_list(1), default=[1, 2],
                       help="thread counts, one child process each, both frameworks set to "
                            "it (default: 1,2)")
    group.add_argument("--peer-batches", type=integer(1), default=3,
                       help="training batches both sides are timed on, cycled (default: 3)")
    group.add_argument("--peer-matmul-size", type=integer(1), default=2048,
                       help="n of the [n, n] x [n, n] product whose speed is each framework's "
                            "peak (default: 2048)")
    group.add_argument("--peer-train-flags", default="", metavar="FLAGS",
                       help="train.run flags added to every workload's, e.g. "
                            "--peer-train-flags='--hidden-size 32 --embedding-dim 32' "
                            "(default: none)")


def check(args: argparse.Namespace) -> None:
    """With ``peers`` among the sections: every precision is one both frameworks run, and
    every workload's flags with ``--peer-train-flags`` make a valid ``train.run`` config of
    an LSTM with a full or adaptive softmax (what :mod:`benchmarks.torch_peers` builds)."""
    if "peers" not in getattr(args, "sections", ["peers"]):
        return
    others = [p for p in args.precisions if p not in PEER_PRECISIONS]
    if others:
        raise UserError(f"--precisions {','.join(others)}: the peers section times "
                        f"{' and '.join(PEER_PRECISIONS)} only")
    for name in args.peer_workloads:
        m = workload_config(name, args, Path("data")).model
        if m.model != "lstm" or m.decoder not in ("softmax", "adaptive"):
            raise UserError(f"--peer-train-flags {args.peer_train_flags!r}: the PyTorch peer "
                            "is an LSTM with a full or adaptive softmax, not --model "
                            f"{m.model} --decoder {m.decoder}")


def workload_config(name: str, args: argparse.Namespace, data_dir: Path,
                    precision: str = "float32", flag: str = "--peer-train-flags"):
    """The ``RunConfig`` of workload ``name`` reading its corpus from ``data_dir``, with the
    ``train.run`` flags of ``args``'s ``flag`` added to the workload's, validated (as
    :func:`benchmarks.harness.train_run_config`); a flag ``train.run`` refuses is a
    :class:`UserError` naming ``flag``."""
    from tcnlm_tf.cli.command_line import build_parser, config_from_args

    dataset, flags = WORKLOADS[name]
    parser = build_parser()
    text = getattr(args, flag.lstrip("-").replace("-", "_"))

    def refuse(message: str):
        raise UserError(f"{flag} {text!r}: {message}")

    parser.error = refuse
    try:
        extra = shlex.split(text)
    except ValueError as err:
        refuse(str(err))
    config = config_from_args(parser.parse_args(
        ["--dataset", dataset, "--data-dir", str(data_dir), *flags, *extra,
         "--seed", str(args.seed), "--precision", precision]))
    config.validate()
    return config


# ----------------------------------------------------------------------------- parent


def run(args: argparse.Namespace) -> None:
    """One child process per thread count of ``--peer-threads``, then one table of every
    workload, precision and thread count, and one of the matmul peaks."""
    print(f"peers, one training step each (our Trainer.train_step against the same model in "
          f"plain PyTorch), CPU {cpu_model()}, thread counts "
          f"{','.join(map(str, args.peer_threads))} (one child process each), "
          f"precisions {', '.join(args.precisions)} (mixed_bfloat16 against torch.autocast "
          "bfloat16); torch / ours above 1: ours is faster; GFLOP/step counts the matrix "
          "products, 2 x multiply-adds x 3 (forward and backward); OMP_WAIT_POLICY "
          f"{os.environ.get('OMP_WAIT_POLICY', 'unset')} (PyTorch's OpenMP threads)",
          flush=True)
    results = [run_child(args, threads) for threads in args.peer_threads]
    for name, described in results[0]["described"].items():
        print(f"  {name}: {described}")
    print_peer_table(results, args.precisions)
    for result in results:
        for case, reason in result.get("unsupported", {}).items():
            print(f"PyTorch could not run {case} at {result['threads']} thread(s) on this "
                  f"CPU ({reason}): its cells are -")
    print("\nmatmul peak, GFLOP/s of one [n, n] x [n, n] product, "
          f"n = {args.peer_matmul_size}:")
    print_peak_table(results, args.precisions)


def child_command(args: argparse.Namespace, threads: int) -> list[str]:
    """The command line of the child that times ``threads`` threads."""
    return [sys.executable, "-m", "benchmarks.sections.peers", "--threads", str(threads),
            "--warmup", str(args.warmup), "--rounds", str(args.rounds),
            "--steps", str(args.steps), "--seed", str(args.seed),
            "--precisions", ",".join(args.precisions),
            "--peer-workloads", ",".join(args.peer_workloads),
            "--peer-batches", str(args.peer_batches),
            "--peer-matmul-size", str(args.peer_matmul_size),
            f"--peer-train-flags={args.peer_train_flags}"]


def child_environment(threads: int) -> dict[str, str]:
    """This environment with both frameworks' thread counts set, this checkout first on
    ``PYTHONPATH``, and TensorFlow's C++ log at errors only (unless set)."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": str(threads),
           "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": str(threads),
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH"))
                                         if p)}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def run_child(args: argparse.Namespace, threads: int) -> dict:
    """Runs the child of ``threads`` threads (its standard error passes through) and returns
    its results (:func:`measure`)."""
    print(f"  timing with {threads} thread(s) ...", flush=True)
    done = subprocess.run(child_command(args, threads), env=child_environment(threads),
                          stdout=subprocess.PIPE, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if done.returncode != 0 or not lines:
        raise UserError(f"the peers child with {threads} thread(s) failed (exit status "
                        f"{done.returncode}); its error output is above")
    return json.loads(lines[-1][len(RESULT_MARK):])


def speed_up(rows: dict, key: tuple, side: str) -> str:
    """The float32 time over the bfloat16 time of ``side`` at ``key`` (threads, workload),
    or ``-`` without both."""
    f32, bf16 = rows.get((*key, "float32")), rows.get((*key, "mixed_bfloat16"))
    if not (f32 and bf16 and f32[side] and bf16[side]):
        return "-"
    return f"{f32[side] / bf16[side]:.2f}x"


def print_peer_table(results: list[dict], precisions: list[str]) -> None:
    """One row per thread count, workload and precision (ms in milliseconds per step)."""
    rows = {(r["threads"], row["workload"], row["precision"]): row
            for r in results for row in r["rows"]}
    peaks = {(r["threads"], p): r["peaks"][p] for r in results for p in precisions}
    header = ("threads", "workload", "precision", "GFLOP/step", "ours ms", "torch ms",
              "torch / ours", "ours bf16 speed-up", "torch bf16 speed-up",
              "ours % of TF peak", "torch % of torch peak")
    table = []
    for (threads, workload, precision), row in rows.items():
        bf16 = precision == "mixed_bfloat16"
        peak = peaks[threads, precision]
        torch = row["torch"]            # None: PyTorch could not run it
        table.append((str(threads), workload, precision, f"{row['flops'] / 1e9:.4g}",
                      f"{row['ours'] * 1e3:.4g}", f"{torch * 1e3:.4g}" if torch else "-",
                      f"{torch / row['ours']:.2f}x" if torch else "-",
                      speed_up(rows, (threads, workload), "ours") if bf16 else "-",
                      speed_up(rows, (threads, workload), "torch") if bf16 else "-",
                      f"{100 * row['flops'] / row['ours'] / peak['ours']:.1f}",
                      f"{100 * row['flops'] / torch / peak['torch']:.1f}" if torch else "-"))
    print_table(header, table, left=3)


def print_peak_table(results: list[dict], precisions: list[str]) -> None:
    """One row per thread count and precision: each framework's GFLOP/s and their ratio."""
    table = []
    for r in results:
        for precision in precisions:
            peak = r["peaks"][precision]
            table.append((str(r["threads"]), precision, f"{peak['ours'] / 1e9:.4g}",
                          f"{peak['torch'] / 1e9:.4g}", f"{peak['torch'] / peak['ours']:.2f}x"))
    print_table(("threads", "precision", "TensorFlow GFLOP/s", "PyTorch GFLOP/s",
                 "torch / TF"), table, left=2)


# ------------------------------------------------------------------------------ child


def corpus_lines(vocab_words: int, min_freq: int, zipf_tokens: int,
                 rng: np.random.Generator) -> list[str]:
    """Documents in the TDLM format (sentences joined by a TAB) over the words ``w0`` ..
    ``w{vocab_words - 1}``: first about ``zipf_tokens`` words drawn with p(w_r) ~ 1 / (r + 1)
    in sentences of :data:`SENTENCE_WORDS` words, then every word ``min_freq`` times in
    random order."""
    words = np.array([f"w{i}" for i in range(vocab_words)])
    p = 1.0 / np.arange(1, vocab_words + 1)
    p /= p.sum()
    sentences, drawn = [], 0
    while drawn < zipf_tokens:
        length = rng.integers(SENTENCE_WORDS[0], SENTENCE_WORDS[1] + 1)
        sentences.append(rng.choice(vocab_words, size=length, p=p))
        drawn += length
    cover = rng.permutation(np.repeat(np.arange(vocab_words), min_freq))
    sentences += np.array_split(cover, max(1, len(cover) // (sum(SENTENCE_WORDS) // 2)))
    return ["\t".join(" ".join(words[s]) for s in sentences[i:i + SENTENCES_PER_DOCUMENT])
            for i in range(0, len(sentences), SENTENCES_PER_DOCUMENT)]


def write_corpus(config, data_dir: Path, batches: int, seed: int) -> None:
    """The generated corpus of ``config``'s dataset in ``data_dir`` (module docstring), its
    Zipf part long enough for ``batches`` batches twice over; valid and test hold its first
    document."""
    from tcnlm_tf.data.vocab import LM_SPECIALS

    dataset = config.data.dataset
    words = VOCABULARIES[dataset] - len(LM_SPECIALS)
    zipf_tokens = 2 * batches * config.train.batch_size * config.data.seq_len
    lines = corpus_lines(words, config.data.min_freq, zipf_tokens,
                         np.random.default_rng(seed))
    folder = data_dir / dataset
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in (("train", lines), ("valid", lines[:1]), ("test", lines[:1])):
        (folder / f"{split}.txt").write_text("\n".join(text) + "\n", encoding="utf-8")


def generated_corpus(config, scratch: Path, batches: int, seed: int, corpora: dict):
    """The loaded corpus of ``config``'s dataset: generated (:func:`write_corpus`) under
    ``scratch / "data"`` and loaded (cache ``scratch / "cache"``) at its first request, then
    kept in ``corpora`` (dataset -> corpus)."""
    from tcnlm_tf.data.loading import load_corpus

    dataset = config.data.dataset
    if dataset not in corpora:
        write_corpus(config, scratch / "data", batches, seed)
        corpora[dataset] = load_corpus(config.data, cache_dir=scratch / "cache",
                                       log=lambda _: None)
    return corpora[dataset]


def multiply_adds(config, vocab_size: int, cutoffs: tuple[int, ...],
                  targets: np.ndarray) -> float:
    """The multiply-adds of the forward pass's matrix products for ``targets`` [B, L]: the
    LSTM's x W and h U at every position, and the output layer's at the real targets' (id
    0 is padding; module docstring)."""
    m = config.model
    positions, scored = targets.size, int((targets != 0).sum())
    inputs = [m.embedding_dim] + [m.hidden_size] * (m.num_layers - 1)
    total = positions * sum(4 * m.hidden_size * (n + m.hidden_size) for n in inputs)
    if m.decoder != "adaptive" or not cutoffs:
        return total + scored * m.hidden_size * vocab_size
    total += scored * m.hidden_size * (cutoffs[0] + len(cutoffs))
    bounds = (*cutoffs, vocab_size)
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        projection = max(1, int(m.hidden_size / 4.0 ** (i + 1)))
        rows = int(((targets >= lo) & (targets < hi)).sum())
        total += rows * (m.hidden_size * projection + projection * (hi - lo))
    return total


def our_side(config, corpus, run_dir: Path, batches: int):
    """Our contender (``Trainer.train_step`` from a zero state on the first ``batches``
    training batches, cycled; returns the step's tokens), the project model's
    adaptive-softmax cutoffs, and those batches as numpy (``inputs``, ``targets``,
    ``weights`` [B, L]) for the PyTorch side."""
    import tensorflow as tf

    from train.trainer import Trainer

    trainer = Trainer(config, corpus, run_dir, log=lambda _: None)
    trainer.prepare()
    ours = list(islice(trainer.distribute(trainer.dataset("train")), batches))
    plain = [{key: batch[key].numpy() for key in ("inputs", "targets", "weights")}
             for batch in islice(trainer.dataset("train"), batches)]
    no_due = tf.constant(0.0)

    def step(i: int) -> float:
        sums, _ = trainer.train_step(ours[i % len(ours)], None, no_due)
        return float(sums["tokens"])

    return step, tuple(getattr(trainer.model.softmax, "cutoffs", ())), plain


def tf_matmul_step(size: int, precision: str, seed: int):
    """A contender: one traced ``tf.matmul`` of two [size, size] variables, float32 or
    bfloat16 for ``mixed_bfloat16`` (summed to a scalar to wait for it); returns its
    floating-point operations, 2 size^3."""
    import tensorflow as tf

    dtype = tf.bfloat16 if precision == "mixed_bfloat16" else tf.float32
    rng = np.random.default_rng(seed)
    a, b = (tf.Variable(tf.cast(rng.standard_normal((size, size)), dtype)) for _ in "ab")

    @tf.function
    def product():
        return tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32))

    def step(_: int) -> float:
        product().numpy()
        return 2.0 * size ** 3

    return step


def matmul_contenders(args: argparse.Namespace) -> dict:
    """Each framework's [n, n] x [n, n] product (``--peer-matmul-size``) under each
    precision, keys ``("peak", side, precision)``; each returns its FLOPs."""
    from benchmarks import torch_peers

    makers = {"ours": tf_matmul_step, "torch": torch_peers.matmul_step}
    return {("peak", side, p): make(args.peer_matmul_size, p, args.seed)
            for p in args.precisions for side, make in makers.items()}


def workload_contenders(args: argparse.Namespace, scratch: Path):
    """Both sides' contenders of every workload and precision (keys ``(side, workload,
    precision)``), each workload's FLOPs per step and its description; corpora and run
    directories go under ``scratch``."""
    import torch

    from benchmarks import torch_peers

    contenders, flops, described, corpora, unsupported = {}, {}, {}, {}, {}
    for name in args.peer_workloads:
        for precision in args.precisions:
            config = workload_config(name, args, scratch / "data", precision)
            corpus = generated_corpus(config, scratch, args.peer_batches, args.seed, corpora)
            vocab_size = len(corpus.lm_vocab)
            ours, cutoffs, batches = our_side(config, corpus, scratch / f"{name}-{precision}",
                                              args.peer_batches)
            torch.manual_seed(args.seed)
            model = torch_peers.peer_model(config, vocab_size, cutoffs)
            contenders["ours", name, precision] = ours
            peer = torch_peers.training_step(config, model, batches, precision)
            try:                # PyTorch's oneDNN LSTM has no bfloat16 kernel on some CPUs
                peer(0)
                contenders["torch", name, precision] = peer
            except RuntimeError as err:
                unsupported[f"{name}, {precision}"] = str(err).splitlines()[0]
            flops[name] = 6 * float(np.mean([multiply_adds(config, vocab_size, cutoffs,
                                                           b["targets"]) for b in batches]))
            described[name] = describe(config, vocab_size, cutoffs)
    return contenders, flops, described, unsupported


def measure(args: argparse.Namespace, threads: int) -> dict:
    """What one child measures (the thread counts already set), every contender in the same
    rounds: per workload and precision each side's median seconds per step and the step's
    FLOPs (PyTorch's seconds None where its first step raised: ``unsupported`` says why), per
    precision each framework's matmul peak (FLOP/s, the median over the rounds); and each
    workload's description."""
    with tempfile.TemporaryDirectory(prefix="tcnlm-peers-") as scratch:
        contenders, flops, described, unsupported = workload_contenders(args, Path(scratch))
        contenders.update(matmul_contenders(args))
        timed = time_contenders(contenders, args.warmup, args.rounds, args.steps)
    return {"threads": threads,
            "peaks": {p: {side: timed["peak", side, p]["rate"] for side in ("ours", "torch")}
                      for p in args.precisions},
            "rows": [{"workload": name, "precision": p, "flops": flops[name],
                      "ours": timed["ours", name, p]["seconds"],
                      "torch": timed.get(("torch", name, p), {}).get("seconds")}
                     for name in args.peer_workloads for p in args.precisions],
            "described": described, "unsupported": unsupported}


def describe(config, vocab_size: int, cutoffs: tuple[int, ...]) -> str:
    """One line: sizes, output layer, vocabulary, batch and optimisation of a workload."""
    m, t = config.model, config.train
    if m.decoder == "adaptive":
        output = f"adaptive softmax (cutoffs {','.join(map(str, cutoffs))})"
    else:
        output = ("tied " if m.decoder_option("tie_embeddings") else "") + "full softmax"
    return (f"{m.num_layers}x{m.hidden_size} LSTM, embedding {m.embedding_dim}, {output}, "
            f"V = {vocab_size:,}, batch {t.batch_size} x {config.data.seq_len} "
            f"({m.mode} mode), dropout {m.dropout}, {t.optimizer} at {t.learning_rate:g}, "
            f"clip norm {t.clip_norm:g}")


def set_tensorflow_threads(threads: int) -> int:
    """TensorFlow's ``threads`` intra-op threads and 1 inter-op thread (before it computes
    anything); returns the intra-op count it reports."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return tf.config.threading.get_intra_op_parallelism_threads()


def set_threads(threads: int) -> dict[str, int]:
    """Both frameworks' thread counts (before either computes anything); returns what each
    reports it has."""
    import torch

    tensorflow = set_tensorflow_threads(threads)
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    return {"tensorflow": tensorflow, "torch": torch.get_num_threads()}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    """The child: times every workload at ``--threads`` threads and prints one line,
    :data:`RESULT_MARK` and the JSON of :func:`measure`."""
    p = Parser(prog=PROGRAM, allow_abbrev=False,
               description="one thread count of the peers section of python -m "
                           "benchmarks.run (run by it)")
    p.add_argument("--threads", type=integer(1), required=True,
                   help="intra-op threads of both frameworks")
    add_timing_arguments(p)
    add_arguments(p)
    args = p.parse_args(argv)
    check(args)
    got = set_threads(args.threads)
    if set(got.values()) != {args.threads}:
        raise UserError(f"asked for {args.threads} thread(s), got {got}")
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    print(RESULT_MARK + json.dumps(measure(args, args.threads)), flush=True)


if __name__ == "__main__":
    main()
