"""``python -m evaluate.scalars --run runs/<name> --tag train/topic_rnn_kl``: a training
scalar of a run's TensorBoard log, averaged over each epoch (the steps between two epoch ends
of its ``metrics.json``), e.g. Topic-RNN's KL per sequence or the topic-model terms of TCNLM.
Prints one line per epoch and, with ``--json``, the list of means."""
from __future__ import annotations

import json
import math
from pathlib import Path

from evaluate.common import parser
from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.runs.directory import RunDirectory
from tcnlm_tf.runs.directory import read_json_object


def epoch_ends(metrics: Path) -> list[int]:
    """The step at which each epoch of ``metrics`` (a run's ``metrics.json``) ended; a
    :class:`UserError` naming the file where it is damaged or lists no such steps."""
    advice = "restore it from a copy (the TensorBoard log alone does not say where epochs end)"
    epochs = read_json_object(metrics, advice).get("epochs")
    if not (isinstance(epochs, list) and all(isinstance(e, dict) and isinstance(e.get("step"), int)
                                             for e in epochs)):
        raise UserError(f"{metrics} has no list of epochs with their steps: {advice}")
    return [entry["step"] for entry in epochs]


def epoch_means(run_dir, tag: str) -> list[float]:
    """The mean of the values logged under ``tag`` in each epoch of ``run_dir`` (NaN for an
    epoch that logged none), in epoch order."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorflow import make_ndarray

    files = RunDirectory(run_dir)
    metrics = files.metrics
    if not metrics.is_file():
        raise UserError(f"{run_dir} has no metrics.json: is it a run directory made by "
                        "`python -m train.run` that finished an epoch?")
    ends = epoch_ends(metrics)
    if not files.tensorboard.is_dir():
        raise UserError(f"{files.tensorboard} is gone: the run's TensorBoard log holds the "
                        "scalars; restore the folder from a copy")
    accumulator = event_accumulator.EventAccumulator(
        str(files.tensorboard), size_guidance={event_accumulator.TENSORS: 0})
    accumulator.Reload()
    tags = accumulator.Tags()["tensors"]
    if tag not in tags:
        raise UserError(f"{run_dir / 'tensorboard'} has no scalar {tag!r}; it has "
                        f"{', '.join(sorted(tags)) or 'none'}")
    events = [(e.step, float(make_ndarray(e.tensor_proto))) for e in accumulator.Tensors(tag)]
    means = []
    for start, end in zip([0] + ends, ends):
        values = [value for step, value in events if start < step <= end]
        means.append(sum(values) / len(values) if values else math.nan)
    return means


@exit_on_user_error
def main(argv: list[str] | None = None) -> list[float]:
    p = parser("scalars", __doc__.split(": ", 1)[1].split("\n\n")[0], corpus=False)
    p.add_argument("--tag", required=True, help="the scalar, e.g. train/topic_rnn_kl")
    p.add_argument("--json", action="store_true", help="also print the means as JSON")
    args = p.parse_args(argv)
    means = epoch_means(args.run, args.tag)
    for epoch, value in enumerate(means, start=1):
        print(f"epoch {epoch}: {args.tag} {value:.4f}")
    if args.json:
        print(json.dumps(means))
    return means


if __name__ == "__main__":
    main()
