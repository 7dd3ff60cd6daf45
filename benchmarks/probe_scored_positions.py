"""The output layer at the scored positions only, against every position: whole training
steps of the models, side by side. A probe.

:meth:`tcnlm_tf.models.lstm.RecurrentLanguageModel.scored_log_probs` runs a model's output
layer on the positions whose weight is positive (the real targets) and scatters their log
probabilities back into ``[B, L]``, in sentence mode, where each sentence is padded to the
sequence length (about 37 % of an APNEWS small-preset batch's 64 x 30 positions are
padding); the output layer is most of a step's work for the models with large ones (the
naive MoE's T output distributions, the mixture of softmaxes, the SDLM decoder). The other
contender, ``every position``, is the same model with ``gather_targets`` off, as document
and stream modes run it (so for a row in those modes both contenders run the same step).

Each row of ``--models`` (``evaluate.compare`` rows, configured and built as the
``models`` section builds them: small preset, ``--num-topics`` unless the row pins it) is
built twice with the same seed, one trainer per contender; both time
:meth:`train.trainer.Trainer.train_step` on the same training batches, under each of
``--precisions`` (default: float32), in alternating rounds in one process
(``benchmarks.harness``). The table gives each contender's median ms per step, ``scored`` /
``every position``, and the relative difference of the two trainers' first-step losses (the
same weights and batch: rounding only). A row whose model overrides its own scoring
(Topic-RNN) times the same code twice.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from benchmarks.harness import (Parser, add_timing_arguments, machine_line, print_table,
                                time_contenders)
from benchmarks.sections import models as models_section
from tcnlm_tf.arguments import integer
from tcnlm_tf.errors import UserError, exit_on_user_error

CONTENDERS = ("every position", "scored")
#: the rows timed by default: sentence-mode rows (the ones that gather), the plain LSTM and
#: those whose output layer is most of a step
DEFAULT_ROWS = ("lstm", "lstm-tied", "lstm-mos", "sdlm", "tcnlm", "moe", "tdlm")


def build_parser() -> Parser:
    p = Parser(prog="python -m benchmarks.probe_scored_positions", allow_abbrev=False,
               description=__doc__.split("\n\n")[0])
    models_section.add_arguments(p, DEFAULT_ROWS, "the LSTM and the rows with large "
                                 "output layers")
    add_timing_arguments(p)
    p.add_argument("--num-topics", type=integer(1), default=50,
                   help="T of the models with topics, unless the row pins it (default: 50)")
    p.add_argument("--threads", type=integer(1), default=1,
                   help="TensorFlow's intra-op threads, 1 inter-op thread (default: 1)")
    p.set_defaults(precisions=["float32"])
    return p


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    models_section.check(args)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from benchmarks.sections.peers import set_tensorflow_threads

    threads = set_tensorflow_threads(args.threads)
    print(machine_line())
    print(f"{args.dataset} corpus, small preset, {threads} thread(s); ms: median per "
          f"training step over {args.rounds} rounds of {args.steps} steps")
    no_due = tf.constant(0.0)
    rows, notes, corpora = [], [], {}
    with tempfile.TemporaryDirectory(prefix="tcnlm-probe-") as scratch:
        for name, precision in [(n, p) for n in args.models for p in args.precisions]:
            steps, losses = {}, {}
            for contender in CONTENDERS:
                built = models_section.row_trainer(
                    args, name, precision, Path(scratch) / f"{name}-{precision}-{contender}",
                    corpora, notes)
                if built is None:
                    break
                trainer, batches = built
                # before the first step traces it
                trainer.model.gather_targets = contender == "scored"
                sums, _ = trainer.train_step(batches[0], None, no_due)
                losses[contender] = float(sums["nll_sum"])

                def step(i, trainer=trainer, batches=batches):
                    trainer.train_step(batches[i % len(batches)], None, no_due)
                    return 0.0

                steps[contender] = step
            if len(steps) < len(CONTENDERS):
                continue
            timed = time_contenders(steps, args.warmup, args.rounds, args.steps)
            ms = {k: 1e3 * timed[k]["seconds"] for k in CONTENDERS}
            gap = abs(losses["scored"] - losses["every position"]) / abs(losses["every position"])
            rows.append((name, precision, f"{ms['every position']:.1f}", f"{ms['scored']:.1f}",
                         f"{ms['scored'] / ms['every position']:.3f}x", f"{gap:.1e}"))
            print(f"  {name}, {precision}: timed", flush=True)
    if not rows:
        raise UserError("no row left to time: " + "; ".join(notes))
    print_table(("row", "precision", "every position ms", "scored ms", "scored / every position",
                 "first-step loss rel. difference"), rows, left=1)
    for note in dict.fromkeys(notes):
        print(f"  {note}")


if __name__ == "__main__":
    main()
