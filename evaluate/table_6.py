"""``python -m evaluate.table_6 --records DIR``: the rows of an ``evaluate.compare`` run at the
TCNLM paper's Table 6 size (1x100 LSTMs, 30 topics: ``--num-topics 30 -- --hidden-size 100``)
beside that table.

Table 6 is the one table of Wang et al. (2018) whose rows the authors trained in one codebase
(the basic LSTM, the naive MoE of eq. 7-8 and TCNLM), so its ratios are the paper's
like-for-like claim: on APNEWS TCNLM reaches 0.814 of the LSTM's test perplexity and the MoE
0.845. For each recorded row: the test perplexity (mean ± standard deviation over its seeds),
its ratio to the sentence LSTM (row ``lstm``) with the paired bootstrap 95 % interval of
:mod:`evaluate.intervals`, and the paper's value and ratio for the comparison's dataset
("not in the paper" for the rows it lacks, e.g. ``tcnlm-constant-t``).
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from evaluate.common import emit, records_parser, row_order
from evaluate.compare import recorded_settings
from evaluate.compare_report import SENTENCE_LSTM
from evaluate.output_layers import groups, ratio_cell, runs
from evaluate.published import TABLE_6
from tcnlm_tf.errors import UserError, exit_on_user_error


def build_parser() -> argparse.ArgumentParser:
    p = records_parser("table_6", __doc__.split(": ", 1)[1], "--records results/apnews/table6",
                       "where the Markdown table goes (default: print only)")
    p.add_argument("--records", type=Path, required=True,
                   help="the record directory of an evaluate.compare run at Table 6's size")
    return p


def table(found: list[dict], paper: dict[str, float]) -> str:
    """The Markdown table, one line per recorded row (see the module docstring)."""
    cells = groups(found)
    base = next((key for key in cells if key[0] == SENTENCE_LSTM), None)
    lines = ["| row | seeds | test ppl | / LSTM [95 % CI] | paper, test ppl | paper / its LSTM |",
             "| --- | --- | --- | --- | --- | --- |"]
    for key in sorted(cells, key=lambda k: row_order(k[0])):
        tests = [run["test"] for run in cells[key]]
        spread = f" ± {statistics.stdev(tests):.2f}" if len(tests) > 1 else ""
        published = paper.get(key[0])
        theirs = (["not in the paper", "-"] if published is None else
                  [f"{published:.2f}", f"{published / paper[SENTENCE_LSTM]:.3f}"])
        lines.append(f"| {key[0]} | {len(tests)} | {statistics.fmean(tests):.2f}{spread} | "
                     f"{ratio_cell(cells, key, base)} | {' | '.join(theirs)} |")
    return "\n".join(lines) + "\n"


@exit_on_user_error
def main(argv: list[str] | None = None) -> str:
    args = build_parser().parse_args(argv)
    settings = recorded_settings(args.records, "--records")
    dataset = settings.get("dataset")
    if dataset not in TABLE_6:
        raise UserError(f"the TCNLM paper's Table 6 has no {dataset} column (it has "
                        f"{', '.join(TABLE_6)}); these records are of another corpus")
    if settings.get("num_topics") != 30 or "--hidden-size" not in settings.get(
            "train_args", []) or "100" not in settings.get("train_args", []):
        raise UserError(f"--records {args.records}: not a comparison at Table 6's size (give "
                        "one run with --num-topics 30 -- --hidden-size 100)")
    found = runs(args.records)
    if not found:
        raise UserError(f"no finished run recorded in {args.records}")
    text = (f"Test perplexity at the TCNLM paper's Table 6 size (1x100 LSTMs, 30 topics) on "
            f"{dataset}, beside its Table 6; records from {args.records}\n\n"
            + table(found, TABLE_6[dataset]))
    return emit(text, args.output)


if __name__ == "__main__":
    main()
