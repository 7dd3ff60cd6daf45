"""``evaluate.report``: RESULTS.md and the README's results table are what the command writes
from the records under ``results/``, byte for byte, and their statuses follow the records."""
import json
import math
import shutil

import pytest

from evaluate import report
from evaluate.intervals import Interval
from tests.conftest import REPO_ROOT


@pytest.fixture
def results_copy(tmp_path):
    """A copy of the repository's records (the report reads nothing else) and README."""
    shutil.copytree(REPO_ROOT / "results", tmp_path / "results")
    shutil.copy(REPO_ROOT / "README.md", tmp_path / "README.md")
    return tmp_path


def summary_line(text: str, claim: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {claim}"))


def test_results_md_is_the_report_of_the_records():
    written = (REPO_ROOT / "RESULTS.md").read_text(encoding="utf-8")
    assert written == report.report(REPO_ROOT), "RESULTS.md is stale: run `make results`"


def test_the_readme_table_is_the_summary_of_the_records():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    table = report.readme_table(REPO_ROOT)
    assert readme == report.with_readme_table(readme, table), (
        "README.md's results table is stale: run `make results`")
    assert "(RESULTS.md#sdlm-table-1-peoples-daily)" in table


def test_a_readme_without_the_markers_is_one_line(results_copy, capsys):
    (results_copy / "README.md").write_text("# a README without its results table\n")
    with pytest.raises(SystemExit):
        report.main(["--root", str(results_copy)])
    assert "results table" in capsys.readouterr().err


@pytest.mark.parametrize("edited", ["RESULTS.md", "README.md"])
def test_check_fails_on_a_stale_report(results_copy, capsys, edited):
    assert report.main(["--root", str(results_copy)]) == 0
    assert report.main(["--root", str(results_copy), "--check"]) == 0
    path = results_copy / edited
    text = path.read_text(encoding="utf-8").replace("| reproduced |", "| (edited) |", 1)
    path.write_text(text, encoding="utf-8")
    assert report.main(["--root", str(results_copy), "--check"]) == 1
    assert f"out of date with the records: {path}" in capsys.readouterr().out


def test_a_changed_record_changes_the_status(results_copy):
    """A one-seed claim (the three seeds' intervals replace it once they are recorded, and
    the seeds' test below covers them)."""
    shutil.rmtree(results_copy / "results/apnews/seeds")
    claim = "TCNLM Table 2 (APNEWS, small, T = 50): TCNLM / basic LSTM"
    before = summary_line(report.report(results_copy), claim)
    path = results_copy / "results/apnews/papers-protocol/tcnlm/metrics.json"
    metrics = json.loads(path.read_text(encoding="utf-8"))
    lstm = json.loads((path.parent.parent / "lstm/metrics.json").read_text())["test_perplexity"]
    metrics["test_perplexity"] = 0.8 * lstm
    path.write_text(json.dumps(metrics), encoding="utf-8")
    after = summary_line(report.report(results_copy), claim)
    assert "| 0.800 | reproduced |" in after and after != before


def test_a_missing_comparison_is_pending_not_a_number(results_copy):
    shutil.rmtree(results_copy / "results/apnews/causal")
    line = summary_line(report.report(results_copy), "2023 re-evaluation")
    assert "pending (not recorded yet)" in line


def test_a_damaged_record_is_one_line(results_copy, capsys):
    (results_copy / "results/apnews/papers-protocol/compare.json").write_text("{", "utf-8")
    with pytest.raises(SystemExit) as stop:
        report.main(["--root", str(results_copy), "--check"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "papers-protocol/compare.json" in err


def seed_metrics(row: str, seed: int) -> dict:
    """A record of ``row`` at ``seed`` with 12 test documents of 10 tokens each, whose
    perplexity, on any documents, is the document LSTM's times 0.97 for the tied LSTM and
    1.03 for every other row but TDLM, which is 1.03 and 1 / 1.03 times it on the two
    documents of each equal pair (no difference); each seed 0.1 % above the one before."""
    base = [math.log(60.0) * 10 * (1 + 0.1 * (d // 2 % 3)) for d in range(12)]
    factor = {"lstm-document": [1.0] * 12, "lstm-tied": [0.97] * 12,
              "tdlm": [1.03 ** (-1) ** d for d in range(12)]}.get(row, [1.03] * 12)
    nll = [b + 10 * math.log(f * (1 + 0.001 * seed)) for b, f in zip(base, factor)]
    return {"test_perplexity": math.exp(sum(nll) / 120), "best_valid_perplexity": 60.0,
            "size": "1x8", "parameters": 100, "stopped": "early_stopping",
            "epochs": [{"seconds": 1.0, "tokens_per_sec": 10.0}] * 4,
            "test_documents": {"nll": nll, "tokens": [10] * 12}}


def test_a_comparison_enters_only_when_complete(results_copy):
    """The three-seed comparison enters the report only once every run is recorded, with
    the spread over seeds, the comparison's table with each row's paired bootstrap interval
    of its ratio to the document LSTM, and the one sentence those intervals support."""
    without_paired_comparisons(results_copy)
    seeds = results_copy / "results/apnews/seeds"
    shutil.rmtree(seeds)
    seeds.mkdir()
    (seeds / "compare.json").write_text(json.dumps({"seed": [0, 1]}))
    names = [(row, seed) for row in report.SEED_ROWS for seed in (0, 1)]
    for index, (row, seed) in enumerate(names):
        (seeds / f"{row}-seed{seed}").mkdir()
        cpu = "AMD EPYC" if (row, seed) == ("tcnlm", 1) else "Intel(R) Xeon(R) Processor"
        (seeds / f"{row}-seed{seed}" / "metrics.json").write_text(
            json.dumps({**seed_metrics(row, seed), "provenance": [{"cpu": cpu}]}))
        text = report.report(results_copy)
        assert ("The spread over seeds" in text) == (index == len(names) - 1), row
    section = text[text.index("## Seed noise"):]
    section = section[:section.index("\n## ")]
    assert "| lstm-tied | 2 | 87.69 | 0.1% |" in section
    assert "| lstm-tied | 1x8 | 100 | default | 4/4 | patience ×2 | 10 | 60.00 ± 0.00 | " \
        "87.69 ± 0.06 | 0.942 | 0.970 | 0.970 [0.969, 0.971] |" in section
    assert "trained on (each record's provenance): AMD EPYC: tcnlm-seed1; Intel(R) Xeon(R) " \
        "Processor: the other 13." in section
    claims = section.splitlines()[-1]
    assert claims.startswith("Against the document LSTM, by the 95 % intervals above: lower "
                             "perplexity beyond the noise of test documents and seeds: "
                             "lstm-tied (0.970 [")
    difference = claims[claims.index("No difference"):claims.index("Higher")]
    assert "tdlm (1.000 [" in difference and "lstm-tied" not in difference
    higher = claims[claims.index("Higher"):]
    assert all(f"{row} (1.030 [" in higher for row in report.SEED_ROWS
               if row not in ("lstm-document", "lstm-tied", "tdlm"))
    # the summary's Table 2 claims and the 2023 claim read the seeds' intervals: TDLM alone
    # is below the sentence LSTM (its ratio 1 and 1 / 1.03^2 on alternate documents), the
    # other topic rows equal to it; no topic row is below the document LSTM
    summary = text[:text.index("## Setup")]
    assert "| 1 of 4 (3 seeds, beyond the noise; lclm not in them) | not reproduced |" in summary
    assert ("| 2023 re-evaluation under the papers' protocol: no topic-guided model beats the "
            "document LSTM (best topic row / document LSTM, 3 seeds) | ≥ 1 | 1.000 [") in summary
    assert "(3 seeds) | reproduced | [Seed noise](#seed-noise) |" in summary
    assert "beyond the noise: below the sentence LSTM tdlm (0.971 [" in text
    assert "; below the document LSTM none." in text


@pytest.mark.parametrize("interval, status", [
    ((0.95, 0.90, 0.99), "reproduced"),
    ((1.02, 1.01, 1.03), "not reproduced"),
    ((1.00, 0.98, 1.02), "not reproduced (no difference: the interval holds 1)"),
    (None, "pending (not recorded yet)")])
def test_a_claim_over_seeds_is_reproduced_only_when_its_interval_is_on_the_papers_side(
        interval, status):
    found = None if interval is None else Interval(*interval, level=0.95, seeds=3)
    assert report.status_interval(found, 0.82) == status


def test_precision_at_convergence_compares_the_two_precisions_once_both_are_complete(
        results_copy):
    """The table gives each row's test perplexity under both precisions, their ratio against
    the 1 % rule, and the commits of the two runs (here TCNLM's bfloat16 run trained at
    another commit than the other three, and was resumed at a third)."""
    found = {"float32": {"lstm": 70.0, "tcnlm": 60.0},
             "mixed_bfloat16": {"lstm": 70.35, "tcnlm": 60.9}}
    first, second, third = ("1" * 40, "2" * 40, "3" * 40)
    trained_by = {("mixed_bfloat16", "tcnlm"): [{"commit": second},
                                                {"commit": third, "dirty": True}]}
    for precision, rows in found.items():
        comparison = results_copy / report.PRECISIONS[precision]
        shutil.rmtree(comparison, ignore_errors=True)     # records of the campaign's runs
        comparison.mkdir(parents=True)
        (comparison / "compare.json").write_text(json.dumps({"seed": 0}))
        for row, perplexity in rows.items():
            text = report.report(results_copy)
            assert "Not recorded yet (`results/apnews/precision-float32`" in text
            (comparison / row).mkdir()
            (comparison / row / "metrics.json").write_text(json.dumps(
                {"test_perplexity": perplexity, "epochs": [{}] * 12,
                 "stopped": "early_stopping",
                 "provenance": trained_by.get((precision, row), [{"commit": first}])}))
    section = report.report(results_copy)
    assert ("| lstm | 70.00 (12 epochs, patience) | 70.35 (12 epochs, patience) | 1.0050 | yes "
            "| 1111111 / 1111111 |") in section
    assert ("| tcnlm | 60.00 (12 epochs, patience) | 60.90 (12 epochs, patience) | 1.0150 | no "
            "| 1111111 / 2222222, 3333333+dirty |") in section


def test_the_cpus_of_a_comparison_are_named_from_the_provenance():
    one = {"a": {"provenance": [{"cpu": "X"}, {"cpu": "X"}]}, "b": {"provenance": [{"cpu": "X"}]}}
    assert report.trained_on(one) == "All 2 runs trained on X (each record's provenance)."
    assert report.trained_on({"a": {}, "b": {"provenance": [{}]}}) == (
        "The records do not name the CPUs their runs trained on.")
    resumed = {**one, "c": {"provenance": [{"cpu": "X"}, {"cpu": "Y"}]}, "d": {}}
    text = report.trained_on(resumed)
    assert text.startswith("The CPUs the runs trained on (each record's provenance): "
                           "Y: c; not recorded: d; X: the other 3.")


#: the model settings of each output layer, as a record's config.json holds them
LAYER_SETTINGS = {"adaptive": {"decoder": "adaptive"},
                  "tied": {"decoder": "softmax", "decoder_options": {"tie_embeddings": True}},
                  "full": {"decoder": "softmax", "decoder_options": {"tie_embeddings": False}}}


def write_comparison(root, comparison, runs, seeds=None, settings=None):
    """A comparison directory under ``root`` holding ``runs`` (run name -> (metrics, output
    layer)), replacing whatever the repository's copy holds there."""
    directory = root / comparison
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    (directory / "compare.json").write_text(json.dumps(
        {"seed": seeds if seeds is not None else 0, "dataset": "apnews", "preset": "small",
         "num_topics": 50, **(settings or {})}))
    for name, (metrics, layer) in runs.items():
        (directory / name).mkdir()
        (directory / name / "metrics.json").write_text(json.dumps(
            {"provenance": [{"cpu": "Intel(R) Xeon(R) Processor"}], **metrics}))
        (directory / name / "config.json").write_text(json.dumps(
            {"model": LAYER_SETTINGS[layer]}))


#: the comparisons whose rows the report pairs document by document with the seeds' rows
PAIRED_WITH_SEEDS = (report.CARRY, report.TIED_SOFTMAX, report.FULL_SOFTMAX, report.DECODERS)


def without_paired_comparisons(root):
    """Removes :data:`PAIRED_WITH_SEEDS` from the copy under ``root``: invented seed records
    cannot be paired with the repository's real ones (their test documents differ), so a test
    that invents the seeds writes whichever of these it needs."""
    for comparison in PAIRED_WITH_SEEDS:
        shutil.rmtree(root / comparison, ignore_errors=True)


def write_seeds(root):
    """The three-seed comparison of :func:`seed_metrics` (seeds 0-2), Topic-RNN with the
    full softmax and the tied LSTM with the tied one, the other rows adaptive; without
    :data:`PAIRED_WITH_SEEDS`."""
    without_paired_comparisons(root)
    layer = {"topic_rnn": "full", "lstm-tied": "tied"}
    write_comparison(root, report.SEEDS, {
        f"{row}-seed{seed}": (seed_metrics(row, seed), layer.get(row, "adaptive"))
        for row in report.SEED_ROWS for seed in range(3)}, seeds=[0, 1, 2])


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_the_output_layer_section_divides_each_row_by_the_lstms_of_its_layer(results_copy):
    """Once the seeds, the tied-softmax and the full-softmax comparisons are complete: the
    table of evaluate.output_layers and what its intervals to the document LSTM with the same
    layer support (the seed_metrics factors: lstm-tied 0.97, tdlm no difference, 1.03 the
    rest, the document LSTM 1 under every layer)."""
    root = results_copy
    write_seeds(root)
    write_comparison(root, report.FULL_SOFTMAX, {
        row: (seed_metrics(row, 0), "full") for row in report.FULL_SOFTMAX_ROWS})
    tied = {row: (seed_metrics(row, 0), "tied") for row in report.TIED_SOFTMAX_ROWS}
    write_comparison(root, report.TIED_SOFTMAX, dict(list(tied.items())[:-1]))
    assert "Not recorded yet (`results/apnews/tied-softmax`" in section(
        report.report(root), "The output layer held equal")
    write_comparison(root, report.TIED_SOFTMAX, tied)
    text = section(report.report(root), "The output layer held equal")
    assert "| tcnlm | tied full softmax | 1 | 93.07 | 1.061 [1.060, 1.062] | 1.030 [" in text
    claims = next(line for line in text.splitlines() if line.startswith(
        "Against the document LSTM with the same output layer"))
    below = claims[:claims.index("No difference")]
    assert "lstm-tied (tied full softmax) (0.971 [" in below
    difference = claims[claims.index("No difference"):claims.index("Higher")]
    assert all(f"tdlm ({layer}) (1.000 [" in difference
               for layer in ("adaptive softmax", "tied full softmax"))
    higher = claims[claims.index("Higher"):]
    assert all(f"{cell} (1.03" in higher for cell in (
        "tcnlm (tied full softmax)", "lda_lstm (adaptive softmax)", "topic_rnn (full softmax)",
        "lstm (full softmax)"))
    assert "lstm-document (" not in claims


def test_the_long_sentence_section_splits_the_document_lstms_lead(results_copy):
    """The sentence LSTM at 1.03 of the document LSTM under reset and 1.01 under carry: the
    resets make log(1.03 / 1.01) / log(1.03) = 66 % of the lead."""
    root = results_copy
    write_seeds(root)
    assert "Not recorded yet (`results/apnews/long-sentences-carry`" in report.report(root)
    carried = seed_metrics("lstm-tied", 0)    # 0.97 of the document LSTM: rescaled to 1.01
    carried["test_documents"]["nll"] = [
        n + 10 * math.log(1.01 / 0.97) for n in carried["test_documents"]["nll"]]
    carried["test_perplexity"] *= 1.01 / 0.97
    write_comparison(root, report.CARRY, {"lstm": (carried, "adaptive"),
                                          "tdlm": (seed_metrics("tdlm", 0), "adaptive")})
    text = section(report.report(root), "Long sentences")
    assert "| lstm | 93.07 (4 epochs, patience) | 91.26 (4 epochs, patience) | 0.981 [" in text
    assert "| tdlm | 90.36 (4 epochs, patience) | 90.36 (4 epochs, patience) | 1.000 [1.000, " \
        "1.000] | 1.000 [" in text
    assert ("of the document LSTM's lead, the resets inside long sentences make 66% (in log "
            "perplexity, one seed), the document's context the rest.") in text
    assert "All 2 runs trained on Intel(R) Xeon(R) Processor (each record's provenance)." in text
    assert "is 1.030 [1.030, 1.030] times the document LSTM's under `reset` and 1.010 [" in text


def test_the_converged_decoders_enter_with_their_claim(results_copy):
    """MoS at 0.95 / 0.97 of the tied LSTM beats it beyond the noise, as the SDLM paper's
    MoS does; SDLM at 0.99 / 0.97 does not."""
    root = results_copy
    write_seeds(root)
    claim = "SDLM Table 1: the MoS decoder beats the tied LSTM"
    assert "| pending (not recorded yet) |" in summary_line(report.report(root), claim)
    decoders = {}
    for row, factor in (("lstm-mos", 0.95), ("sdlm", 0.99)):
        metrics = seed_metrics("lstm-tied", 0)
        metrics["test_documents"]["nll"] = [
            n + 10 * math.log(factor / 0.97) for n in metrics["test_documents"]["nll"]]
        metrics["test_perplexity"] *= factor / 0.97
        decoders[row] = (metrics, "adaptive")
    write_comparison(root, report.DECODERS, decoders)
    text = report.report(root)
    line = summary_line(text, claim)
    assert "| 0.937 | 0.978 [0.977, 0.979] | reproduced |" in line
    decoder_section = section(text, "The decoders to convergence")
    assert "| lstm-tied | 3 | - | - | 87.73 ± 0.09 | 1.000 | 1.000 |" in decoder_section
    assert "| sdlm | 1 | 4 | patience | 89.45 | 1.020 [1.019, 1.021] | 0.930 |" \
        in decoder_section


def test_table_6_claim_reads_the_seeds_intervals(results_copy):
    """TCNLM at 1.03 of the LSTM on every document: not reproduced, with its interval."""
    root = results_copy
    factor = {"lstm": "lstm-document", "tcnlm": "tcnlm", "tcnlm-constant-t": "tcnlm",
              "moe": "tcnlm"}
    write_comparison(root, report.TABLE6, {
        f"{row}-seed{seed}": (seed_metrics(factor[row], seed), "adaptive")
        for row in report.TABLE6_ROWS for seed in range(3)}, seeds=[0, 1, 2],
        settings={"num_topics": 30, "train_args": ["--hidden-size", "100"]})
    line = summary_line(report.report(root), "TCNLM Table 6")
    assert "| 0.814 | 1.030 [1.029, 1.031] (3 seeds) | not reproduced |" in line
