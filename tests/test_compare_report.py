"""The comparison's tables from hand-made ``metrics.json`` contents: the learning rate kept
per row, mean ± standard deviation over seeds, both LSTM ratios, the NPMI-by-T and topic
diversity-by-T tables and the training-token axis of the curves."""
import numpy as np
import pytest

from evaluate.compare_report import (RunKey, ablation_table, aggregate, coherence_table,
                                     curves, diversity_table, table, training_tokens)


def metrics(valid, test, npmi=None, epochs=3, stopped="early_stopping", diversity=None):
    m = {"epochs": [{"valid_perplexity": valid + 10 * (epochs - k), "seconds": 10.0,
                     "tokens_per_sec": 100.0} for k in range(epochs)],
         "best_valid_perplexity": valid, "test_perplexity": test, "stopped": stopped,
         "parameters": 1000, "size": "1x8", "train_tokens_per_epoch": 900,
         "baselines": {"unigram": 500.0, "oracle": None}}
    if npmi is not None:
        m["coherence"] = {"mean": npmi, "convention": "toolkit"}
    if diversity is not None:       # as a record reads back: top N -> share, N a string
        m["coherence"]["diversity"] = {"10": diversity[0], "25": diversity[1]}
    return m


RUNS = {
    RunKey("lstm", None, 0, 1e-3): metrics(120, 121),
    RunKey("lstm", None, 1, 1e-3): metrics(122, 125),
    RunKey("lstm", None, 0, 2e-3): metrics(110, 111),      # the better rate on validation
    RunKey("lstm", None, 1, 2e-3): metrics(112, 117, stopped="epochs"),
    RunKey("lstm-document", None, 0, 1e-3): metrics(100, 100),
    RunKey("lstm-document", None, 1, 1e-3): metrics(100, 100),
    RunKey("tcnlm", 50, 0, 1e-3): metrics(90, 90, npmi=0.1, diversity=(0.9, 0.7)),
    RunKey("tcnlm", 50, 1, 1e-3): metrics(92, 94, npmi=0.2, diversity=(0.8, 0.6)),
    RunKey("tcnlm", 100, 0, 1e-3): metrics(95, 96, npmi=0.05, diversity=(0.6, 0.5)),
    RunKey("tcnlm", 100, 1, 1e-3): metrics(95, 96, npmi=0.07, diversity=(0.6, 0.5)),
}


def test_aggregate_keeps_the_best_rate_and_averages_the_seeds():
    entries = aggregate(RUNS, fixed={})
    assert list(entries) == [("lstm", None), ("lstm-document", None), ("tcnlm", 50),
                             ("tcnlm", 100)]
    lstm = entries[("lstm", None)]
    assert lstm["learning_rate"] == 2e-3 and lstm["searched"] == [1e-3, 2e-3]
    np.testing.assert_allclose(lstm["test"], [114.0, np.std([111, 117], ddof=1)])
    assert lstm["stopped"] == ["patience", "epoch cap"]
    np.testing.assert_allclose(entries[("tcnlm", 50)]["npmi"], [0.15, np.std([.1, .2], ddof=1)])
    assert aggregate(RUNS, fixed={"tcnlm": 3})[("tcnlm", 50)]["stopped"] == [
        "fixed budget (3 epochs)"] * 2


def test_table_has_both_lstm_ratios_and_the_baselines():
    text = table(aggregate(RUNS, fixed={}), {"unigram": 500.0, "oracle": None})
    tcnlm = next(line for line in text.splitlines() if line.startswith("| tcnlm |"))
    assert f"| {92 / 114:.3f} | {92 / 100:.3f} |" in tcnlm and "92.00 ± 2.83" in tcnlm
    lstm = next(line for line in text.splitlines() if line.startswith("| lstm |"))
    assert "0.002 (best of 0.001, 0.002)" in lstm and "patience ×1, epoch cap ×1" in lstm
    assert f"| 500.00 | {500 / 114:.3f} | {500 / 100:.3f} |" in text
    assert "standard deviation over 2 seeds" in text


def test_coherence_table_by_topic_count():
    text = coherence_table(aggregate(RUNS, fixed={}))
    lines = text.splitlines()
    assert lines[0] == "| model | T = 50 | T = 100 |"
    assert lines[2] == "| tcnlm | 0.1500 ± 0.0707 | 0.0600 ± 0.0141 |"
    assert "(limit)" not in text            # every record names the toolkit convention
    one_count = {k: v for k, v in RUNS.items() if k.topics != 100}
    assert coherence_table(aggregate(one_count, fixed={})) is None


def test_npmi_recorded_under_the_earlier_convention_is_marked():
    """A record without a convention (written before the toolkit's became the default) is
    marked, in both tables, with the note that says what (limit) means."""
    runs = dict(RUNS)
    for key in (RunKey("tcnlm", 100, 0, 1e-3), RunKey("tcnlm", 100, 1, 1e-3)):
        runs[key] = {**runs[key], "coherence": {"mean": runs[key]["coherence"]["mean"]}}
    entries = aggregate(runs, fixed={})
    assert entries[("tcnlm", 100)]["npmi_convention"] == "limit"
    lines = coherence_table(entries).splitlines()
    assert lines[2] == "| tcnlm | 0.1500 ± 0.0707 | 0.0600 ± 0.0141 (limit) |"
    assert lines[-1].startswith("NPMI marked (limit) was recorded under the earlier convention")
    text = table(entries, {})
    assert "| 0.0600 ± 0.0141 (limit) |" in text and "| 0.1500 ± 0.0707 |" in text
    assert "NPMI marked (limit)" in text
    assert "NPMI marked" not in table(aggregate(RUNS, fixed={}), {})


def test_topic_diversity_beside_npmi_in_both_tables():
    """Each topic row's diversity at 10 and 25 top words (mean ± std over seeds) beside its
    NPMI, "-" for rows without topics, and a diversity-by-T table beside the NPMI one."""
    entries = aggregate(RUNS, fixed={})
    np.testing.assert_allclose(entries[("tcnlm", 50)]["diversity"][25],
                               [0.65, np.std([0.7, 0.6], ddof=1)])
    assert entries[("lstm", None)]["diversity"] == {}
    lines = table(entries, {"unigram": 500.0, "oracle": None}).splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header[-3:] == ["NPMI (mean of top 5/10/15/20)", "topic diversity (top 10 / 25)",
                           "commit"]
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in lines[2:] if line.startswith("| ")]
    assert [row[-2] for row in rows if row[0] == "tcnlm"] == [
        "0.850 ± 0.071 / 0.650 ± 0.071", "0.600 ± 0.000 / 0.500 ± 0.000"]
    assert [row[-3:-1] for row in rows if row[0] == "lstm"] == [["-", "-"]]
    assert all(len(row) == len(header) for row in rows)    # the baselines' too
    assert diversity_table(entries).splitlines() == [
        "| model | T = 50 | T = 100 |", "| --- | --- | --- |",
        "| tcnlm | 0.850 ± 0.071 / 0.650 ± 0.071 | 0.600 ± 0.000 / 0.500 ± 0.000 |"]
    one_count = {k: v for k, v in RUNS.items() if k.topics != 100}
    assert diversity_table(aggregate(one_count, fixed={})) is None


def test_records_without_diversity_show_a_dash():
    """A record scored before topic diversity was recorded (its coherence has none) still
    tabulates, with "-" where the diversity would be; a row whose seeds all have it keeps
    it."""
    runs = dict(RUNS)
    for key in (RunKey("tcnlm", 100, 0, 1e-3), RunKey("tcnlm", 100, 1, 1e-3)):
        runs[key] = {**runs[key], "coherence": {"mean": runs[key]["coherence"]["mean"],
                                               "convention": "toolkit"}}
    entries = aggregate(runs, fixed={})
    assert entries[("tcnlm", 100)]["diversity"] == {}
    rows = [line for line in table(entries, {}).splitlines() if line.startswith("| tcnlm |")]
    assert [row.split(" | ")[-2] for row in rows] == ["0.850 ± 0.071 / 0.650 ± 0.071", "-"]
    assert diversity_table(entries) is None       # one topic count left with a diversity
    assert coherence_table(entries) is not None   # the NPMI table keeps both


@pytest.mark.parametrize("per_epoch,expected", [(900, [900, 1800, 2700]),
                                                (None, [1000, 2000, 3000])])
def test_training_tokens_from_the_split_or_from_rate_times_time(per_epoch, expected):
    m = metrics(100, 100)
    m["train_tokens_per_epoch"] = per_epoch   # runs of earlier versions lack it
    assert training_tokens(m) == expected
    assert curves({"run": m})["run"] == list(zip(expected, [130, 120, 110]))


def test_ablation_rows_name_their_topic_count_from_the_comparison_or_their_own_size():
    """A row trained at the comparison's --num-topics shows it; a row that keeps its own
    topic count (the naive MoE's 30 experts, no key topics) shows the T of its size."""
    moe = {**metrics(95, 100), "size": "1x100, T=30",
           "ablations": {"shuffled": 130.0, "uniform": 120.0}}
    runs = {RunKey("tcnlm", 50, 0, 1e-3): {**metrics(90, 90), "size": "1x8, T=50",
                                          "ablations": {"shuffled": 99.0, "uniform": 93.0}},
            RunKey("moe", None, 0, 1e-3): moe}
    lines = ablation_table(aggregate(runs, fixed={})).splitlines()
    assert lines[2].startswith("| tcnlm, T=50 | 90.00 | 99.00 (1.100×) | 93.00 (1.033×) |")
    assert lines[3].startswith("| moe, T=30 | 100.00 | 130.00 (1.300×) | 120.00 (1.200×) |")


def test_every_curve_of_a_large_comparison_has_its_own_look():
    """Past the colour cycle's 10 colours a curve must not take an earlier one's colour and
    marker (a comparison of 13 rows would show lstm and lda_lstm alike)."""
    from evaluate.compare_report import curve_style, curves_png

    looks = [tuple(sorted(curve_style(i).items())) for i in range(40)]
    assert len(set(looks)) == 40
    assert curve_style(0) != curve_style(10) and curve_style(0)["color"] == "C0"
    png = curves_png({f"run{i}": [(100.0 * k, 90.0 - k) for k in range(1, 4)]
                      for i in range(13)}, "13 runs")
    assert png.startswith(b"\x89PNG")
