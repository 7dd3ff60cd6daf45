"""``python -m evaluate.topic_counts --records DIR [DIR ...]``: topic coherence by topic count
(the shape of the TCNLM paper's Table 4 and the TDLM paper's Table 4) from the records of
one or more ``evaluate.compare`` runs (``--record-dir``), with test perplexity beside it.

A comparison with several ``--num-topics`` writes an NPMI-by-T table itself; this command
joins comparisons made at different topic counts instead (e.g. the converged table's
50-topic rows and a later comparison at 100 and 150), so no row is trained twice. Each
(row, T) is one line: NPMI of the top 5/10/15/20 words, their mean (window and reference
corpus as recorded; ``evaluate.coherence``), the TCNLM paper's Table 4 NPMI for that row,
dataset, model size and T (:mod:`evaluate.published`; its reference corpus is Wikipedia, so
compare the trend over T, not the values) and the test perplexity; a cell (a row shown, a
topic count of the comparisons) with no finished record says "not run". Records that
disagree on the coherence reference, window or convention (``evaluate.coherence``), or whose
comparisons differ in more than the topic count, are refused in one line.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from evaluate.common import emit, read_record, records_parser, row_of, row_order
from evaluate.compare import recorded_settings
from evaluate.published import table_4_npmi
from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.metrics.coherence import convention_of

#: the top-N sizes of the papers' coherence (both average top 5/10/15/20)
TOP_NS = ("5", "10", "15", "20")


def build_parser() -> argparse.ArgumentParser:
    p = records_parser("topic_counts", __doc__.split(": ", 1)[1],
                       "--records results/apnews/papers-protocol results/apnews/topic-counts "
                       "--rows tcnlm,tdlm",
                       "where the Markdown table goes (default: print only)")
    p.add_argument("--records", type=Path, nargs="+", required=True,
                   help="record directories of evaluate.compare runs (--record-dir)")
    p.add_argument("--rows", default=None,
                   help="comma-separated rows to keep, e.g. tcnlm,tdlm (default: every row "
                        "with topics)")
    return p


def comparison_settings(directory: Path) -> tuple[dict, list[int]]:
    """The comparison's settings without its topic counts (what must agree), and its topic
    counts."""
    settings = recorded_settings(directory, "--records")
    topics = settings.pop("num_topics", None)
    settings.pop("data_dir", None)       # where the corpus was, not which
    settings.pop("fixed_budget", None)   # rows without topics may join at a budget
    counts = [] if topics is None else topics if isinstance(topics, list) else [topics]
    return settings, [int(t) for t in counts]


def entries(directory: Path) -> list[dict]:
    """One entry per finished topic run recorded in ``directory``: its row (the run name
    without its ``-T<T>`` and later suffixes), T, NPMI and test perplexity."""
    found = []
    for path in sorted(directory.glob("*/metrics.json")):
        metrics = read_record(path, "--records")
        coherence = metrics.get("coherence")
        if "test_perplexity" not in metrics or not coherence:
            continue
        test = metrics["test_perplexity"]
        if isinstance(test, bool) or not isinstance(test, (int, float)):
            raise UserError(f"--records: {path} gives the test_perplexity {test!r}, not a "
                            "number; restore it (git checkout -- FILE, for a committed "
                            "record) or remove that record")
        config = read_record(path.parent / "config.json", "--records")
        topics = config.get("model", {}).get("options", {}).get("num_topics")
        if topics is None:
            raise UserError(f"--records: {path.parent / 'config.json'} gives no num_topics "
                            "for a run with topics; restore the record's config.json")
        found.append({"row": row_of(path.parent.name) or path.parent.name,
                      "topics": int(topics), "coherence": coherence,
                      "test": test, "where": path.parent})
    return found


def table(found: list[dict], rows: list[str], counts: list[int], dataset: str,
          preset: str) -> str:
    """The Markdown table, one line per row of ``rows`` and topic count of ``counts``, with
    the TCNLM paper's Table 4 NPMI for the row, ``dataset``, ``preset`` and T beside ours
    (:func:`table_4_npmi`; "-" where it has none); "not run" where ``found`` has no record
    of the cell (not trained, or still training); a (row, T) recorded twice is an error."""
    seen = {}
    for e in found:
        key = (e["row"], e["topics"])
        if key in seen:
            raise UserError(f"{e['row']} at T = {e['topics']} is recorded twice ({seen[key]} "
                            f"and {e['where']}); give each topic count once")
        seen[key] = e["where"]
    lines = ["| model | T | " + " | ".join(f"NPMI top-{n}" for n in TOP_NS)
             + " | NPMI mean | paper's NPMI (TCNLM Table 4) | test ppl |",
             "| --- | --- |" + " --- |" * (len(TOP_NS) + 3)]
    recorded = {(e["row"], e["topics"]): e for e in found}
    for row in sorted(rows, key=row_order):
        for topics in counts:
            paper = table_4_npmi(row, dataset, preset, topics)
            paper = "-" if paper is None else f"{paper:.3f}"
            e = recorded.get((row, topics))
            if e is None:
                lines.append(f"| {row} | {topics} | not run |" + " - |" * len(TOP_NS)
                             + f" {paper} | - |")
                continue
            cells = [f"{e['coherence']['per_n'][n]:.4f}" for n in TOP_NS]
            lines.append(f"| {row} | {topics} | " + " | ".join(cells)
                         + f" | {e['coherence']['mean']:.4f} | {paper} | {e['test']:.2f} |")
    return "\n".join(lines) + "\n"


@exit_on_user_error
def main(argv: list[str] | None = None) -> str:
    args = build_parser().parse_args(argv)
    first, counts = comparison_settings(args.records[0])
    dataset, preset = first.get("dataset"), first.get("preset")
    for directory in args.records[1:]:
        other, more = comparison_settings(directory)
        counts += more
        differ = sorted(k for k in first.keys() | other.keys() if first.get(k) != other.get(k))
        if differ:
            raise UserError(f"--records {args.records[0]} and {directory} differ in "
                            f"{', '.join(differ)}, not only in the topic count")
    found = [e for directory in args.records for e in entries(directory)]
    rows = sorted({e["row"] for e in found}, key=row_order)
    if not found:
        raise UserError(f"no finished topic run with a coherence record in "
                        f"{', '.join(map(str, args.records))}")
    if args.rows:
        keep = [r.strip() for r in args.rows.split(",") if r.strip()]
        unknown = [r for r in keep if r not in rows]
        if unknown:
            raise UserError(f"--rows {args.rows}: no finished record of {', '.join(unknown)} "
                            f"in {', '.join(map(str, args.records))}; the rows with topics "
                            f"there are {', '.join(rows)}")
        rows = keep
        found = [e for e in found if e["row"] in rows]
    # the reference file by its corpus folder and name: records keep the path as given,
    # relative to where each run was started
    references = {(Path(e["coherence"].get("reference", "")).parts[-2:],
                   e["coherence"].get("window"), convention_of(e["coherence"])) for e in found}
    if len(references) > 1:
        raise UserError("the records' NPMI comes from different reference corpora, windows or "
                        f"conventions ({sorted(map(str, references))}); recompute it with one "
                        "(`evaluate.coherence --reference ... --window ... --convention ...`, "
                        "or the comparison's command again where its runs are kept)")
    parts, window, convention = references.pop()
    reference = "/".join(parts)
    text = (f"NPMI of the top words (reference {reference}, window {window}, {convention} "
            "convention) and test "
            f"perplexity by topic count, beside the TCNLM paper's Table 4 ({dataset}, "
            f"{preset} models; its reference corpus is English Wikipedia); records "
            f"from {', '.join(map(str, args.records))}\n\n"
            + table(found, rows, sorted(set(counts) | {e["topics"] for e in found}),
                    dataset, preset))
    return emit(text, args.output)


if __name__ == "__main__":
    main()
