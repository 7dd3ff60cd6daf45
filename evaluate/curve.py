"""``python -m evaluate.curve --run runs/<name>``: one run's learning curve, validation
perplexity and learning rate per epoch, from its ``metrics.json``, as a PNG (default:
``learning_curve.png`` in the run directory) and one printed line per epoch.

The learning rate is the one each epoch trained at: the run's initial ``learning_rate``
(``config.json``) for the first, then the one ``metrics.json`` records after the epoch before
(the trainer records each epoch's rate after deciding on it: halved after an epoch without a
better validation perplexity), so a plateau shows one epoch before the rate it halved, as
``benchmarks.torch_reference_lm`` records its own.
``--reference 105.35`` draws a published validation perplexity as a horizontal line (e.g.
the SDLM paper's tied medium LSTM on People's Daily). ``--reference-curve FILE`` draws
another implementation's curve beside the run's, from the JSON lines that
``python -m benchmarks.torch_reference_lm`` writes (the authors' recipe in PyTorch), and
prints each epoch's ratio of the run's validation perplexity to it.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from evaluate.common import parser, png_bytes, read_record
from tcnlm_tf.arguments import finite_float
from tcnlm_tf.data.corpus import write_bytes
from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.runs.directory import RunDirectory


def perplexity_value(text: str) -> float:
    """A finite perplexity, at least 1 (``--reference``)."""
    value = finite_float(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"a perplexity is at least 1, got {text!r}")
    return value


def epochs_of(run_dir: Path) -> list[dict]:
    """The finished epochs of ``run_dir`` (its ``metrics.json``), each with ``epoch``,
    ``valid_perplexity`` and ``learning_rate``, the rate it trained at (the module's
    docstring)."""
    files = RunDirectory(run_dir)
    if not files.metrics.is_file() or not files.config.is_file():
        raise UserError(f"{run_dir} has no metrics.json or config.json: is it a run directory "
                        "made by `python -m train.run` that finished an epoch?")
    epochs = read_record(files.metrics, "--run").get("epochs", [])
    if not epochs:
        raise UserError(f"{files.metrics} lists no finished epoch yet; run this after the "
                        "first")
    initial = read_record(files.config, "--run").get("train", {}).get("learning_rate")
    if not isinstance(initial, (int, float)):
        raise UserError(f"{files.config} gives no train.learning_rate; restore the run's "
                        "config.json")
    after = [initial] + [e["learning_rate"] for e in epochs[:-1]]
    return [dict(e, learning_rate=rate) for e, rate in zip(epochs, after)]


def reference_epochs(path: Path) -> list[dict]:
    """The epochs of a reference curve (``--reference-curve``: JSON lines with ``epoch``,
    ``valid_ppl`` and ``lr``, as ``benchmarks.torch_reference_lm`` writes them), each as
    :func:`epochs_of` gives a run's."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
    except OSError as error:
        raise UserError(f"cannot read --reference-curve {path}: {error.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UserError(f"--reference-curve {path} is not JSON lines; give the --output of "
                        "`python -m benchmarks.torch_reference_lm`") from None
    numbers = (int, float)
    epochs = [{"epoch": r["epoch"], "valid_perplexity": r["valid_ppl"], "learning_rate": r["lr"]}
              for r in records if isinstance(r, dict) and isinstance(r.get("epoch"), int)
              and isinstance(r.get("valid_ppl"), numbers) and isinstance(r.get("lr"), numbers)
              and r["valid_ppl"] > 0 and r["lr"] > 0]
    if not epochs:
        raise UserError(f"--reference-curve {path} has no epoch line (an epoch number and a "
                        "positive valid_ppl and lr); give the --output of "
                        "`python -m benchmarks.torch_reference_lm`")
    return epochs


def curve_png(epochs: list[dict], title: str, reference: float | None = None,
              other: list[dict] | None = None) -> bytes:
    """PNG bytes: validation perplexity (log scale, left axis) and learning rate (log scale,
    right axis, a step line) against the epoch; ``other``, a reference curve's epochs, drawn
    the same way in other colours."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [e["epoch"] for e in epochs]
    fig, ax = plt.subplots(figsize=(8, 5))
    valid = [(n, e["valid_perplexity"]) for n, e in zip(x, epochs)
             if math.isfinite(e["valid_perplexity"])]
    ax.plot(*zip(*valid), marker="o", markersize=3, color="tab:blue",
            label="validation perplexity")
    if other:
        ax.plot([e["epoch"] for e in other], [e["valid_perplexity"] for e in other],
                marker="s", markersize=2, color="tab:purple", linewidth=1,
                label="reference curve: validation perplexity")
    if reference is not None:
        ax.axhline(reference, color="tab:green", linestyle="--",
                   label=f"published: {reference:g}")
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation perplexity")
    ax.grid(True, which="both", alpha=0.3)
    rate = ax.twinx()
    rate.step(x, [e["learning_rate"] for e in epochs], where="mid", color="tab:red",
              label="learning rate")
    if other:
        rate.step([e["epoch"] for e in other], [e["learning_rate"] for e in other],
                  where="mid", color="tab:orange", linestyle=":",
                  label="reference curve: learning rate")
    rate.set_yscale("log")
    rate.set_ylabel("learning rate")
    lines = ax.get_legend_handles_labels()
    more = rate.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="upper right")
    ax.set_title(title)
    fig.tight_layout()
    return png_bytes(fig)


@exit_on_user_error
def main(argv: list[str] | None = None) -> list[dict]:
    p = parser("curve", __doc__.split(": ", 1)[1], corpus=False)
    p.add_argument("--output", type=Path, default=None,
                   help="PNG to write (default: RUN/learning_curve.png)")
    p.add_argument("--reference", type=perplexity_value, default=None, metavar="PERPLEXITY",
                   help="a published validation perplexity (>= 1), drawn as a horizontal line")
    p.add_argument("--reference-curve", type=Path, default=None, metavar="FILE",
                   help="another implementation's curve to draw beside the run's: the JSON "
                        "lines of `python -m benchmarks.torch_reference_lm --output FILE`")
    p.add_argument("--title", default=None, help="plot title (default: the run's name)")
    args = p.parse_args(argv)
    epochs = epochs_of(args.run)
    other = reference_epochs(args.reference_curve) if args.reference_curve else None
    by_epoch = {e["epoch"]: e["valid_perplexity"] for e in other or []}
    for e in epochs:
        line = (f"epoch {e['epoch']}: valid perplexity {e['valid_perplexity']:.2f}, "
                f"learning rate {e['learning_rate']:g}")
        if e["epoch"] in by_epoch:
            line += (f"; reference {by_epoch[e['epoch']]:.2f} "
                     f"(ratio {e['valid_perplexity'] / by_epoch[e['epoch']]:.3f})")
        print(line)
    output = args.output or args.run / "learning_curve.png"
    write_bytes(output, curve_png(epochs, args.title or args.run.name, args.reference, other))
    print(f"written to {output}")
    return epochs


if __name__ == "__main__":
    main()
