"""``python -m evaluate.output_layers --records DIR [DIR ...]``: every recorded row beside
the LSTMs that share its output layer, from the records of one or more ``evaluate.compare``
runs (``--record-dir``).

The output layer is worth more perplexity than the topic models' gains (a tied full softmax
against the adaptive softmax moved an otherwise equal sentence LSTM by 7.8 % on APNEWS), so a
topic row is only compared with LSTMs whose output layer is its own: the adaptive softmax,
the full softmax tied to the input embeddings, or the untied full softmax (what Topic-RNN
must use). Each run's layer is read from its record's ``config.json`` (``decoder``, its
``tie_embeddings``). For every row and layer the table gives the test perplexity (mean ±
standard deviation over its seeds), and its ratio to the sentence LSTM (row ``lstm``, or
``lstm-tied`` for the tied layer) and to the document LSTM (``lstm-document``) of that same
layer, each with the paired bootstrap 95 % interval of :mod:`evaluate.intervals` (test
documents resampled, the same for both rows, and each row's seeds); "-" where no such LSTM is
recorded or a record lacks per-document scores. Comparisons of another dataset, preset,
topic count or context protocol cannot be joined (a one-line error).
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from evaluate.common import emit, read_record, records_parser, row_of, row_order
from evaluate.compare import recorded_settings
from evaluate.intervals import Interval, document_scores, paired_bootstrap
from tcnlm_tf.errors import UserError, exit_on_user_error

#: the output layers, as a record's model settings make them
LAYERS = ("adaptive softmax", "tied full softmax", "full softmax")
#: the rows of the LSTMs each row is divided by: (sentence, document)
SENTENCE_ROWS, DOCUMENT_ROW = ("lstm", "lstm-tied"), "lstm-document"
#: the settings of the joined comparisons that must agree (a train.run flag beside them)
JOINED = ("dataset", "preset", "num_topics")
CONTEXT_FLAG = "--context"


def build_parser() -> argparse.ArgumentParser:
    p = records_parser("output_layers", __doc__.split(": ", 1)[1],
                       "--records results/apnews/seeds results/apnews/tied-softmax "
                       "results/apnews/full-softmax",
                       "where the Markdown table goes (default: print only)")
    p.add_argument("--records", type=Path, nargs="+", required=True,
                   help="record directories of evaluate.compare runs (--record-dir)")
    return p


def output_layer(model: dict) -> str:
    """The output layer of a record's ``model`` settings (one of :data:`LAYERS`), or the
    decoder's name for the others (SDLM, MoS)."""
    decoder = model.get("decoder", "adaptive")
    if decoder == "adaptive":
        return LAYERS[0]
    if decoder == "softmax":
        tied = model.get("decoder_options", {}).get("tie_embeddings", model.get(
            "tie_embeddings", False))
        return LAYERS[1] if tied else LAYERS[2]
    return decoder


def joined_settings(directory: Path) -> dict:
    """What the comparisons joined must share: dataset, preset, topic count and the
    ``--context`` protocol of their train.run flags."""
    settings = recorded_settings(directory, "--records")
    flags = settings.get("train_args", [])
    context = flags[flags.index(CONTEXT_FLAG) + 1] if CONTEXT_FLAG in flags[:-1] else "rest"
    return {**{key: settings.get(key) for key in JOINED}, "context": context}


def runs(directory: Path) -> list[dict]:
    """One entry per finished run recorded in ``directory``: its row, output layer, test
    perplexity and per-document scores (None where not recorded)."""
    found = []
    for path in sorted(directory.glob("*/metrics.json")):
        metrics = read_record(path, "--records")
        if "test_perplexity" not in metrics:
            continue
        config = read_record(path.parent / "config.json", "--records")
        row = row_of(path.parent.name) or path.parent.name
        found.append({"row": row, "layer": output_layer(config.get("model", {})),
                      "test": metrics["test_perplexity"],
                      "documents": document_scores(metrics), "where": path.parent})
    return found


def groups(found: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """The runs by (row, output layer), a tied sentence LSTM (row ``lstm-tied``) under its
    own row: the seeds of one cell."""
    cells: dict[tuple[str, str], list[dict]] = {}
    for run in found:
        cells.setdefault((run["row"], run["layer"]), []).append(run)
    return cells


def cell_ratio(cells: dict, key: tuple[str, str],
               base: tuple[str, str] | None) -> Interval | float | None:
    """The test-perplexity ratio of cell ``key`` to cell ``base``: its paired bootstrap
    interval, the plain ratio of the seeds' mean perplexities where a run lacks per-document
    scores, None where there is no base (or it is ``key``)."""
    if base is None or base not in cells or base == key:
        return None
    runs_of = {k: [r["documents"] for r in cells[k]] for k in (key, base)}
    if any(d is None for scores in runs_of.values() for d in scores):
        test = statistics.fmean(r["test"] for r in cells[key])
        return test / statistics.fmean(r["test"] for r in cells[base])
    return paired_bootstrap(runs_of, base)[key]


def ratio_cell(cells: dict, key: tuple[str, str], base: tuple[str, str] | None) -> str:
    """:func:`cell_ratio` as a table cell: ``ratio [low, high]``, a plain ratio, or "-"."""
    found = cell_ratio(cells, key, base)
    if found is None:
        return "-"
    return str(found) if isinstance(found, Interval) else f"{found:.3f}"


def same_layer_bases(cells: dict, layer: str) -> tuple[tuple[str, str] | None,
                                                       tuple[str, str] | None]:
    """The cells of the sentence and the document LSTM with output layer ``layer`` (None
    where not recorded)."""
    sentence = next(((s, layer) for s in SENTENCE_ROWS if (s, layer) in cells), None)
    document = (DOCUMENT_ROW, layer) if (DOCUMENT_ROW, layer) in cells else None
    return sentence, document


def table(found: list[dict]) -> str:
    """The Markdown table (see the module docstring)."""
    cells = groups(found)
    lines = ["| model | output layer | seeds | test ppl | / sentence LSTM, same layer "
             "[95 % CI] | / document LSTM, same layer [95 % CI] |",
             "| --- | --- | --- | --- | --- | --- |"]
    order = sorted(cells, key=lambda k: (row_order(k[0]), LAYERS.index(k[1])
                                         if k[1] in LAYERS else len(LAYERS)))
    for row, layer in order:
        tests = [r["test"] for r in cells[(row, layer)]]
        mean = statistics.fmean(tests)
        spread = f" ± {statistics.stdev(tests):.2f}" if len(tests) > 1 else ""
        sentence, document = same_layer_bases(cells, layer)
        lines.append(f"| {row} | {layer} | {len(tests)} | {mean:.2f}{spread} | "
                     f"{ratio_cell(cells, (row, layer), sentence)} | "
                     f"{ratio_cell(cells, (row, layer), document)} |")
    return "\n".join(lines) + "\n"


@exit_on_user_error
def main(argv: list[str] | None = None) -> str:
    args = build_parser().parse_args(argv)
    first = joined_settings(args.records[0])
    for directory in args.records[1:]:
        other = joined_settings(directory)
        differ = sorted(k for k in first if first[k] != other[k])
        if differ:
            raise UserError(f"--records {args.records[0]} and {directory} differ in "
                            f"{', '.join(differ)}: their rows are not like for like")
    found = [run for directory in args.records for run in runs(directory)]
    if not found:
        raise UserError(f"no finished run recorded in {', '.join(map(str, args.records))}")
    text = (f"Test perplexity by output layer on {first['dataset']} ({first['preset']} preset, "
            f"T = {first['num_topics']}, context {first['context']}), each row divided by the "
            "LSTMs with the same output layer; records from "
            f"{', '.join(map(str, args.records))}\n\n" + table(found))
    return emit(text, args.output)


if __name__ == "__main__":
    main()
