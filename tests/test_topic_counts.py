"""``evaluate.topic_counts``: NPMI by topic count joined from the records of comparisons made
at different topic counts (hand-made records, no training), and one-line errors for records
that do not belong in one table."""
import json

import pytest

from evaluate.topic_counts import main

SETTINGS = {"dataset": "apnews", "data_dir": "/data", "preset": "small", "seed": 0,
            "train_args": ["--topic-min-docs", "10"], "max_epochs": 30, "patience": 2}


def npmi(base, reference="../shared/data/apnews/train.txt", convention=None):
    """A coherence record; ``convention`` None is one written before records named theirs."""
    per_n = {n: base - 0.01 * k for k, n in enumerate(("5", "10", "15", "20"))}
    return {"reference": reference, "window": 20, "per_n": per_n,
            "mean": sum(per_n.values()) / 4,
            **({"convention": convention} if convention else {})}


def write_records(directory, runs, num_topics, settings=SETTINGS, convention=None):
    """``runs``: run name -> (T, NPMI base, test perplexity, reference or None)."""
    directory.mkdir(parents=True)
    (directory / "compare.json").write_text(json.dumps(dict(settings, num_topics=num_topics)))
    for name, (topics, base, test, reference) in runs.items():
        (directory / name).mkdir()
        coherence = (npmi(base, reference, convention) if reference
                     else npmi(base, convention=convention))
        (directory / name / "metrics.json").write_text(json.dumps(
            {"model": name.split("-")[0], "test_perplexity": test, "coherence": coherence}))
        (directory / name / "config.json").write_text(json.dumps(
            {"model": {"options": {"num_topics": topics}}}))
    return directory


@pytest.fixture
def records(tmp_path):
    first = write_records(tmp_path / "t50", {"tdlm": (50, 0.2, 67.5, None),
                                             "tcnlm": (50, 0.1, 73.8, None),
                                             "lstm": (None, 0.0, 72.0, None)}, 50)
    (first / "lstm" / "metrics.json").write_text(json.dumps(
        {"model": "lstm", "test_perplexity": 72.0}))        # no topics: not a line
    more = write_records(tmp_path / "more", {
        "tcnlm-T150": (150, 0.3, 75.0, "/work/shared/data/apnews/train.txt"),
        "tcnlm-T100": (100, 0.25, 74.0, None)}, [100, 150])
    return first, more


def test_one_line_per_row_and_topic_count_from_several_comparisons(records, capsys):
    """Every row at every topic count of the comparisons, "not run" where no record is."""
    first, more = records
    text = main(["--records", str(first), str(more), "--output", str(first / "t.md")])
    lines = text.splitlines()
    body = lines[lines.index("| --- | --- | --- | --- | --- | --- | --- | --- | --- |") + 1:]
    # beside each line, the TCNLM paper's Table 4 (APNEWS, small models) at that T
    assert body == [
        "| tcnlm | 50 | 0.1000 | 0.0900 | 0.0800 | 0.0700 | 0.0850 | 0.159 | 73.80 |",
        "| tcnlm | 100 | 0.2500 | 0.2400 | 0.2300 | 0.2200 | 0.2350 | 0.160 | 74.00 |",
        "| tcnlm | 150 | 0.3000 | 0.2900 | 0.2800 | 0.2700 | 0.2850 | 0.153 | 75.00 |",
        "| tdlm | 50 | 0.2000 | 0.1900 | 0.1800 | 0.1700 | 0.1850 | 0.149 | 67.50 |",
        "| tdlm | 100 | not run | - | - | - | - | 0.152 | - |",
        "| tdlm | 150 | not run | - | - | - | - | 0.147 | - |"]
    assert "reference apnews/train.txt, window 20, limit convention" in lines[0]
    assert (first / "t.md").read_text() == text
    only = main(["--records", str(first), "--rows", "tdlm"]).splitlines()
    assert only[-1].startswith("| tdlm | 50 | 0.2000 |") and not any("tcnlm" in x
                                                                     for x in only[3:])


@pytest.mark.parametrize("change, message", [
    ("settings", "differ in seed, not only in the topic count"),
    ("twice", "tcnlm at T = 50 is recorded twice"),
    ("reference", "different reference corpora, windows or conventions"),
    ("convention", "different reference corpora, windows or conventions"),
    ("rows", "--rows tdlm,lclm: no finished record of lclm in"),
    ("empty", "no finished topic run with a coherence record"),
])
def test_records_that_do_not_belong_together_are_one_line_errors(records, tmp_path, capsys,
                                                                 change, message):
    first, more = records
    argv = ["--records", str(first), str(more)]
    if change == "settings":
        write_records(tmp_path / "seed1", {"tcnlm-T100": (100, 0.2, 70.0, None)}, [100],
                      dict(SETTINGS, seed=1))
        argv[2] = str(tmp_path / "seed1")
    elif change == "twice":
        write_records(tmp_path / "again", {"tcnlm": (50, 0.2, 70.0, None)}, 50)
        argv.append(str(tmp_path / "again"))
    elif change == "reference":
        write_records(tmp_path / "wiki", {"tdlm-T100": (100, 0.2, 70.0, "wiki/all.txt")},
                      [100])
        argv[2] = str(tmp_path / "wiki")
    elif change == "convention":        # scored by the toolkit, beside records of the limit
        write_records(tmp_path / "toolkit", {"tdlm-T100": (100, 0.2, 70.0, None)}, [100],
                      convention="toolkit")
        argv[2] = str(tmp_path / "toolkit")
    elif change == "rows":
        argv += ["--rows", "tdlm,lclm"]
    else:
        write_records(tmp_path / "none", {}, 50)
        argv = ["--records", str(tmp_path / "none")]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_the_papers_table_4_cell_by_row_dataset_model_size_and_topic_count():
    from evaluate.published import table_4_npmi

    assert table_4_npmi("tcnlm", "apnews", "large", 150) == 0.155       # TCNLM(l)
    assert table_4_npmi("tdlm", "bnc", "small", 100) == 0.106          # TDLM(s)
    assert table_4_npmi("topic_rnn", "imdb", "large", 50) == 0.096     # Topic-RNN(l)
    assert table_4_npmi("lda_lstm", "imdb", "large", 100) == 0.092     # LDA: one size
    assert table_4_npmi("moe", "apnews", "small", 50) is None          # not in Table 4
    assert table_4_npmi("tcnlm", "apnews", "small", 30) is None        # no such T
    assert table_4_npmi("tcnlm", "synthetic", "small", 50) is None
    assert table_4_npmi("tcnlm", "apnews", "medium", 50) is None       # no such size


def test_records_that_name_the_toolkit_convention_say_so(tmp_path):
    both = write_records(tmp_path / "toolkit", {"tcnlm-T50": (50, 0.1, 73.0, None),
                                                "tcnlm-T100": (100, 0.2, 74.0, None)},
                         [50, 100], convention="toolkit")
    assert "window 20, toolkit convention" in main(["--records", str(both)]).splitlines()[0]
