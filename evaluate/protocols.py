"""``python -m evaluate.protocols``: one comparison's rows under both context protocols, side
by side, from the records of two ``evaluate.compare`` runs (``--record-dir``).

The papers condition each sentence on the rest of its document, later sentences included
(``--context rest``); the 2023 re-evaluation (Zheng, Vafa and Blei, TMLR) lets a model read
only the text before the sentence (``--context preceding``), as a document-level LSTM does.
``--rest DIR`` holds the records of the comparison under ``rest``; ``--preceding DIR`` those
of the same comparison (same corpus, preset, topic count, seed, stopping rule and flags) run
with ``-- --context preceding``, which needs only the rows whose runs that flag changes: the
models that read their document's text (a context field of kind ``document``,
:data:`tcnlm_tf.data.pipeline.CONTEXT_FIELDS`). The others (the LSTMs, LCLM, which reads only
preceding sentences) are the same under both protocols and come from ``--rest``.

The table gives each row's test perplexity under each protocol as a ratio to the
document-level LSTM (row ``lstm-document``, which must be in ``--rest``), and writes it to
``--output`` (default: ``protocols.md`` in ``--preceding``).

The 2023 re-evaluation's own code trains its models under ``rest`` and scores them under
``preceding`` (revisiting-tglms, ``train.py``). ``--rest-scored-preceding DIR`` adds that
protocol as a third column: DIR holds the records of the ``rest`` comparison's topic rows
(the same settings) trained with ``--ablations``, whose ``preceding`` ablation is that
score; a row whose test perplexity there differs from its ``--rest`` record is named below
the table with the epoch where their validation perplexities first differ and where each
first halved its learning rate (the trainer is deterministic for one commit, seed, thread
count and CPU, so two runs part only where one of those differs).

``--causal-records DIR [DIR ...]`` adds rows that read no document text from other
comparisons of the same corpus and settings (under either ``--context``: such rows read
the same text under both), e.g. ``results/apnews/tied-lstm``, the tied LSTM trained on to
convergence where ``--rest`` has it at a fixed budget; they join the shared rows, named
with their directory. Every shared row says how many epochs it trained and how it stopped.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from evaluate.common import MAY_DIFFER, read_record, records_parser, row_of, row_order
from evaluate.compare import recorded_settings
from evaluate.compare_report import stop_reason
from tcnlm_tf.data.corpus import write_text
from tcnlm_tf.errors import UserError, exit_on_user_error

#: the row every ratio is to
BASELINE = "lstm-document"


def build_parser() -> argparse.ArgumentParser:
    p = records_parser("protocols", __doc__.split(": ", 1)[1],
                       "--rest results/apnews/papers-protocol --preceding results/apnews/causal",
                       "where the Markdown table goes (default: PRECEDING/protocols.md)")
    p.add_argument("--rest", type=Path, required=True,
                   help="record directory of the comparison under --context rest (every row)")
    p.add_argument("--preceding", type=Path, required=True,
                   help="record directory of the same comparison run with -- --context "
                        "preceding (the rows that read their document's text)")
    p.add_argument("--rest-scored-preceding", type=Path, default=None, metavar="DIR",
                   help="record directory of the rest comparison's topic rows run again "
                        "with --ablations: their runs trained under rest and scored with "
                        "the preceding text only (the 2023 re-evaluation's code) make a "
                        "third column (default: two columns)")
    p.add_argument("--causal-records", type=Path, nargs="+", default=[], metavar="DIR",
                   help="record directories of other comparisons of the same corpus and "
                        "settings (either --context) whose rows read no document text, e.g. "
                        "results/apnews/tied-lstm (the tied LSTM to convergence); their rows "
                        "join the shared ones, named with their directory (default: none)")
    return p


def reads_document(model: str) -> bool:
    """Whether ``--context`` changes the runs of ``model``: one of its context fields is made
    of its document's text (kind ``document``)."""
    from tcnlm_tf.data.pipeline import CONTEXT_FIELDS
    from tcnlm_tf.models.registry import spec_of

    return any(CONTEXT_FIELDS[field].kind == "document"
               for field in spec_of(model).model_class().context_inputs)


def settings(directory: Path, what: str) -> dict:
    """The settings of the comparison recorded in ``directory``, its ``--context`` (``rest``
    when its ``train.run`` flags give none) taken out of its flags into ``context``."""
    found = recorded_settings(directory, what)
    context, kept, flags = "rest", [], iter(found.get("train_args", []))
    for flag in flags:
        if flag == "--context":
            context = next(flags, context)
        elif flag.startswith("--context="):
            context = flag.split("=", 1)[1]
        else:
            kept.append(flag)
    return {**found, "train_args": kept, "context": context}


def records(directory: Path, protocol: str | None, what: str) -> dict[str, dict]:
    """Each finished run's record in ``directory`` by run name, in row order: its metrics,
    with the protocol it was trained under checked against ``protocol`` where it reads its
    document (``None``: not checked)."""
    found = {}
    paths = directory.glob("*/metrics.json")
    for path in sorted(paths, key=lambda p: row_order(p.parent.name)):
        metrics = read_record(path, what)
        if "test_perplexity" not in metrics:
            continue
        config = path.parent / "config.json"
        trained = (read_record(config, what).get("data", {}).get("context", "rest")
                   if config.is_file() else protocol)
        if reads_document(metrics["model"]) and protocol not in (None, trained):
            raise UserError(f"{what} {path.parent}: trained with --context {trained}, not "
                            f"{protocol}; give the records of the {protocol} comparison")
        found[path.parent.name] = metrics
    if not found:
        raise UserError(f"{what} {directory}: no finished run's record (*/metrics.json)")
    return found


def shared_rows(runs: dict[str, dict], fixed_budget: dict[str, int],
                label: str | None = None) -> list[tuple[str, dict, str]]:
    """(row name, its record, how it trained) of each run in ``runs`` that reads no
    document text; the name followed by `` (label)`` when ``label`` is given."""
    return [(name if label is None else f"{name} ({label})", metrics,
             f"{len(metrics.get('epochs', []))}, "
             f"{stop_reason(metrics, fixed_budget.get(row_of(name) or name))}")
            for name, metrics in runs.items() if not reads_document(metrics["model"])]


def first_halving(metrics: dict) -> int | None:
    """The epoch after which a record's learning rate was first lowered (each epoch's entry
    holds the rate its end left), or None."""
    epochs = [e for e in metrics.get("epochs", []) if "learning_rate" in e]
    start = epochs[0]["learning_rate"] if epochs else None
    return next((e["epoch"] for e in epochs if e["learning_rate"] < start), None)


def where_they_part(rest: dict, other: dict) -> str:
    """Where two records of one row part, from their epochs: the first epoch whose
    validation perplexity differs (to 0.001) and the epochs after which each first halved
    its learning rate; "" where no recorded epoch differs."""
    pairs = [(a, b) for a, b in zip(rest.get("epochs", []), other.get("epochs", []))
             if "valid_perplexity" in a and "valid_perplexity" in b]
    first = next(((a, b) for a, b in pairs
                  if round(a["valid_perplexity"], 3) != round(b["valid_perplexity"], 3)), None)
    if first is None:
        return ""
    halved = [first_halving(m) for m in (other, rest)]
    return (f"; validation first differs at epoch {first[0]['epoch']}, "
            f"{first[1]['valid_perplexity']:.3f} against {first[0]['valid_perplexity']:.3f}; "
            "learning rate first halved after epoch " + " and ".join(
                "-" if h is None else str(h) for h in halved))


def table(rest: dict[str, dict], preceding: dict[str, dict],
          shared: list[tuple[str, dict, str]], scored: dict[str, dict] | None = None) -> str:
    """The Markdown table: the rows that read their document under both protocols (with
    ``scored``, the records of ``--rest-scored-preceding``, a third column: their
    ``preceding`` ablation), then the rows the protocol does not change (``shared``, from
    :func:`shared_rows`)."""
    if BASELINE not in rest:
        raise UserError(f"--rest has no record of the document-level LSTM ({BASELINE}), "
                        "the baseline of every ratio; add that row to its comparison")
    base = rest[BASELINE]["test_perplexity"]

    def cell(metrics: dict | None, key: str = "test_perplexity") -> str:
        if metrics is None:
            return "not run | -"
        ppl = metrics[key] if key == "test_perplexity" else metrics["ablations"][key]
        return f"{ppl:.2f} | {ppl / base:.3f}"

    def third(name: str) -> str:
        if scored is None:
            return ""
        metrics = scored.get(name)
        scored_preceding = metrics is not None and "preceding" in metrics.get("ablations", {})
        return " " + cell(metrics if scored_preceding else None, "preceding") + " |"

    lines = ["| row | test ppl, rest | / document LSTM | test ppl, preceding | "
             "/ document LSTM | preceding / rest |"
             + (" trained on rest, scored on preceding | / document LSTM |" if scored else ""),
             "| --- | --- | --- | --- | --- | --- |" + (" --- | --- |" if scored else "")]
    for name, metrics in rest.items():
        if reads_document(metrics["model"]):
            other = preceding.get(name)
            change = ("-" if other is None else
                      f"{other['test_perplexity'] / metrics['test_perplexity']:.3f}")
            lines.append(f"| {name} | {cell(metrics)} | {cell(other)} | {change} |"
                         + third(name))
    for name, metrics in preceding.items():
        if name not in rest and reads_document(metrics["model"]):
            lines.append(f"| {name} | not run | - | {cell(metrics)} | - |" + third(name))
    if scored is not None:
        differ = [f"{name} ({m['test_perplexity']:.2f}, --rest "
                  f"{rest[name]['test_perplexity']:.2f}{where_they_part(rest[name], m)})"
                  for name, m in scored.items()
                  if name in rest and abs(m["test_perplexity"]
                                          - rest[name]["test_perplexity"]) >= 0.005]
        lines += ["", "The rows trained again for the third column with another test "
                  f"perplexity than their --rest record: {', '.join(differ)}" if differ else
                  "The rows trained again for the third column repeat their --rest records' "
                  "test perplexity (to 0.01)."]
    lines += ["", "The rows that read no document text (the same under both protocols; "
              "from --rest and --causal-records):", "",
              "| row | epochs, how it stopped | test ppl | / document LSTM |",
              "| --- | --- | --- | --- |"]
    lines += [f"| {name} | {trained} | {cell(m)} |" for name, m, trained in shared]
    return "\n".join(lines) + "\n"


@exit_on_user_error
def main(argv: list[str] | None = None) -> str:
    args = build_parser().parse_args(argv)
    rest, preceding = settings(args.rest, "--rest"), settings(args.preceding, "--preceding")
    if preceding["context"] != "preceding" or rest["context"] != "rest":
        raise UserError(f"--rest was run with --context {rest['context']} and --preceding "
                        f"with --context {preceding['context']}; give the rest comparison's "
                        "records first and the preceding one's second")
    # data_dir: where the corpus was, not which; fixed_budget: per row, checked below
    differ = sorted(k for k in rest.keys() | preceding.keys()
                    if k not in ("context", "data_dir", "fixed_budget")
                    and rest.get(k) != preceding.get(k))
    if differ:
        raise UserError(f"--rest and --preceding differ in {', '.join(differ)} besides "
                        "--context; the protocols compare only the same comparison")
    rest_runs = records(args.rest, "rest", "--rest")
    preceding_runs = records(args.preceding, "preceding", "--preceding")
    budgets = [rest.get("fixed_budget", {}), preceding.get("fixed_budget", {})]
    unequal = sorted(name for name in rest_runs.keys() & preceding_runs.keys()
                     if len({b.get(row_of(name)) for b in budgets}) > 1)
    if unequal:
        raise UserError(f"{', '.join(unequal)} trained under another --fixed-budget in "
                        "--rest and in --preceding; give both the same budget")
    scored = None
    if args.rest_scored_preceding is not None:
        again = settings(args.rest_scored_preceding, "--rest-scored-preceding")
        differ = sorted(k for k in rest.keys() | again.keys()
                        if k not in ("data_dir", "fixed_budget") and rest.get(k) != again.get(k))
        if differ:
            raise UserError(f"--rest and --rest-scored-preceding differ in {', '.join(differ)}; "
                            "give the records of the rest comparison's rows run again with "
                            "--ablations")
        scored = records(args.rest_scored_preceding, "rest", "--rest-scored-preceding")
    shared = shared_rows(rest_runs, budgets[0])
    for directory in args.causal_records:
        # rows that read no document text: the same under either --context
        runs = records(directory, None, "--causal-records")
        reading = sorted(name for name, m in runs.items() if reads_document(m["model"]))
        if reading:
            raise UserError(f"--causal-records {directory}: {', '.join(reading)} read their "
                            "document's text; give only comparisons of rows that read none")
        more = settings(directory, "--causal-records")
        differ = sorted(k for k in rest.keys() | more.keys() if k not in MAY_DIFFER
                        and k != "context" and rest.get(k) != more.get(k))
        if differ:
            raise UserError(f"--rest and --causal-records {directory} differ in "
                            f"{', '.join(differ)}; give comparisons of one corpus and setting")
        shared += shared_rows(runs, more.get("fixed_budget", {}), directory.name)
    text = ("Test perplexity under the papers' protocol (--context rest: the document minus "
            "the sentence) and the causal one (--context preceding: the text before the "
            f"sentence), as ratios to the document-level LSTM; records from {args.rest} and "
            f"{args.preceding}"
            + ("" if scored is None else
               f"; the third column from {args.rest_scored_preceding}: runs trained under rest "
               "and scored under preceding, as the 2023 re-evaluation's code does")
            + ("" if not args.causal_records else
               "; more rows that read no document text from "
               + ", ".join(map(str, args.causal_records)))
            + "\n\n" + table(rest_runs, preceding_runs, shared, scored))
    output = args.output or args.preceding / "protocols.md"
    write_text(output, text)
    print(text + f"\nwritten to {output}")
    return text


if __name__ == "__main__":
    main()
