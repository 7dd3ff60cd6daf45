"""``python -m evaluate.report``: the results report (``RESULTS.md``), written from the
records under ``results/`` alone.

Every number in the report is read from a record (a row's ``metrics.json``, ``config.json``,
``coherence.json`` and ``ablations.json``, a comparison's ``compare.json``; the layout is in
``results/README.md``) or is a paper's published value (:mod:`evaluate.published`). The
tables of the records commands (``evaluate.beside_paper``, ``evaluate.protocols``,
``evaluate.topic_counts``, ``evaluate.table_6``, ``evaluate.output_layers``) are their own
output, so the report says what those commands say. A section whose records are not there
yet says so instead of a number. ``make results`` runs this command; a test fails when
``RESULTS.md`` differs from what it writes, so the report cannot drift from the records.

The summary gives each paper claim a status by a stated rule: an absolute number is
*reproduced* within 2 % of the paper's; a claim of the form "A beats B" is *reproduced* when
the ratio A / B is on the paper's side of 1 and *not reproduced* otherwise. Once the
three-seed comparison is complete, the APNEWS claims it covers read its paired bootstrap
95 % intervals instead (Table 6's claim those of its own three seeds, the MoS claim those of
the converged decoder against the tied LSTM's seeds), and "A beats B" is *reproduced* only
where the whole interval lies on the paper's side of 1 (:func:`status_interval`). A status
from one seed is one run's outcome, and the noise section says which differences that
cannot carry.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import math
import statistics
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from evaluate import (beside_paper, compare_report, output_layers, protocols, table_6,
                      topic_counts)
from evaluate.common import read_record, row_order
from evaluate.compare_report import (DOCUMENT_LSTM, SENTENCE_LSTM, RunKey, commit_cell,
                                     stop_reason)
from evaluate.intervals import Interval, document_scores, paired_bootstrap
from evaluate.published import SDLM_TABLE_1, TABLE_2, TABLE_4, TABLE_6
from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.metrics.coherence import topic_diversity
from tcnlm_tf.runs.provenance import commits

#: where the records live, relative to the repository root, and the report's default output
RESULTS, REPORT = Path("results"), Path("RESULTS.md")
#: the records the report reads, relative to the repository root
PAPERS = RESULTS / "apnews/papers-protocol"
TIED = RESULTS / "apnews/tied-lstm"
CAUSAL = RESULTS / "apnews/causal"
REST_SCORED_PRECEDING = RESULTS / "apnews/rest-scored-preceding"
TOPIC_COUNTS = RESULTS / "apnews/topic-counts"
TABLE6 = RESULTS / "apnews/table6"
SEEDS = RESULTS / "apnews/seeds"
#: the output layer held equal: the tied full softmax and the untied full softmax
TIED_SOFTMAX, FULL_SOFTMAX = RESULTS / "apnews/tied-softmax", RESULTS / "apnews/full-softmax"
#: the sentence-mode rows trained with the state carried across a long sentence's pieces
CARRY = RESULTS / "apnews/long-sentences-carry"
#: MoS and SDLM (WordNet) to convergence
DECODERS = RESULTS / "apnews/decoders"
#: the comparisons of one seed to convergence under each precision, and their rows
PRECISIONS = {precision: RESULTS / f"apnews/precision-{precision}"
              for precision in ("float32", "mixed_bfloat16")}
PRECISION_ROWS = ("lstm", "tcnlm")
#: the most test perplexity the default precision may cost against float32 (a ratio)
PRECISION_TOLERANCE = 1.01
PD_BASELINE = RESULTS / "peoples-daily/tied-medium/pd-tied-medium-none"
TORCH_REFERENCE = RESULTS / "peoples-daily/pytorch-reference/pd-tied-medium-torch.jsonl"
#: Table 2's topic-guided rows (the ones the paper says beat the basic LSTM)
TOPIC_ROWS = ("tcnlm", "tdlm", "lda_lstm", "lclm", "topic_rnn")
#: the rows that read their document's text (the ones the 2023 re-evaluation trained)
DOCUMENT_ROWS = ("tcnlm", "tdlm", "lda_lstm", "topic_rnn")
#: the rows of the decoder comparison (the tied LSTM is the decoders' baseline)
DECODER_ROWS = (SENTENCE_LSTM, "lstm-tied", "lstm-mos", "sdlm")
#: the rows of the campaign's three-seed comparison and of its Table 6 comparison
SEED_ROWS = (SENTENCE_LSTM, DOCUMENT_LSTM, "lstm-tied", "tdlm", "lda_lstm", "tcnlm", "topic_rnn")
TABLE6_ROWS = (SENTENCE_LSTM, "tcnlm", "tcnlm-constant-t", "moe")
#: the rows of the output-layer, long-sentence and decoder comparisons
TIED_SOFTMAX_ROWS = (DOCUMENT_LSTM, "tdlm", "lda_lstm", "tcnlm")
FULL_SOFTMAX_ROWS = (SENTENCE_LSTM, DOCUMENT_LSTM)
CARRY_ROWS = (SENTENCE_LSTM, "tdlm")
CONVERGED_DECODER_ROWS = ("lstm-mos", "sdlm")
#: the comparisons over seeds, and their rows
SEEDED = {SEEDS: SEED_ROWS, TABLE6: TABLE6_ROWS}
#: the summary table's columns
CLAIM_HEADER = ["claim", "paper", "here", "status", "section"]
#: the README's copy of the summary table lies between these two lines
README_START, README_END = "<!-- results table: make results -->", "<!-- end of results table -->"
#: an absolute number within this fraction of the paper's counts as reproduced
TOLERANCE = 0.02


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m evaluate.report", allow_abbrev=False,
        description="Write the results report (RESULTS.md) from the records under results/.",
        epilog="example: python -m evaluate.report --check  (exit 1 if RESULTS.md is stale)")
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                   help="the repository root holding results/ (default: this checkout)")
    p.add_argument("--output", type=Path, default=None,
                   help="where the report goes (default: RESULTS.md under --root); the "
                   "results table between README.md's markers is always rewritten")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if the report or the README's results table "
                   "differs from what the records give")
    return p


# ---------------------------------------------------------------------------------------
# reading records


def read_json(path: Path) -> dict:
    """A record's JSON file as a dict (a one-line error naming it where it is unreadable)."""
    return read_record(path, "evaluate.report")


@contextlib.contextmanager
def reading(root: Path) -> Iterator[None]:
    """Read the records under ``root`` (relative paths resolve there), each comparison's
    once (:data:`CACHED`: the records and their intervals are cached for the duration)."""
    for cached in CACHED:
        cached.cache_clear()
    try:
        with contextlib.chdir(root):
            yield
    finally:
        for cached in CACHED:
            cached.cache_clear()


@functools.lru_cache(maxsize=None)
def finished_rows(comparison: Path) -> dict[str, dict]:
    """Run name -> its ``metrics.json``, for every record of ``comparison`` with a test
    perplexity (an empty dict where the comparison has no records yet); read once per
    :func:`reading`."""
    if not comparison.is_dir():
        return {}
    rows = {}
    for metrics in sorted(comparison.glob("*/metrics.json"),
                          key=lambda path: row_order(path.parent.name)):
        found = read_json(metrics)
        if found.get("test_perplexity") is not None:
            rows[metrics.parent.name] = found
    return rows


def test_ppl(comparison: Path, row: str) -> float | None:
    """The recorded test perplexity of ``row`` in ``comparison``, or None."""
    return finished_rows(comparison).get(row, {}).get("test_perplexity")


def diversity(comparison: Path, row: str, n: int = 10) -> float | None:
    """The topic diversity at ``n`` of ``row``'s topics in ``comparison``, from the top words
    its ``topics.txt`` records (``topic k: w1 w2 ...``), or None without that file."""
    path = comparison / row / "topics.txt"
    if not path.is_file():
        return None
    topics = [line.split(":", 1)[1].split() for line in
              path.read_text(encoding="utf-8").splitlines() if ":" in line]
    return topic_diversity(topics, n)


def mean_npmi(comparison: Path, row: str) -> float | None:
    """The recorded mean NPMI of ``row``'s topics in ``comparison`` (``coherence.json``)."""
    path = comparison / row / "coherence.json"
    return read_json(path).get("mean") if path.is_file() else None


def command_output(main: Callable[[list[str]], str], argv: list[str]) -> str:
    """The Markdown a records command returns, without what it prints; ``--output`` (where
    the command has one) goes to a scratch file so that no record changes."""
    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(io.StringIO()):
        return main([*argv, "--output", str(Path(scratch) / "out.md")]).strip()


# ---------------------------------------------------------------------------------------
# formatting


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a / b


def status_beats(here: float | None, paper: float) -> str:
    """The status of a claim "A beats B" whose ratio A / B is ``paper`` there, ``here``
    here."""
    if here is None:
        return "pending (not recorded yet)"
    return "reproduced" if (here < 1) == (paper < 1) else "not reproduced"


def status_interval(here: Interval | None, paper: float) -> str:
    """The status of a claim "A beats B" whose ratio A / B is ``paper`` there, from the
    95 % interval of A / B here: as :func:`status_beats` where the interval lies on one side
    of 1; where it holds 1, not reproduced, as no difference."""
    if here is None or here.high < 1 or here.low > 1:
        return status_beats(None if here is None else here.ratio, paper)
    return "not reproduced (no difference: the interval holds 1)"


def status_value(here: float | None, paper: float) -> str:
    """The status of an absolute number: reproduced within :data:`TOLERANCE` of the
    paper's."""
    if here is None:
        return "pending (not recorded yet)"
    return "reproduced" if abs(here / paper - 1) <= TOLERANCE else "not reproduced"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# sections


def claims() -> list[list[str]]:
    """One row per paper claim: the claim, the paper's value, ours, the status and a link
    to the report's section (``#anchor``)."""
    lstm, tcnlm = test_ppl(PAPERS, SENTENCE_LSTM), test_ppl(PAPERS, "tcnlm")
    paper2 = TABLE_2[("apnews", "small")]
    paper_tcnlm = paper2["TCNLM"][50] / paper2["basic-LSTM"]
    paper_topic_rnn = paper2["TCNLM"][50] / paper2["Topic-RNN"][50]
    to_lstm, to_topic_rnn = seed_intervals(SENTENCE_LSTM), seed_intervals("topic_rnn")
    to_document = seed_intervals(DOCUMENT_LSTM)
    if to_lstm:         # the three seeds, each topic row counted beyond the noise only
        seeded = [row for row in TOPIC_ROWS if row in to_lstm]
        beating = [row for row in seeded if to_lstm[row].high < 1]
        left_out = [row for row in TOPIC_ROWS if row not in seeded]
        every = f"{len(beating)} of {len(seeded)} (3 seeds, beyond the noise" + (
            f"; {', '.join(left_out)} not in them)" if left_out else ")")
        recorded = seeded
    else:
        recorded = [row for row in TOPIC_ROWS if test_ppl(PAPERS, row) is not None]
        beating = [row for row in recorded
                   if (ppl := test_ppl(PAPERS, row)) is not None and lstm and ppl < lstm]
        every = f"{len(beating)} of {len(recorded)}"
    seeded_topics = [to_document[row] for row in DOCUMENT_ROWS if row in to_document]
    best_seeded = min(seeded_topics, key=lambda interval: interval.ratio, default=None)
    lda = mean_npmi(REST_SCORED_PRECEDING, "lda_lstm")
    npmi = ratio(mean_npmi(REST_SCORED_PRECEDING, "tcnlm"), lda)
    paper4 = TABLE_4["apnews"][50]
    paper_npmi = paper4["TCNLM(s)"] / paper4["LDA"]
    paper6 = TABLE_6["apnews"]["tcnlm"] / TABLE_6["apnews"][SENTENCE_LSTM]
    six = seed_intervals(SENTENCE_LSTM, TABLE6).get("tcnlm")
    mos_paper = SDLM_TABLE_1["+ MoS"]["test"] / SDLM_TABLE_1["Tied LSTM (medium)"]["test"]
    mos = (decoder_intervals().get("lstm-mos")
           if complete(DECODERS, CONVERGED_DECODER_ROWS) and complete(SEEDS, SEED_ROWS)
           else None)
    document = test_ppl(PAPERS, DOCUMENT_LSTM)
    causal = {row: ratio(test_ppl(CAUSAL, row), document) for row in DOCUMENT_ROWS}
    best = min((r for r in causal.values() if r is not None), default=None)
    pd = read_json(PD_BASELINE / "metrics.json") if (
        PD_BASELINE / "metrics.json").is_file() else {}
    pd_paper = SDLM_TABLE_1["Tied LSTM (medium)"]["test"]
    return [
        ["SDLM Table 1: tied 2×650 LSTM on People's Daily, test perplexity",
         number(pd_paper), number(pd.get("test_perplexity")),
         status_value(pd.get("test_perplexity"), pd_paper),
         "[People's Daily](#sdlm-table-1-peoples-daily)"],
        ["SDLM Table 1: the sememe decoder (HowNet) beats the tied LSTM (test ppl ratio)",
         number(SDLM_TABLE_1["+ SDLM"]["test"] / pd_paper, 3), "-",
         "not testable here (HowNet is not obtainable)",
         "[Not run here](#not-run-here-and-why)"],
        ["SDLM Table 1: the MoS decoder beats the tied LSTM (test ppl ratio; here on the "
         "APNEWS sample, MoS seed 0 against the tied LSTM's 3 seeds)", number(mos_paper, 3),
         "-" if mos is None else str(mos), status_interval(mos, mos_paper),
         "[Decoders](#the-decoders-to-convergence)"],
        ["TCNLM Table 2 (APNEWS, small, T = 50): TCNLM / basic LSTM", number(paper_tcnlm, 3),
         *(seeded_claim(to_lstm["tcnlm"], paper_tcnlm) if "tcnlm" in to_lstm else
           [number(ratio(tcnlm, lstm), 3), status_beats(ratio(tcnlm, lstm), paper_tcnlm)]),
         "[Table 2](#tcnlm-table-2-apnews-sample)"],
        ["TCNLM Table 2, its one same-codebase ratio: TCNLM / Topic-RNN",
         number(paper_topic_rnn, 3),
         *(seeded_claim(to_topic_rnn["tcnlm"], paper_topic_rnn) if "tcnlm" in to_topic_rnn
           else [number(ratio(tcnlm, test_ppl(PAPERS, "topic_rnn")), 3), status_beats(
               ratio(tcnlm, test_ppl(PAPERS, "topic_rnn")), paper_topic_rnn)]),
         "[Table 2](#tcnlm-table-2-apnews-sample)"],
        ["TCNLM Table 2: every topic-guided model beats the basic LSTM",
         f"{len(TOPIC_ROWS)} of {len(TOPIC_ROWS)}", every,
         ("reproduced" if recorded and len(beating) == len(recorded) else "not reproduced")
         if recorded else "pending (not recorded yet)", "[Table 2](#tcnlm-table-2-apnews-sample)"],
        ["TCNLM Table 4: TCNLM's topics are more coherent than LDA's (NPMI ratio)",
         number(paper_npmi, 3), number(npmi, 3), status_beats(
             None if npmi is None else 1 / npmi, 1 / paper_npmi),
         "[Table 4](#tcnlm-table-4-topic-coherence)"],
        ["TCNLM Table 6 (1×100, T = 30): TCNLM / LSTM, one codebase", number(paper6, 3),
         *(seeded_claim(six, paper6) if six else ["-", status_beats(None, paper6)]),
         "[Table 6](#tcnlm-table-6-one-codebase)"],
        ["2023 re-evaluation: no topic-guided model beats an LSTM at convergence "
         "(best topic row / document LSTM, causal protocol)", "≥ 1", number(best, 3),
         "pending (not recorded yet)" if best is None else
         ("reproduced" if best >= 1 else "not reproduced"),
         "[2023 re-evaluation](#context-protocols-and-the-2023-re-evaluation)"],
        ["2023 re-evaluation under the papers' protocol: no topic-guided model beats the "
         "document LSTM (best topic row / document LSTM, 3 seeds)", "≥ 1",
         "-" if best_seeded is None else f"{best_seeded} (3 seeds)",
         "pending (not recorded yet)" if best_seeded is None else
         ("not reproduced" if any(i.high < 1 for i in seeded_topics) else "reproduced"),
         "[Seed noise](#seed-noise)"],
    ]


def seeded_claim(interval: Interval, paper: float) -> list[str]:
    """The "here" and "status" cells of a claim "A beats B" (the paper's A / B: ``paper``)
    from the 95 % ``interval`` of A / B over the three seeds."""
    return [f"{interval} (3 seeds)", status_interval(interval, paper)]


def summary() -> str:
    return ("## Summary\n\n"
            "One line per claim of the papers. Status: an absolute number is *reproduced* "
            f"within {TOLERANCE:.0%} of the paper's; a claim \"A beats B\" is *reproduced* when "
            "A / B lies on the paper's side of 1. A row marked *3 seeds* gives A / B over "
            "the three-seed comparison with its paired bootstrap 95 % interval, and holds it "
            "reproduced only where the interval lies on the paper's side of 1; every other "
            "row is one seed (see [Seed noise](#seed-noise)). The APNEWS rows are trained on "
            "a 1/30 sample of the paper's corpus, so only ratios compare with the paper.\n\n"
            + markdown_table(CLAIM_HEADER, claims()))


def readme_table(root: Path) -> str:
    """The summary table as the README shows it, its links into ``RESULTS.md``."""
    with reading(root):
        rows = claims()
    return markdown_table(CLAIM_HEADER, [[cell.replace("](#", f"]({REPORT}#") for cell in row]
                                         for row in rows])


def with_readme_table(readme: str, table: str) -> str:
    """``readme`` with the text between its two results markers replaced by ``table``."""
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise UserError(f"README.md has no {README_START} ... {README_END} block for the "
                        "results table; put the two markers where the table goes")
    return readme[:start + len(README_START)] + "\n" + table + "\n" + readme[end:]


def setup() -> str:
    settings = read_json(PAPERS / "compare.json")
    lstm = finished_rows(PAPERS).get(SENTENCE_LSTM, {})
    data = read_json(PAPERS / SENTENCE_LSTM / "config.json")["data"]
    pd_config = read_json(PD_BASELINE / "config.json")
    train, model = pd_config["train"], pd_config["model"]
    flags = " ".join(settings.get("train_args", []))
    lines = [
        "## Setup", "",
        f"- **APNEWS sample** (`{PAPERS.parent}`): {lstm.get('train_tokens_per_epoch', 0):,} "
        f"training targets per epoch, {lstm.get('test_tokens', 0):,} test targets; "
        f"{settings['preset']} preset (1×600 LSTM), T = {settings['num_topics']} topics, seed "
        f"{settings['seed']}; the LM vocabulary is every training word seen at least "
        f"{data['min_freq']} times, the topic vocabulary those in at least "
        f"{data['topic_min_docs']} training documents, less the stop words and the most "
        f"frequent {data['topic_top_fraction']:.1%} of word types; trained until the "
        "validation perplexity stops improving "
        f"(patience {settings['patience']}, the learning rate halved on each plateau, at most "
        f"{settings['max_epochs']} epochs; a row marked *fixed budget* trained a set number of "
        f"epochs instead), float32, train.run flags `{flags}`, the adaptive softmax of the "
        "TCNLM paper for every row but Topic-RNN (full softmax), the tied LSTM, MoS and SDLM.",
        f"- **People's Daily** (`{PD_BASELINE.parent}`): the SDLM authors' tied baseline: "
        f"{model['num_layers']}×{model['hidden_size']} LSTM, dropout {model['dropout']}, "
        f"{train['optimizer'].upper()} from learning rate {train['learning_rate']:g}, gradient "
        f"norm clipped at {train['clip_norm']:g}, batch {train['batch_size']} × "
        f"{pd_config['data']['seq_len']}, {train['epochs']} epochs, the learning rate halved when "
        "validation does not improve.",
        "- **Where a run trained**: a record that stores `provenance` in its `metrics.json` "
        "names the commit, command, thread count and CPU: those of the three-seed comparison "
        "and of the comparisons after it do (their sections name the CPUs). The one-seed "
        "records of the other tables do not store it: they trained on 2-core x86-64 machines "
        "(AVX-512), two trainings at a time.",
        "- **Perplexity** is exp(total negative log-likelihood / number of predicted targets) "
        "over the whole test split ([docs/evaluation.md](docs/evaluation.md)).",
    ]
    return "\n".join(lines)


def complete(comparison: Path, rows: tuple[str, ...]) -> bool:
    """Whether every run of ``comparison`` (each of ``rows`` at each seed of its
    ``compare.json``) has a finished record. A comparison still training enters the report
    only once it is complete, so that a record landing meanwhile leaves the report as it is."""
    settings = comparison / "compare.json"
    if not settings.is_file():
        return False
    seeds = read_json(settings).get("seed")
    names = {f"{row}-seed{seed}" for row in rows for seed in seeds} if isinstance(
        seeds, list) else set(rows)
    return names <= set(finished_rows(comparison))


def seed_entries(comparison: Path = SEEDS) -> dict[tuple, dict] | None:
    """The rows of a comparison over seeds (:data:`SEEDED`; by default the three-seed
    comparison): :func:`evaluate.compare_report.aggregate` of its records, keyed by (row,
    None), once every run of it is recorded (:func:`complete`), else None."""
    if not complete(comparison, SEEDED[comparison]):
        return None
    return compare_report.aggregate({
        RunKey(name.rsplit("-seed", 1)[0], None, int(name.rsplit("-seed", 1)[1]), None): metrics
        for name, metrics in finished_rows(comparison).items()}, {})


@functools.lru_cache(maxsize=None)
def seed_intervals(reference: str, comparison: Path = SEEDS) -> dict[str, Interval]:
    """Row -> the paired bootstrap 95 % interval of its test-perplexity ratio to row
    ``reference`` over a comparison over seeds (default: the three-seed comparison); empty
    until that is complete. Computed once per :func:`reading` (the summary, Table 2 and the
    noise section share them)."""
    entries = seed_entries(comparison)
    if entries is None:
        return {}
    return {row: bounds for (row, _), bounds in
            compare_report.intervals(entries, reference).items()}


@functools.lru_cache(maxsize=None)
def joined_intervals(reference: str, *groups: tuple[str, Path, tuple[str, ...]]
                     ) -> dict[str, Interval]:
    """Label -> the paired bootstrap 95 % interval of its test-perplexity ratio to the group
    labelled ``reference``, over runs joined from several comparisons: each group a label,
    a comparison and the names of its runs there (one per seed), all scored on the same test
    documents. Empty where a run is not recorded or has no per-document scores."""
    scores = {}
    for label, comparison, names in groups:
        found = [document_scores(finished_rows(comparison).get(name, {})) for name in names]
        if any(documents is None for documents in found):
            return {}
        scores[label] = found
    try:
        return paired_bootstrap(scores, reference)
    except ValueError as error:
        raise UserError(f"evaluate.report: {', '.join(str(g[1]) for g in groups)}: {error}"
                        ) from None


def interval_cell(bounds: dict[str, Interval], label: str) -> str:
    """The interval of ``label`` in ``bounds`` as a table cell, "-" where it has none."""
    return str(bounds[label]) if label in bounds else "-"


def seed_noise() -> str:
    """The seed-noise section: once every run of the three-seed comparison is recorded, the
    spread of each row over its seeds, the comparison's table (mean ± standard deviation,
    epochs and stops per seed, each row's paired bootstrap 95 % interval of its ratio to
    the document LSTM, the commits) and :func:`seed_claims`; until then, that it is
    training."""
    text = ["## Seed noise", "",
            "Every other table of this report has one seed per row, so a difference between "
            "two rows of a few per cent is one run's outcome, not a ranking."]
    entries = seed_entries()
    if entries is None:
        text.append(f"The three-seed comparison of {', '.join(SEED_ROWS)} (`{SEEDS}`) is "
                    "training; it enters this report when all its runs are recorded.")
        return "\n".join(text)
    by_row: dict[str, list[float]] = {}
    for name, metrics in finished_rows(SEEDS).items():
        by_row.setdefault(name.rsplit("-seed", 1)[0], []).append(metrics["test_perplexity"])
    rows = [[row, str(len(values)), number(statistics.mean(values)),
             f"{(max(values) - min(values)) / statistics.mean(values):.1%}"]
            for row, values in by_row.items()]
    return "\n".join(text + [
        "", f"The spread over seeds (`{SEEDS}`):", "",
        markdown_table(["row", "seeds", "mean test ppl", "spread (max − min) / mean"], rows),
        "", f"The comparison over its seeds, from the same records (`{SEEDS}`, the table "
        "`evaluate.compare` writes):", "",
        compare_report.table(entries, {}, DOCUMENT_LSTM).rstrip(), "",
        trained_on(finished_rows(SEEDS)), "",
        seed_claims(seed_intervals(DOCUMENT_LSTM))])


def campaign_records(*comparisons: Path) -> dict[str, dict]:
    """The finished records of ``comparisons`` by ``comparison/run`` name (the name
    :func:`trained_on` gives them)."""
    return {f"{c.name}/{name}": metrics for c in comparisons
            for name, metrics in finished_rows(c).items()}


def trained_on(records: dict[str, dict]) -> str:
    """Which CPUs the runs of ``records`` (run name -> ``metrics.json``) trained on, from
    each record's provenance (a run resumed on another CPU is named under each); one
    sentence, the most common CPU as "the other runs"."""
    by_cpu: dict[str, list[str]] = {}
    for name, metrics in records.items():
        cpus = {entry.get("cpu") or "not recorded" for entry in metrics.get("provenance", [])}
        for cpu in sorted(cpus or {"not recorded"}):
            by_cpu.setdefault(cpu, []).append(name)
    ranked = sorted(by_cpu, key=lambda cpu: -len(by_cpu[cpu]))
    if ranked == ["not recorded"]:
        return "The records do not name the CPUs their runs trained on."
    if len(ranked) == 1:
        return (f"All {len(records)} runs trained on {ranked[0]} (each record's "
                "provenance).")
    others = "; ".join(f"{cpu}: {', '.join(by_cpu[cpu])}" for cpu in ranked[1:])
    return (f"The CPUs the runs trained on (each record's provenance): {others}; "
            f"{ranked[0]}: the other {len(by_cpu[ranked[0]])}. Another CPU makes oneDNN "
            "pick other float32 kernels, so a run's numbers depend on its CPU as well as its "
            "seed: in the last bits at first and, through training, in its perplexity "
            "([docs/training.md](docs/training.md#seeds-and-determinism)); the spread over "
            "seeds includes that.")


def seed_claims(bounds: dict[str, Interval], against: str = "the document LSTM") -> str:
    """What the paired bootstrap intervals of the rows' ratios to a reference row
    (``bounds``, by row; the document LSTM's own is left out) support, in three sentences:
    the rows below the reference, those whose interval holds 1 (no difference) and those
    above it."""
    if not bounds:
        return "No interval: the records hold no per-document test scores."
    side = {"below": [], "no difference": [], "above": []}
    for row, interval in bounds.items():
        if row != DOCUMENT_LSTM:
            side["below" if interval.high < 1 else "above" if interval.low > 1
                 else "no difference"].append(f"{row} ({interval})")
    named = lambda rows: "; ".join(rows) or "none"      # noqa: E731
    return (f"Against {against}, by the 95 % intervals above: lower perplexity "
            f"beyond the noise of test documents and seeds: {named(side['below'])}. No "
            f"difference (the interval holds 1): {named(side['no difference'])}. Higher: "
            f"{named(side['above'])}.")


def output_layer_section() -> str:
    """The output layer held equal: every row of the three-seed, tied-softmax and
    full-softmax comparisons beside the LSTMs with its output layer
    (:mod:`evaluate.output_layers`), and what the intervals to the document LSTM with the
    same layer support, once the three are complete."""
    head = ["## The output layer held equal", "",
            "The output layer alone moves an LSTM by more than the topic rows' gains, and "
            "Table 2's rows do not share one: Topic-RNN has an untied full softmax, "
            "`lstm-tied` a tied one, every other row the adaptive softmax. The topic rows "
            "and the document LSTM are trained again with the tied full softmax "
            "(`--decoder softmax --tie-embeddings`), the sentence and document LSTMs with "
            "Topic-RNN's untied full softmax (`--decoder softmax`), seed 0, and every row is "
            "divided by the LSTMs with its own output layer (the three-seed comparison's rows "
            "with their three seeds)."]
    comparisons = ((SEEDS, SEED_ROWS), (TIED_SOFTMAX, TIED_SOFTMAX_ROWS),
                   (FULL_SOFTMAX, FULL_SOFTMAX_ROWS))
    if not all(complete(c, rows) for c, rows in comparisons):
        return "\n".join(head + ["", "Not recorded yet (" + " and ".join(
            f"`{c}`" for c, _ in comparisons[1:]) + ", comparisons of `results/campaign.sh`; "
            "the section enters when all their runs are recorded)."])
    directories = [str(c) for c, _ in comparisons]
    cells = output_layers.groups([run for c in directories
                                  for run in output_layers.runs(Path(c))])
    bounds = {}
    for row, layer in cells:
        found = output_layers.cell_ratio(cells, (row, layer),
                                         output_layers.same_layer_bases(cells, layer)[1])
        if isinstance(found, Interval):
            bounds[f"{row} ({layer})"] = found
    return "\n".join(head + [
        "", command_output(output_layers.main, ["--records", *directories]), "",
        seed_claims(bounds, "the document LSTM with the same output layer"), "",
        trained_on(campaign_records(TIED_SOFTMAX, FULL_SOFTMAX))])


def table_2() -> str:
    records = [str(PAPERS), str(TIED)]
    table = command_output(beside_paper.main, ["--records", *records])
    lstm, document = test_ppl(PAPERS, SENTENCE_LSTM), test_ppl(PAPERS, DOCUMENT_LSTM)
    below_lstm = [r for r in TOPIC_ROWS if (p := test_ppl(PAPERS, r)) and p < lstm]
    below_document = [r for r in TOPIC_ROWS if (p := test_ppl(PAPERS, r)) and p < document]
    to_lstm, to_document = seed_intervals(SENTENCE_LSTM), seed_intervals(DOCUMENT_LSTM)
    beyond = lambda bounds: ", ".join(   # noqa: E731
        f"{row} ({bounds[row]})" for row in TOPIC_ROWS if row in bounds and bounds[row].high < 1
    ) or "none"
    seeded = (f" Over three seeds ([Seed noise](#seed-noise)), by the paired bootstrap 95 % "
              f"intervals, beyond the noise: below the sentence LSTM {beyond(to_lstm)}; below "
              f"the document LSTM {beyond(to_document)}." if to_lstm else "")
    return "\n".join([
        "## TCNLM Table 2 (APNEWS sample)", "",
        table, "",
        f"Topic-guided rows below the sentence LSTM: {', '.join(below_lstm) or 'none'}; below "
        f"the document LSTM: {', '.join(below_document) or 'none'} (one seed each).{seeded} The "
        "paper's basic-LSTM, LDA+LSTM, LCLM and TDLM numbers are copied from Lau et al. "
        "2017, another codebase; its only same-codebase ratios are TCNLM against Topic-RNN "
        "here and [Table 6](#tcnlm-table-6-one-codebase). Every row but `topic_rnn` "
        "(full softmax), `lstm-tied` (tied full softmax), `lstm-mos` and `sdlm` has the "
        "adaptive softmax, and the output layer alone moves an LSTM by more than the topic "
        "rows' gains (`lstm` against `lstm-tied` of `tied-lstm`)."])


def context_protocols() -> str:
    missing = [str(c) for c in (PAPERS, CAUSAL, REST_SCORED_PRECEDING) if not finished_rows(c)]
    table = (f"Not recorded yet: {', '.join(missing)}." if missing else None) or command_output(
        protocols.main, [
        "--rest", str(PAPERS), "--preceding", str(CAUSAL),
        "--rest-scored-preceding", str(REST_SCORED_PRECEDING),
        "--causal-records", str(TIED)])
    return "\n".join([
        "## Context protocols and the 2023 re-evaluation", "",
        "The papers condition a sentence on the rest of its document, later sentences "
        "included (`--context rest`); Zheng, Vafa and Blei (TMLR 2023) let a model read only "
        "the text before it (`--context preceding`), as a document-level LSTM does, and "
        "found that no topic-guided model beat an LSTM baseline at convergence. Their code "
        "trains under `rest` and scores under `preceding` (the third column).", "",
        table, "", "Two records of one row part only where their commit, seed, thread count "
        "or CPU differ ([docs/training.md](docs/training.md#seeds-and-determinism)); these "
        "one-seed records predate the provenance that would say which, and a difference in "
        "the first epoch's fourth or fifth digit grows to a percent or two once a learning-"
        "rate halving falls in another epoch. The number this report's claims use for each "
        "of these rows is the three-seed comparison's mean, all seeds of a row on one commit "
        "([Seed noise](#seed-noise))."])


def long_sentences() -> str:
    """The state reset or carried across the pieces of a long sentence: the sentence LSTM
    and TDLM under ``--long-sentences carry`` beside their ``reset`` runs (the three-seed
    comparison's seed 0) and the document LSTM (seed 0), once both are complete."""
    head = ["## Long sentences: the state reset or carried", "",
            "Sentence mode cuts a sentence longer than `--seq-len` (30 targets) into pieces. "
            "The papers' protocol, the TDLM authors' code, reads each piece from a zero state "
            "(`--long-sentences reset`, the default, and every other table's setting); Zheng, "
            "Vafa and Blei's code carries the state from piece to piece (`carry`), as the "
            "document LSTM carries it from sentence to sentence. Trained under `carry` (seed "
            "0), beside their `reset` runs and the document LSTM of the three-seed comparison "
            "(seed 0), the sentence LSTM and TDLM show how much of the document LSTM's lead "
            "comes from the resets rather than from the document's context. The default stays "
            "`reset`, the protocol of the papers' published numbers."]
    if not (complete(CARRY, CARRY_ROWS) and complete(SEEDS, SEED_ROWS)):
        return "\n".join(head + ["", f"Not recorded yet (`{CARRY}`, a comparison of "
                                 "`results/campaign.sh`)."])
    rows, bounds = [], {}
    for row in CARRY_ROWS:
        groups = (("reset", SEEDS, (f"{row}-seed0",)), ("carry", CARRY, (row,)),
                  ("document", SEEDS, (f"{DOCUMENT_LSTM}-seed0",)))
        to_reset, bounds[row] = (joined_intervals("reset", *groups),
                                 joined_intervals("document", *groups))
        reset, carry = (finished_rows(SEEDS)[f"{row}-seed0"], finished_rows(CARRY)[row])
        rows.append([row, *(f"{number(m['test_perplexity'])} ({len(m.get('epochs', []))} "
                            f"epochs, {stop_reason(m, None)})" for m in (reset, carry)),
                     interval_cell(to_reset, "carry"), interval_cell(bounds[row], "reset"),
                     interval_cell(bounds[row], "carry")])
    text = head + ["", f"`{CARRY}` (carry) and `{SEEDS}` (reset, the document LSTM), seed 0, "
                   "paired bootstrap 95 % intervals over the test documents:", "",
                   markdown_table(["row", "reset: test ppl", "carry: test ppl",
                                   "carry / reset", "reset / document LSTM",
                                   "carry / document LSTM"], rows)]
    lead = bounds[SENTENCE_LSTM]
    if "reset" in lead and lead["reset"].ratio > 1:
        share = math.log(lead["reset"].ratio / lead["carry"].ratio) / math.log(
            lead["reset"].ratio)
        text += ["", f"The sentence LSTM's test perplexity is {lead['reset']} times the "
                 f"document LSTM's under `reset` and {lead['carry']} times under `carry`: of "
                 f"the document LSTM's lead, the resets inside long sentences make "
                 f"{share:.0%} (in log perplexity, one seed), the document's context the rest."]
    return "\n".join(text + ["", trained_on(campaign_records(CARRY))])


def table_4() -> str:
    table = command_output(topic_counts.main, [
        "--records", str(REST_SCORED_PRECEDING), str(TOPIC_COUNTS)])
    lda = mean_npmi(REST_SCORED_PRECEDING, "lda_lstm")
    paper = TABLE_4["apnews"][50]
    rows = []
    for row, name in (("lda_lstm", "LDA"), ("tcnlm", "TCNLM(s)"), ("topic_rnn", "Topic-RNN(s)"),
                      ("tdlm", "TDLM(s)")):
        here = mean_npmi(REST_SCORED_PRECEDING, row)
        rows.append([name.removesuffix("(s)"), number(here, 4), number(ratio(here, lda), 3),
                     number(diversity(REST_SCORED_PRECEDING, row), 3),
                     number(paper[name], 3), number(paper[name] / paper["LDA"], 3)])
    return "\n".join([
        "## TCNLM Table 4 (topic coherence)", "",
        table, "",
        "The paper's NPMI uses English Wikipedia as the reference corpus, ours the APNEWS "
        "sample's training split, so the values do not compare; ratios to LDA on the same "
        f"reference do (T = 50, LDA's topics being LDA+LSTM's; `{REST_SCORED_PRECEDING}`). "
        "Diversity is the share of distinct words among all topics' top 10 (from each "
        "record's `topics.txt`; the paper gives none): low coherence with high diversity is "
        "many different poor topics, high coherence with low diversity a few good ones "
        "repeated.",
        "",
        markdown_table(["topics of", "NPMI here", "/ LDA here", "diversity, top 10 here",
                        "paper (Table 4, small)",
                        "/ LDA in the paper"], rows)])


def table_6_section() -> str:
    head = ["## TCNLM Table 6 (one codebase)", "",
            "Table 6 is the TCNLM paper's one table whose rows the authors trained in one "
            "codebase: 1×100 LSTMs, 30 topics."]
    if not complete(TABLE6, TABLE6_ROWS):
        paper = TABLE_6["apnews"]
        return "\n".join(head + ["", f"Not recorded yet (`{TABLE6}`, a comparison of "
                                 "`results/campaign.sh`, enters when all its runs are "
                                 "recorded). The paper's APNEWS values: "
                                 + ", ".join(f"{k} {v}" for k, v in paper.items()) + "."])
    return "\n".join(head + ["", command_output(table_6.main,
                                                ["--records", str(TABLE6)])])


def peoples_daily() -> str:
    metrics = read_json(PD_BASELINE / "metrics.json")
    torch_lines = (TORCH_REFERENCE).read_text(encoding="utf-8").splitlines()
    torch_final = json.loads(torch_lines[-1])
    paper = SDLM_TABLE_1["Tied LSTM (medium)"]
    epochs = metrics["epochs"]
    best = min(epochs, key=lambda e: e["valid_perplexity"])["epoch"]
    rows = [["SDLM paper, Table 1", "80", number(paper["valid"]), number(paper["test"])],
            [f"this project (`{PD_BASELINE.parent}`)", f"{len(epochs)} (best at {best})",
             number(metrics["best_valid_perplexity"]), number(metrics["test_perplexity"])],
            [f"PyTorch reference recipe (`{TORCH_REFERENCE.parent}`)",
             str(torch_final["epochs"]), number(torch_final["best_valid_ppl"]),
             number(torch_final["test_ppl"])]]
    return "\n".join([
        "## SDLM Table 1 (People's Daily)", "",
        "The SDLM paper's tied medium LSTM, the baseline its sememe decoder is measured "
        "against, trained with the authors' recipe; the PyTorch row is that recipe in plain "
        "PyTorch (`benchmarks/torch_reference_lm.py`), which shares no code with this "
        "project.", "",
        markdown_table(["model", "epochs", "valid ppl", "test ppl"], rows), "",
        f"Test perplexity here / the paper's: {metrics['test_perplexity'] / paper['test']:.3f}."])


def decoders() -> str:
    """MoS and SDLM (WordNet) to convergence against the tied LSTM of the three-seed
    comparison, beside the SDLM paper's ratios, once the decoder comparison is complete."""
    tied = SDLM_TABLE_1["Tied LSTM (medium)"]["test"]
    paper = {"lstm-mos": SDLM_TABLE_1["+ MoS"]["test"] / tied,
             "sdlm": SDLM_TABLE_1["+ SDLM"]["test"] / tied}
    head = ["## The decoders to convergence", "",
            "MoS (`lstm-mos`) and SDLM with WordNet sememes (`sdlm`) on the APNEWS sample "
            "until converged (seed 0), each divided by the tied LSTM (`lstm-tied`, the three "
            "seeds of the three-seed comparison), the baseline both decoders extend. The SDLM "
            "paper's ratios are on People's Daily, SDLM's with HowNet: + MoS "
            f"{paper['lstm-mos']:.3f}, + SDLM {paper['sdlm']:.3f}."]
    if not (complete(DECODERS, CONVERGED_DECODER_ROWS) and complete(SEEDS, SEED_ROWS)):
        return "\n".join(head + ["", f"Not recorded yet (`{DECODERS}`, a comparison of "
                                 "`results/campaign.sh`); the same rows at a fixed budget are "
                                 "under [The decoders at a fixed "
                                 "budget](#the-decoders-at-a-fixed-budget)."])
    bounds = decoder_intervals()
    tied_runs = [m for n, m in finished_rows(SEEDS).items() if n.startswith("lstm-tied-seed")]
    tests = [m["test_perplexity"] for m in tied_runs]
    rows = [["lstm-tied", str(len(tied_runs)), "-", "-",
             f"{number(statistics.mean(tests))} ± {statistics.stdev(tests):.2f}", "1.000",
             "1.000"]]
    for row in CONVERGED_DECODER_ROWS:
        m = finished_rows(DECODERS)[row]
        rows.append([row, "1", str(len(m.get("epochs", []))), stop_reason(m, None),
                     number(m["test_perplexity"]), interval_cell(bounds, row),
                     f"{paper[row]:.3f}"])
    return "\n".join(head + ["", f"`{DECODERS}` and `{SEEDS}`:", "", markdown_table(
        ["row", "seeds", "epochs", "stopped", "test ppl", "/ tied LSTM [95 % CI]",
         "the paper's ratio"], rows), "", trained_on(campaign_records(DECODERS))])


def decoder_intervals() -> dict[str, Interval]:
    """Row -> the paired bootstrap interval of the converged decoders' (and the tied
    LSTM's) test-perplexity ratio to the tied LSTM of the three-seed comparison."""
    tied = tuple(n for n in finished_rows(SEEDS) if n.startswith("lstm-tied-seed"))
    return joined_intervals("lstm-tied", ("lstm-tied", SEEDS, tied),
                            *((row, DECODERS, (row,)) for row in CONVERGED_DECODER_ROWS))


def ablations() -> str:
    rows = []
    for name, metrics in finished_rows(PAPERS).items():
        path = PAPERS / name / "ablations.json"
        if not path.is_file():
            continue
        found, own = read_json(path), metrics["test_perplexity"]
        rows.append([name, number(own), *(
            f"{number(found[k])} ({found[k] / own:.3f}×)" if k in found else "-"
            for k in ("shuffled", "uniform"))])
    return "\n".join([
        "## Ablations: what the topics carry", "",
        "Each topic row of `results/apnews/papers-protocol` scored again without training, "
        "with another document's topics and with uninformative ones (uniform proportions "
        "1/T; Topic-RNN's θ at its prior mean 0), beside its own test perplexity:", "",
        markdown_table(["row", "own topics", "another document's", "uninformative"], rows)])


def comparison_table(comparison: Path, keep: tuple[str, ...] = ()) -> str:
    """The finished records of ``comparison`` (those named in ``keep``, where given):
    epochs, how it stopped, validation and test perplexity."""
    settings = read_json(comparison / "compare.json")
    fixed = settings.get("fixed_budget", {})
    rows = [[name, str(m.get("size", "-")), str(len(m.get("epochs", []))),
             stop_reason(m, fixed.get(name)), number(m.get("best_valid_perplexity")),
             number(m["test_perplexity"])]
            for name, m in finished_rows(comparison).items() if not keep or name in keep]
    flags = " ".join(settings.get("train_args", [])) or "none"
    return (f"`{comparison}`: {settings['dataset']}, "
            f"{settings['preset']} preset, seed {settings['seed']}, train.run flags `{flags}`\n\n"
            + markdown_table(["row", "size", "epochs", "stopped", "best valid ppl",
                              "test ppl"], rows))


def more_comparisons() -> str:
    groups = [
        ("The decoders at a fixed budget", [PAPERS],
         "The tied LSTM (`lstm-tied`), MoS (`lstm-mos`) and SDLM with WordNet (`sdlm`) on the "
         "APNEWS sample at 10 epochs each, not converged, the sentence LSTM beside them. The "
         "SDLM paper's decoders, on People's Daily with HowNet, reach "
         + ", ".join(f"{k} {v['test']}" for k, v in SDLM_TABLE_1.items())
         + " (test)."),
        ("The authors' variants of TDLM, LCLM and Topic-RNN",
         [RESULTS / "apnews/tdlm-topic-dropout", RESULTS / "apnews/word2vec",
          RESULTS / "synthetic/authors-variants", RESULTS / "synthetic/tdlm-topic-dropout"],
         "Where a paper's text and its authors' code differ, both are options "
         "([docs/models.md](docs/models.md)); these short comparisons set them side by side "
         "(the APNEWS ones at a budget of 2 epochs)."),
        ("Precision: float32 and mixed_bfloat16",
         [RESULTS / "apnews/precision/float32", RESULTS / "apnews/precision/mixed_bfloat16",
          RESULTS / "synthetic/precision/float32", RESULTS / "synthetic/precision/mixed_bfloat16"],
         "The same rows, seed and budget under each `--precision`."),
    ]
    text = []
    for title, comparisons, intro in groups:
        text += [f"## {title}", "", intro]
        for comparison in comparisons:
            keep = DECODER_ROWS if comparison == PAPERS else ()
            text += ["", comparison_table(comparison, keep)]
        text.append("")
    return "\n".join(text).rstrip()


def precision_at_convergence() -> str:
    """The sentence LSTM and TCNLM trained to convergence under float32 and mixed_bfloat16
    (:data:`PRECISIONS`), once both comparisons are complete: each row's test perplexity
    under both, their ratio against :data:`PRECISION_TOLERANCE`, and the commits that
    trained the two runs."""
    head = ["## Precision at convergence", "",
            "The sentence LSTM and TCNLM on the APNEWS sample (small preset, 50 topics, seed 0), "
            "each trained until it converged under `--precision float32` and under "
            "`--precision mixed_bfloat16`, at the commits named in the table. bfloat16 may be "
            f"the default only where it costs at most {PRECISION_TOLERANCE - 1:.0%} test "
            "perplexity against float32."]
    if not all(complete(c, PRECISION_ROWS) for c in PRECISIONS.values()):
        return "\n".join(head + ["", "Not recorded yet (" + " and ".join(
            f"`{c}`" for c in PRECISIONS.values()) + ", comparisons of `results/campaign.sh`)."])
    f32, bf16 = (finished_rows(PRECISIONS[p]) for p in ("float32", "mixed_bfloat16"))
    rows = []
    for row in PRECISION_ROWS:
        share = bf16[row]["test_perplexity"] / f32[row]["test_perplexity"]
        rows.append([row, *(f"{number(m['test_perplexity'])} ({len(m.get('epochs', []))} "
                            f"epochs, {stop_reason(m, None)})" for m in (f32[row], bf16[row])),
                     f"{share:.4f}", "yes" if share <= PRECISION_TOLERANCE else "no",
                     " / ".join(commit_cell(commits(m)) for m in (f32[row], bf16[row]))])
    return "\n".join(head + ["", markdown_table(
        ["row", "float32 test ppl", "mixed_bfloat16 test ppl", "bf16 / float32",
         f"within {PRECISION_TOLERANCE - 1:.0%}", "commits (float32 / bf16)"], rows), "",
        trained_on(campaign_records(*PRECISIONS.values()))])


def other_records() -> str:
    return "\n".join([
        "## Benchmarks and fault records", "",
        "Raw outputs of the benchmark harness (`results/benchmarks/`) and of the option "
        "fuzzer (`results/reliability/fuzz/`) are kept as they were printed; "
        "[docs/benchmarks.md](docs/benchmarks.md) and [docs/reliability.md](docs/reliability.md) "
        "read them with their hardware and commands."])


#: the papers' experiments no record here can stand for, and why
NOT_RUN = (
    ("the full APNEWS, IMDB and BNC corpora (TCNLM Tables 2, 4 and 6; TDLM Tables 2-4)",
     "not available here; the APNEWS sample is 1/30 of APNEWS's training text"),
    ("large (2×900) models", "days per row on 2 CPU cores; the small preset is run instead"),
    ("SDLM with HowNet on People's Daily (SDLM Tables 1-3)",
     "HowNet's sememe annotations are not obtainable; SDLM runs with WordNet on APNEWS"),
    ("Chinese headline generation on LCSTS (SDLM §4.2)",
     "the corpus is not available, and the project has no sequence-to-sequence model"),
)


def not_run() -> str:
    return "## Not run here, and why\n\n" + markdown_table(
        ["experiment", "why"], [list(row) for row in NOT_RUN])


SECTIONS: tuple[Callable[[], str], ...] = (
    summary, setup, seed_noise, table_2, output_layer_section, context_protocols,
    long_sentences, table_4, table_6_section, peoples_daily, decoders, ablations,
    more_comparisons, precision_at_convergence, other_records, not_run)
#: what :func:`reading` clears: the records and the intervals read from them
CACHED = (finished_rows, seed_intervals, joined_intervals)


def report(root: Path) -> str:
    """The report's text, from the records under ``root/results``."""
    with reading(root):
        body = "\n\n".join(section() for section in SECTIONS)
    return ("# Results\n\n"
            "Written by `make results` (`python -m evaluate.report`) from the records under "
            "`results/` alone ([results/README.md](results/README.md) describes them); change "
            "a record or the command, not this file.\n\n" + body + "\n")


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    readme = args.root / "README.md"
    wanted = {args.output or args.root / REPORT: report(args.root),
              readme: with_readme_table(readme.read_text(encoding="utf-8"),
                                        readme_table(args.root))}
    if args.check:
        stale = [str(path) for path, text in wanted.items()
                 if not path.is_file() or path.read_text(encoding="utf-8") != text]
        if stale:
            print(f"out of date with the records: {', '.join(stale)}; run `make results`")
            return 1
        print(f"{', '.join(map(str, wanted))} match the records")
        return 0
    for path, text in wanted.items():
        path.write_text(text, encoding="utf-8")
    print(f"wrote {', '.join(map(str, wanted))} from the records under {args.root / RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
