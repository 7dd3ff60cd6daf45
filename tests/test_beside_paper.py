"""``evaluate.beside_paper``: the rows of recorded comparisons beside the TCNLM paper's
Table 2, from hand-made records (no training): the paper's cell for each row and topic
count, both sides as ratios to their own LSTM, rows of a second comparison, fixed budgets
marked, and one-line errors for records that cannot be set beside the paper."""
import json

import pytest

from evaluate.beside_paper import main
from evaluate.published import TABLE_2

SETTINGS = {"dataset": "apnews", "data_dir": "/data", "preset": "small", "num_topics": [50, 100],
            "seed": 0, "max_epochs": 30, "patience": 2,
            "train_args": ["--topic-min-docs", "10"]}


def write_records(directory, rows, settings=SETTINGS):
    """``rows``: run name -> (test perplexity, epochs, how it stopped, topic count or None)."""
    directory.mkdir(parents=True)
    (directory / "compare.json").write_text(json.dumps(settings))
    for name, (test, epochs, stopped, topics) in rows.items():
        (directory / name).mkdir()
        (directory / name / "metrics.json").write_text(json.dumps(
            {"test_perplexity": test, "stopped": stopped, "epochs": [{}] * epochs}))
        options = {} if topics is None else {"num_topics": topics}
        (directory / name / "config.json").write_text(json.dumps({"model": {"options":
                                                                            options}}))
    return directory


@pytest.fixture
def records(tmp_path):
    main_table = write_records(tmp_path / "main", {
        "lstm": (80.0, 12, "early_stopping", None),
        "lstm-document": (64.0, 15, "early_stopping", None),
        "tcnlm-T50": (72.0, 9, "early_stopping", 50),
        "tcnlm-T100": (60.0, 11, "epochs", 100),
        "lstm-tied": (70.0, 10, "epochs", None),
        "unfinished": (None, 3, None, None)},
        dict(SETTINGS, fixed_budget={"lstm-tied": 10}))
    (main_table / "unfinished" / "metrics.json").write_text(json.dumps({"epochs": [{}] * 3}))
    further = write_records(tmp_path / "further", {"lstm-tied": (62.4, 16, "early_stopping",
                                                                 None)})
    return main_table, further


def test_each_row_beside_the_papers_cell_as_ratios_to_each_lstm(records):
    main_table, further = records
    lines = main(["--records", str(main_table), str(further)]).splitlines()
    rows = [line for line in lines if line.startswith("| ") and not line.startswith(
        ("| row ", "| --- "))]
    assert rows == [
        "| lstm | main | - | 12 | patience | 64.13 | 1.000 | 80.00 | 1.000 | 1.250 |",
        "| lstm-document | main | - | 15 | patience | not in the paper | - | 64.00 | 0.800 "
        "| 1.000 |",
        "| lstm-tied | main | - | 10 | fixed budget (10 epochs) | not in the paper | - | 70.00 "
        "| 0.875 | 1.094 |",
        "| tcnlm-T50 | main | 50 | 9 | patience | 52.75 | 0.823 | 72.00 | 0.900 | 1.125 |",
        "| tcnlm-T100 | main | 100 | 11 | epoch cap | 52.63 | 0.821 | 60.00 | 0.750 | 0.938 |",
        "| lstm-tied | further | - | 16 | patience | not in the paper | - | 62.40 | 0.780 "
        "| 0.975 |"]


def test_rows_and_output_choose_what_is_shown_and_where(records, tmp_path):
    main_table, further = records
    output = tmp_path / "beside.md"
    text = main(["--records", str(main_table), str(further), "--rows", "tcnlm-T50,lstm-tied",
                 "--output", str(output)])
    assert output.read_text() == text
    shown = [line.split(" | ")[:2] for line in text.splitlines() if line.startswith("| ")]
    assert shown[2:] == [["| lstm-tied", "main"], ["| tcnlm-T50", "main"],
                         ["| lstm-tied", "further"]]
    assert "| 0.900 | 1.125 |" in text          # ratios still to the lstm rows not shown


def test_every_dataset_and_preset_of_table_2_has_every_cell():
    assert sorted(TABLE_2) == [(d, p) for d in ("apnews", "bnc", "imdb")
                               for p in ("large", "small")]
    for column in TABLE_2.values():
        assert set(column) == {"basic-LSTM", "LDA+LSTM", "LCLM", "Topic-RNN", "TDLM", "TCNLM"}
        assert all(set(v) == {50, 100, 150} for v in column.values() if isinstance(v, dict))
    assert TABLE_2[("bnc", "large")]["TCNLM"][150] == 80.12


@pytest.mark.parametrize("change, message", [
    ("no lstm", "has no record of the sentence-level LSTM (row lstm)"),
    ("seed", "differ in seed; give comparisons of one corpus and setting"),
    ("synthetic", "Table 2 has no synthetic small column"),
    ("not a comparison", "no compare.json there"),
    ("unknown row", "--rows nope: no finished run of that name"),
    ("corrupt record", "cannot read"),
    ("list for a record", "holds no JSON object"),
])
def test_records_that_cannot_stand_beside_the_paper_are_one_line_errors(
        records, tmp_path, capsys, change, message):
    main_table, further = records
    argv = ["--records", str(main_table), str(further)]
    if change == "no lstm":
        argv = ["--records", str(further), str(main_table)]
    elif change == "seed":
        (further / "compare.json").write_text(json.dumps(dict(SETTINGS, seed=1)))
    elif change == "synthetic":
        argv = ["--records", str(write_records(tmp_path / "syn", {"lstm": (9.0, 1, "epochs",
                                                                           None)},
                                               dict(SETTINGS, dataset="synthetic")))]
    elif change == "not a comparison":
        argv.append(str(tmp_path))
    elif change == "unknown row":
        argv += ["--rows", "lstm,nope"]
    elif change == "corrupt record":
        (main_table / "tcnlm-T50" / "metrics.json").write_text('{"test_perplexity": 7')
    else:
        (further / "lstm-tied" / "config.json").write_text("[]")
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
