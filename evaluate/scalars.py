"""``python -m evaluate.scalars --run runs/<name> --tag train/topic_rnn_kl``: a training
scalar of a run's TensorBoard log, averaged over each epoch (the steps between two epoch ends
of its ``metrics.json``), e.g. Topic-RNN's KL per sequence or the topic-model terms of TCNLM.
Prints one line per epoch and, with ``--json``, the list of means.

TensorBoard's reader stops at a damaged record of an event file without a word, which would
make the means those of other data; every event file is therefore read through first with
the records' checksums checked (:func:`check_event_file`)."""
from __future__ import annotations

import json
import math
import re
import sys
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


#: what TensorFlow's record reader says of a record it cannot read: cut short by the end of
#: the file ("truncated") or failing its checksum ("corrupted"), and the record's byte offset
DAMAGED_RECORD = re.compile(r"(truncated|corrupted) record at (\d+)")
#: what to do about an event file that cannot be read whole
RESTORE_EVENTS = ("restore it from a copy, or move it out of its folder to average the scalars "
                  "of the other event files")


def event_files(folder: Path) -> list[Path]:
    """The event files in ``folder`` that TensorBoard's accumulator reads, in its order."""
    from tensorboard.backend.event_processing import io_wrapper

    return sorted(Path(path) for path in io_wrapper.ListDirectoryAbsolute(str(folder))
                  if io_wrapper.IsSummaryEventsFile(path))


def check_event_file(path: Path) -> None:
    """Reads every record of the event file ``path`` with its checksums. A file that cannot
    be opened (a link to nothing, no permission) or a record that fails its checksums (bit
    rot, bytes written over it, a file that is no event file) is a :class:`UserError`
    naming the file, as TensorBoard would pass over the file or the rest of it. A file that
    ends inside a record, as a kill mid-write leaves the one a run was writing (or as a
    truncated copy does), is read up to there with a warning on stderr that names it and the
    last step read from it."""
    import numpy as np
    import tensorflow as tf

    try:
        path.open("rb").close()
    except OSError as error:
        raise UserError(f"cannot read {path} ({error.strerror}): {RESTORE_EVENTS}") from None
    try:
        tf.data.TFRecordDataset(str(path)).reduce(np.int64(0), lambda count, _: count + 1)
        return
    except tf.errors.DataLossError as error:
        found = DAMAGED_RECORD.search(error.message)
    if found is None or found.group(1) != "truncated":
        where = f"its record at byte {found.group(2)}" if found else "a record"
        raise UserError(f"{path} is damaged: {where} fails its checksum (bit rot, or bytes "
                        "written over it), and TensorBoard would skip the rest of the file "
                        f"without a word: {RESTORE_EVENTS}")
    step = last_step(path)
    read = f"its steps up to {step} are read" if step is not None else "no record is whole"
    print(f"warning: {path} ends in a record cut short at byte {found.group(2)} of "
          f"{path.stat().st_size}, as a kill mid-write leaves it (or a truncated copy): "
          f"{read}; the means use the records before the cut", file=sys.stderr)


def last_step(path: Path) -> int | None:
    """The step of the last whole record of the event file ``path``, which ends inside a
    record (None where no record is whole)."""
    import tensorflow as tf
    from tensorboard.compat.proto import event_pb2

    last = None
    try:
        for record in tf.data.TFRecordDataset(str(path)):
            last = record
    except tf.errors.DataLossError:      # the record cut short, where reading ends
        pass
    return None if last is None else event_pb2.Event.FromString(last.numpy()).step


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
    for path in event_files(files.tensorboard):
        check_event_file(path)
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
