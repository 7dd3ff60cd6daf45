"""``python -m evaluate.curve --run runs/<name>``: one run's learning curve, validation
perplexity and learning rate per epoch, from its ``metrics.json``, as a PNG (default:
``learning_curve.png`` in the run directory) and one printed line per epoch.

The learning rate is the one each epoch trained at (it is halved after an epoch without a
better validation perplexity), so a plateau and the halving it causes show side by side.
``--reference 105.35`` draws a published validation perplexity as a horizontal line (e.g.
the SDLM paper's tied medium LSTM on People's Daily).
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from evaluate.common import parser, png_bytes
from tcnlm_tf.arguments import finite_float
from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.run_directory import RunDirectory


def perplexity_value(text: str) -> float:
    """A finite perplexity, at least 1 (``--reference``)."""
    value = finite_float(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"a perplexity is at least 1, got {text!r}")
    return value


def epochs_of(run_dir: Path) -> list[dict]:
    """The finished epochs of ``run_dir`` (its ``metrics.json``), each with ``epoch``,
    ``valid_perplexity`` and ``learning_rate``."""
    path = RunDirectory(run_dir).metrics
    if not path.is_file():
        raise UserError(f"{run_dir} has no metrics.json: is it a run directory made by "
                        "`python -m train.run` that finished an epoch?")
    epochs = json.loads(path.read_text()).get("epochs", [])
    if not epochs:
        raise UserError(f"{path} lists no finished epoch yet; run this after the first")
    return epochs


def curve_png(epochs: list[dict], title: str, reference: float | None = None) -> bytes:
    """PNG bytes: validation perplexity (log scale, left axis) and learning rate (log scale,
    right axis, a step line) against the epoch."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [e["epoch"] for e in epochs]
    fig, ax = plt.subplots(figsize=(8, 5))
    valid = [(n, e["valid_perplexity"]) for n, e in zip(x, epochs)
             if math.isfinite(e["valid_perplexity"])]
    ax.plot(*zip(*valid), marker="o", markersize=3, color="tab:blue",
            label="validation perplexity")
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
    p.add_argument("--title", default=None, help="plot title (default: the run's name)")
    args = p.parse_args(argv)
    epochs = epochs_of(args.run)
    for e in epochs:
        print(f"epoch {e['epoch']}: valid perplexity {e['valid_perplexity']:.2f}, "
              f"learning rate {e['learning_rate']:g}")
    output = args.output or args.run / "learning_curve.png"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(curve_png(epochs, args.title or args.run.name, args.reference))
    print(f"written to {output}")
    return epochs


if __name__ == "__main__":
    main()
