"""``evaluate.protocols``: both context protocols side by side, from hand-made records of two
comparisons (no training): the rows that read their document under both, the others once,
every ratio to the document-level LSTM, shared rows from more comparisons, and one-line
errors for records that do not belong together."""
import json

import pytest

from evaluate.protocols import main, reads_document, where_they_part

SETTINGS = {"dataset": "apnews", "data_dir": "/data", "preset": "small", "num_topics": 50,
            "seed": 0, "max_epochs": 30, "patience": 2,
            "train_args": ["--topic-min-docs", "10"]}


def write_records(directory, rows, context, settings=SETTINGS, ablations=None):
    """``rows``: run name -> (model, test perplexity); each record trained under
    ``context``; ``ablations``: run name -> its ablation scores, where it has some."""
    directory.mkdir(parents=True)
    args = dict(settings)
    if context == "preceding":
        args["train_args"] = settings["train_args"] + ["--context", "preceding"]
    (directory / "compare.json").write_text(json.dumps(args))
    for name, (model, test) in rows.items():
        (directory / name).mkdir()
        metrics = {"model": model, "test_perplexity": test, "epochs": [{}] * 3,
                   "stopped": "early_stopping"}
        if name in (ablations or {}):
            metrics["ablations"] = ablations[name]
        (directory / name / "metrics.json").write_text(json.dumps(metrics))
        (directory / name / "config.json").write_text(json.dumps({"data": {"context": context}}))
    return directory


@pytest.fixture
def comparisons(tmp_path):
    rest = write_records(tmp_path / "rest", {
        "lstm": ("lstm", 72.0), "lstm-document": ("lstm", 64.0), "lclm": ("lclm", 80.0),
        "tcnlm": ("tcnlm", 60.0), "tdlm": ("tdlm", 68.0)}, "rest")
    preceding = write_records(tmp_path / "preceding", {
        "tcnlm": ("tcnlm", 72.0), "topic_rnn": ("topic_rnn", 70.4)}, "preceding")
    return rest, preceding


def test_which_models_the_protocol_changes():
    assert all(reads_document(m) for m in ("tcnlm", "moe", "tdlm", "lda_lstm", "topic_rnn"))
    assert not any(reads_document(m) for m in ("lstm", "lclm", "sdlm"))


def test_both_protocols_side_by_side_as_ratios_to_the_document_lstm(comparisons):
    rest, preceding = comparisons
    text = main(["--rest", str(rest), "--preceding", str(preceding)])
    lines = text.splitlines()
    assert "| tcnlm | 60.00 | 0.938 | 72.00 | 1.125 | 1.200 |" in lines
    assert "| tdlm | 68.00 | 1.062 | not run | - | - |" in lines
    assert "| topic_rnn | not run | - | 70.40 | 1.100 | - |" in lines
    header = "| row | epochs, how it stopped | test ppl | / document LSTM |"
    shared = lines[lines.index(header):]
    assert shared[2:] == ["| lstm | 3, patience | 72.00 | 1.125 |",
                          "| lstm-document | 3, patience | 64.00 | 1.000 |",
                          "| lclm | 3, patience | 80.00 | 1.250 |"]
    assert not any(line.startswith(("| lstm |", "| lclm |")) for line in
                   lines[:lines.index(header)])
    assert (preceding / "protocols.md").read_text() == text


def test_more_shared_rows_from_other_comparisons(comparisons, tmp_path, capsys):
    """A row trained on to convergence in another comparison, under either protocol, joins
    the shared rows beside its fixed-budget namesake; a comparison with another setting, or
    with a row that reads its document (under either protocol), is a one-line error."""
    rest, preceding = comparisons
    write_records(tmp_path / "lstm-only", {"lstm-tied": ("lstm", 65.0)}, "rest")
    saved = json.loads((rest / "compare.json").read_text())
    (rest / "compare.json").write_text(json.dumps(dict(saved, fixed_budget={"lstm": 10})))
    lines = main(["--rest", str(rest), "--preceding", str(preceding),
                  "--causal-records", str(tmp_path / "lstm-only")]).splitlines()
    assert "| lstm | 3, fixed budget (10 epochs) | 72.00 | 1.125 |" in lines
    assert lines[-1] == "| lstm-tied (lstm-only) | 3, patience | 65.00 | 1.016 |"
    assert f"more rows that read no document text from {tmp_path / 'lstm-only'}" in lines[0]
    write_records(tmp_path / "lstm-causal", {"lstm-tied": ("lstm", 66.0)}, "preceding")
    lines = main(["--rest", str(rest), "--preceding", str(preceding),
                  "--causal-records", str(tmp_path / "lstm-causal")]).splitlines()
    assert lines[-1] == "| lstm-tied (lstm-causal) | 3, patience | 66.00 | 1.031 |"
    write_records(tmp_path / "seed1", {"lstm-tied": ("lstm", 65.0)}, "rest",
                  dict(SETTINGS, seed=1))
    write_records(tmp_path / "topics", {"tdlm": ("tdlm", 65.0)}, "rest")
    write_records(tmp_path / "causal-topics", {"tdlm": ("tdlm", 65.0)}, "preceding")
    for directory, message in (("seed1", "differ in seed; give comparisons of one corpus"),
                               ("topics", "tdlm read their document's text"),
                               ("causal-topics", "tdlm read their document's text")):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main(["--rest", str(rest), "--preceding", str(preceding),
                  "--causal-records", str(tmp_path / directory)])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err


def test_a_third_column_trained_under_rest_and_scored_under_preceding(comparisons, tmp_path,
                                                                        capsys):
    rest, preceding = comparisons
    scored = write_records(tmp_path / "scored", {
        "tcnlm": ("tcnlm", 60.0), "tdlm": ("tdlm", 68.5), "topic_rnn": ("topic_rnn", 66.0)},
        "rest", dict(SETTINGS, patience=2), ablations={
            "tcnlm": {"shuffled": 70.0, "preceding": 76.8}, "tdlm": {"shuffled": 70.0},
            "topic_rnn": {"preceding": 67.2}})
    lines = main(["--rest", str(rest), "--preceding", str(preceding),
                  "--rest-scored-preceding", str(scored)]).splitlines()
    assert "| tcnlm | 60.00 | 0.938 | 72.00 | 1.125 | 1.200 | 76.80 | 1.200 |" in lines
    assert "| tdlm | 68.00 | 1.062 | not run | - | - | not run | - |" in lines   # no ablation
    assert "| topic_rnn | not run | - | 70.40 | 1.100 | - | 67.20 | 1.050 |" in lines
    assert ("The rows trained again for the third column with another test perplexity than "
            "their --rest record: tdlm (68.50, --rest 68.00)") in lines
    (scored / "tdlm" / "metrics.json").write_text(json.dumps({"model": "tdlm",
                                                              "test_perplexity": 68.0}))
    lines = main(["--rest", str(rest), "--preceding", str(preceding),
                  "--rest-scored-preceding", str(scored)]).splitlines()
    assert ("The rows trained again for the third column repeat their --rest records' test "
            "perplexity (to 0.01).") in lines
    two = main(["--rest", str(rest), "--preceding", str(preceding)])
    assert "scored on preceding" not in two and "trained again" not in two
    other = write_records(tmp_path / "seed1", {"tcnlm": ("tcnlm", 60.0)}, "rest",
                          dict(SETTINGS, seed=1))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["--rest", str(rest), "--preceding", str(preceding),
              "--rest-scored-preceding", str(other)])
    assert exit_info.value.code == 2
    assert "--rest and --rest-scored-preceding differ in seed" in capsys.readouterr().err


@pytest.mark.parametrize("change, message", [
    ("swap", "give the rest comparison's records first"),
    ("seed", "differ in seed besides --context"),
    ("no baseline", "no record of the document-level LSTM (lstm-document)"),
    ("wrong context", "trained with --context rest, not preceding"),
])
def test_records_that_do_not_belong_together_are_one_line_errors(comparisons, tmp_path,
                                                                 capsys, change, message):
    rest, preceding = comparisons
    argv = ["--rest", str(rest), "--preceding", str(preceding)]
    if change == "swap":
        argv = ["--rest", str(preceding), "--preceding", str(rest)]
    elif change == "seed":
        write_records(tmp_path / "seed1", {"tcnlm": ("tcnlm", 70.0)}, "preceding",
                      dict(SETTINGS, seed=1))
        argv[3] = str(tmp_path / "seed1")
    elif change == "no baseline":
        (rest / "lstm-document" / "metrics.json").unlink()
    else:
        (preceding / "tcnlm" / "config.json").write_text(json.dumps({"data": {"context":
                                                                              "rest"}}))
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


@pytest.mark.parametrize("flags", [["--context", "preceding"], ["--context=preceding"]])
def test_the_protocol_is_read_from_either_spelling_of_the_flag(tmp_path, flags):
    from evaluate.protocols import settings

    (tmp_path / "compare.json").write_text(json.dumps(
        dict(SETTINGS, train_args=["--topic-min-docs", "10", *flags, "--dropout", "0.5"])))
    found = settings(tmp_path, "--preceding")
    assert found["context"] == "preceding"
    assert found["train_args"] == ["--topic-min-docs", "10", "--dropout", "0.5"]


def test_fixed_budgets_must_agree_only_for_the_rows_in_both(comparisons, tmp_path, capsys):
    """A fixed-budget row of the rest comparison that the preceding one did not train (the
    naive MoE, say) is no reason to refuse; a row trained under two budgets is."""
    rest, preceding = comparisons
    saved = json.loads((rest / "compare.json").read_text())
    (rest / "compare.json").write_text(json.dumps(dict(saved, fixed_budget={"moe": 10})))
    assert "| tcnlm | 60.00 |" in main(["--rest", str(rest), "--preceding", str(preceding)])
    (rest / "compare.json").write_text(json.dumps(dict(saved, fixed_budget={"tcnlm": 3})))
    with pytest.raises(SystemExit):
        main(["--rest", str(rest), "--preceding", str(preceding)])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tcnlm trained under another --fixed-budget" in err[0]


def test_two_records_of_a_row_say_where_they_part():
    """The first epoch whose validation perplexity differs (to 0.001) and the epochs after
    which each first lowered its learning rate (the rate an epoch's entry holds is the one
    its end left)."""
    def record(valid, rates):
        return {"epochs": [{"epoch": i + 1, "valid_perplexity": v, "learning_rate": r}
                           for i, (v, r) in enumerate(zip(valid, rates))]}

    rest = record([120.0, 100.0004, 90.0, 91.0], [1e-3, 1e-3, 1e-3, 5e-4])
    other = record([120.0, 100.0, 101.0, 95.0], [1e-3, 1e-3, 5e-4, 5e-4])
    assert where_they_part(rest, other) == (
        "; validation first differs at epoch 3, 101.000 against 90.000; learning rate first "
        "halved after epoch 3 and 4")
    assert where_they_part(rest, rest) == ""
    assert where_they_part({"epochs": [{}] * 3}, other) == ""
