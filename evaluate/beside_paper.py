"""``python -m evaluate.beside_paper --records DIR [DIR ...]``: the rows of one or more
``evaluate.compare`` runs (``--record-dir``) beside the TCNLM paper's Table 2, each side as
ratios to its own sentence-level LSTM.

Table 2 of Wang et al. (2018), "Topic Compositional Neural Language Model", gives test
perplexities on APNEWS, IMDB and BNC for small (1x600) and large (2x900) models: the basic
LSTM, LDA+LSTM, LCLM, Topic-RNN, TDLM and TCNLM, the topic models at 50, 100 and 150 topics
(the basic-LSTM, LDA+LSTM, LCLM and TDLM numbers taken from Lau et al. 2017). A corpus of
our own (the APNEWS sample, say) is not the paper's, so only the ratios compare: the paper's
row over the paper's basic LSTM beside ours over our sentence LSTM (row ``lstm``) and over the
document-level LSTM (row ``lstm-document``, where recorded), which the paper does not have.

Every finished record of every directory is a line, with the comparison it comes from and
how it stopped (a fixed budget is marked as such), so rows trained on to convergence in a
comparison of their own (e.g. ``results/apnews/tied-lstm``) stand beside the main table's.
The directories must hold comparisons of one corpus, preset, seed, topic count and flags;
the ratios are to the first directory's ``lstm`` and ``lstm-document`` records.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from evaluate.common import (MAY_DIFFER, emit, read_record, records_parser, row_of,
                             row_order)
from evaluate.compare import recorded_settings
from evaluate.compare_report import DOCUMENT_LSTM, SENTENCE_LSTM, stop_reason
from evaluate.published import TABLE_2, TABLE_2_ROWS
from tcnlm_tf.errors import UserError, exit_on_user_error


def build_parser() -> argparse.ArgumentParser:
    p = records_parser("beside_paper", __doc__.split(": ", 1)[1],
                       "--records results/apnews/papers-protocol results/apnews/tied-lstm",
                       "where the Markdown table goes (default: print only)")
    p.add_argument("--records", type=Path, nargs="+", required=True,
                   help="record directories of evaluate.compare runs (--record-dir); the "
                        "first holds the lstm row every ratio is to")
    p.add_argument("--rows", default=None,
                   help="comma-separated run names to show, e.g. lstm,tcnlm,lstm-document "
                        "(default: every finished run; the ratios need lstm recorded either "
                        "way)")
    return p


def common_settings(directories: list[Path]) -> list[dict]:
    """The settings of the directories' comparisons, one per directory; a
    :class:`UserError` where they differ in more than :data:`MAY_DIFFER`."""
    found = [recorded_settings(directory, "--records") for directory in directories]
    first = found[0]
    for directory, other in zip(directories[1:], found[1:]):
        differ = sorted(k for k in first.keys() | other.keys()
                        if k not in MAY_DIFFER and first.get(k) != other.get(k))
        if differ:
            raise UserError(f"--records {directories[0]} and {directory} differ in "
                            f"{', '.join(differ)}; give comparisons of one corpus and setting")
    return found


def paper_value(paper: dict, name: str, topics: int | None) -> float | None:
    """The paper's test perplexity for run ``name`` (at ``topics`` for a topic model), or
    None where Table 2 has no such cell."""
    column = TABLE_2_ROWS.get(row_of(name) or "")
    if column is None:
        return None
    value = paper[column]
    return value.get(topics) if isinstance(value, dict) else value


def entries(directory: Path, fixed_budget: dict[str, int]) -> list[dict]:
    """One entry per finished run recorded in ``directory``, in row order, then by topic
    count."""
    found = []
    for path in directory.glob("*/metrics.json"):
        metrics = read_record(path, "--records")
        if "test_perplexity" not in metrics:
            continue
        config = path.parent / "config.json"
        options = (read_record(config, "--records").get("model", {}).get("options", {})
                   if config.is_file() else {})
        name = path.parent.name
        found.append({"name": name, "comparison": directory.name,
                      "topics": options.get("num_topics"), "test": metrics["test_perplexity"],
                      "epochs": len(metrics.get("epochs", [])),
                      "stopped": stop_reason(metrics, fixed_budget.get(row_of(name) or name))})
    return sorted(found, key=lambda e: (row_order(e["name"])[0], e["topics"] or 0, e["name"]))


def table(found: list[dict], paper: dict, first: str, keep: set[str] | None = None) -> str:
    """The Markdown table: each run's line (of the runs named in ``keep``, if given) with
    the paper's cell beside it, ours as ratios to the LSTM rows of comparison ``first``."""
    reference = {row: next((e["test"] for e in found if e["comparison"] == first
                            and e["name"] == row), None)
                 for row in (SENTENCE_LSTM, DOCUMENT_LSTM)}
    if reference[SENTENCE_LSTM] is None:
        raise UserError(f"the first --records directory ({first}) has no record of the "
                        f"sentence-level LSTM (row {SENTENCE_LSTM}), the baseline of every "
                        "ratio; give the comparison that has it first")
    lstm = paper[TABLE_2_ROWS[SENTENCE_LSTM]]
    lines = ["| row | comparison | T | epochs | stopped | paper, test ppl | paper / its LSTM | "
             "here, test ppl | here / sentence LSTM | here / document LSTM |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for e in found:
        if keep is not None and e["name"] not in keep:
            continue
        published = paper_value(paper, e["name"], e["topics"])
        cells = (["not in the paper", "-"] if published is None else
                 [f"{published:.2f}", f"{published / lstm:.3f}"])
        document = reference[DOCUMENT_LSTM]
        lines.append(
            f"| {e['name']} | {e['comparison']} | {e['topics'] or '-'} | {e['epochs']} | "
            f"{e['stopped']} | {' | '.join(cells)} | {e['test']:.2f} | "
            f"{e['test'] / reference[SENTENCE_LSTM]:.3f} | "
            + (f"{e['test'] / document:.3f} |" if document else "- |"))
    return "\n".join(lines) + "\n"


@exit_on_user_error
def main(argv: list[str] | None = None) -> str:
    args = build_parser().parse_args(argv)
    settings = common_settings(args.records)
    key = (settings[0].get("dataset"), settings[0].get("preset"))
    paper = TABLE_2.get(key)
    if paper is None:
        have = ", ".join(f"{d} {p}" for d, p in TABLE_2)
        raise UserError(f"the TCNLM paper's Table 2 has no {key[0]} {key[1]} column (it has "
                        f"{have}); these records are of another corpus or preset")
    found = [e for directory, recorded in zip(args.records, settings)
             for e in entries(directory, recorded.get("fixed_budget", {}))]
    if not found:
        raise UserError(f"no finished run's record (*/metrics.json with a test perplexity) in "
                        f"{', '.join(map(str, args.records))}")
    keep = None
    if args.rows:
        keep = {r.strip() for r in args.rows.split(",") if r.strip()}
        missing = sorted(keep - {e["name"] for e in found})
        if missing:
            raise UserError(f"--rows {', '.join(missing)}: no finished run of that name in "
                            f"{', '.join(map(str, args.records))}")
    text = (f"Test perplexity beside the TCNLM paper's Table 2 ({key[0]}, {key[1]} models), "
            "each as a ratio to its own sentence-level LSTM; records from "
            f"{', '.join(map(str, args.records))}\n\n"
            + table(found, paper, args.records[0].name, keep))
    return emit(text, args.output)


if __name__ == "__main__":
    main()
