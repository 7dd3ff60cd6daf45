"""``python -m evaluate.beside_paper --records DIR [DIR ...]``: the rows of one or more
``evaluate.compare`` runs (``--record-dir``) beside the TCNLM paper's Table 2, each side as
ratios to its own sentence-level LSTM.

Table 2 of Wang et al. (2018), "Topic Compositional Neural Language Model", gives test
perplexities on APNEWS, IMDB and BNC for small (1x600) and large (2x900) models: the basic
LSTM, LDA+LSTM, LCLM, Topic-RNN, TDLM and TCNLM, the topic models at 50, 100 and 150 topics
(the LDA+LSTM, LCLM and TDLM numbers taken from Lau et al. 2017). A corpus of our own (the
APNEWS sample, say) is not the paper's, so only the ratios compare: the paper's row over the
paper's basic LSTM beside ours over our sentence LSTM (row ``lstm``) and over the
document-level LSTM (row ``lstm-document``, where recorded), which the paper does not have.

Every finished record of every directory is a line, with the comparison it comes from and
how it stopped (a fixed budget is marked as such), so rows trained on to convergence in a
comparison of their own (e.g. ``results/i26-apnews-tied``) stand beside the main table's.
The directories must hold comparisons of one corpus, preset, seed, topic count and flags;
the ratios are to the first directory's ``lstm`` and ``lstm-document`` records.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from evaluate.common import emit, read_record, records_parser, row_of, row_order
from evaluate.compare import recorded_settings
from evaluate.compare_report import DOCUMENT_LSTM, SENTENCE_LSTM, stop_reason
from tcnlm_tf.errors import UserError, exit_on_user_error

#: Table 2 of the TCNLM paper, (dataset, preset) -> the paper's model -> test perplexity,
#: a number for the models without topics, {T: number} for the topic models
TABLE_2: dict[tuple[str, str], dict[str, float | dict[int, float]]] = {
    ("apnews", "small"): {
        "basic-LSTM": 64.13, "LDA+LSTM": {50: 57.05, 100: 55.52, 150: 54.83}, "LCLM": 54.18,
        "Topic-RNN": {50: 56.77, 100: 54.54, 150: 54.12},
        "TDLM": {50: 53.00, 100: 52.75, 150: 52.65},
        "TCNLM": {50: 52.75, 100: 52.63, 150: 52.59}},
    ("apnews", "large"): {
        "basic-LSTM": 58.89, "LDA+LSTM": {50: 52.72, 100: 50.75, 150: 50.17}, "LCLM": 50.63,
        "Topic-RNN": {50: 53.19, 100: 50.24, 150: 50.01},
        "TDLM": {50: 48.96, 100: 48.97, 150: 48.21},
        "TCNLM": {50: 48.07, 100: 47.81, 150: 47.74}},
    ("imdb", "small"): {
        "basic-LSTM": 72.14, "LDA+LSTM": {50: 69.58, 100: 69.64, 150: 69.62}, "LCLM": 67.78,
        "Topic-RNN": {50: 68.74, 100: 67.83, 150: 66.45},
        "TDLM": {50: 63.67, 100: 63.45, 150: 63.82},
        "TCNLM": {50: 63.98, 100: 62.64, 150: 62.59}},
    ("imdb", "large"): {
        "basic-LSTM": 66.47, "LDA+LSTM": {50: 63.48, 100: 63.04, 150: 62.78}, "LCLM": 67.86,
        "Topic-RNN": {50: 63.02, 100: 61.59, 150: 60.14},
        "TDLM": {50: 58.99, 100: 59.04, 150: 58.59},
        "TCNLM": {50: 57.06, 100: 56.38, 150: 56.12}},
    ("bnc", "small"): {
        "basic-LSTM": 102.89, "LDA+LSTM": {50: 96.42, 100: 96.50, 150: 96.38}, "LCLM": 87.47,
        "Topic-RNN": {50: 94.66, 100: 93.57, 150: 93.55},
        "TDLM": {50: 87.42, 100: 85.99, 150: 86.43},
        "TCNLM": {50: 87.98, 100: 86.44, 150: 86.21}},
    ("bnc", "large"): {
        "basic-LSTM": 94.23, "LDA+LSTM": {50: 88.42, 100: 87.77, 150: 87.28}, "LCLM": 80.68,
        "Topic-RNN": {50: 85.90, 100: 84.62, 150: 84.12},
        "TDLM": {50: 82.62, 100: 81.83, 150: 80.58},
        "TCNLM": {50: 80.29, 100: 80.14, 150: 80.12}},
}
#: the paper's name of each ``evaluate.compare`` row it has; the other rows (the
#: document-level LSTM, the ablations, the decoders) are not in Table 2
PAPER_ROWS = {SENTENCE_LSTM: "basic-LSTM", "lda_lstm": "LDA+LSTM", "lclm": "LCLM",
              "topic_rnn": "Topic-RNN", "tdlm": "TDLM", "tcnlm": "TCNLM"}
#: settings that may differ between the directories: where the corpus was, and the rows'
#: budgets (each line says how its row stopped)
MAY_DIFFER = ("data_dir", "fixed_budget", "max_epochs")


def build_parser() -> argparse.ArgumentParser:
    p = records_parser("beside_paper", __doc__.split(": ", 1)[1],
                       "--records results/i26-apnews results/i26-apnews-tied",
                       "where the Markdown table goes (default: print only)")
    p.add_argument("--records", type=Path, nargs="+", required=True,
                   help="record directories of evaluate.compare runs (--record-dir); the "
                        "first holds the lstm row every ratio is to")
    p.add_argument("--rows", default=None,
                   help="comma-separated run names to show, e.g. lstm,tcnlm,lstm-document "
                        "(default: every finished run; the ratios need lstm recorded either "
                        "way)")
    return p


def common_settings(directories: list[Path]) -> dict:
    """The settings the directories' comparisons share; a :class:`UserError` where they
    differ in more than :data:`MAY_DIFFER`."""
    first = recorded_settings(directories[0], "--records")
    for directory in directories[1:]:
        other = recorded_settings(directory, "--records")
        differ = sorted(k for k in first.keys() | other.keys()
                        if k not in MAY_DIFFER and first.get(k) != other.get(k))
        if differ:
            raise UserError(f"--records {directories[0]} and {directory} differ in "
                            f"{', '.join(differ)}; give comparisons of one corpus and setting")
    return first


def paper_value(paper: dict, name: str, topics: int | None) -> float | None:
    """The paper's test perplexity for run ``name`` (at ``topics`` for a topic model), or
    None where Table 2 has no such cell."""
    column = PAPER_ROWS.get(row_of(name) or "")
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


def table(found: list[dict], paper: dict, keep: set[str] | None = None) -> str:
    """The Markdown table: each run's line (of the runs named in ``keep``, if given) with
    the paper's cell beside it."""
    first = found[0]["comparison"]
    reference = {row: next((e["test"] for e in found if e["comparison"] == first
                            and e["name"] == row), None)
                 for row in (SENTENCE_LSTM, DOCUMENT_LSTM)}
    if reference[SENTENCE_LSTM] is None:
        raise UserError(f"the first --records directory ({first}) has no record of the "
                        f"sentence-level LSTM (row {SENTENCE_LSTM}), the baseline of every "
                        "ratio; give the comparison that has it first")
    lstm = paper[PAPER_ROWS[SENTENCE_LSTM]]
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
    key = (settings.get("dataset"), settings.get("preset"))
    paper = TABLE_2.get(key)
    if paper is None:
        have = ", ".join(f"{d} {p}" for d, p in TABLE_2)
        raise UserError(f"the TCNLM paper's Table 2 has no {key[0]} {key[1]} column (it has "
                        f"{have}); these records are of another corpus or preset")
    found = [e for directory in args.records
             for e in entries(directory, recorded_settings(directory, "--records")
                              .get("fixed_budget", {}))]
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
            f"{', '.join(map(str, args.records))}\n\n" + table(found, paper, keep))
    return emit(text, args.output)


if __name__ == "__main__":
    main()
