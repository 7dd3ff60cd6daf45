"""``python -m evaluate.compare`` on tiny models: one table, reuse and resume of its runs."""
import json

import pytest

from evaluate.compare import main as compare
from tests.test_evaluate import TINY


def tiny_args(root, *extra):
    # TCNLM's own flags go only to its row; T comes from the comparison's --num-topics
    flags = TINY + ["--num-factors", "16", "--ntm-hidden", "32,32"]
    return ["--models", "lstm,tcnlm", "--num-topics", "4", "--runs-dir", str(root / "runs"),
            "--cache-dir", str(root / "cache"), "--name", "cmp", *extra, "--", *flags]


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    return root, compare(tiny_args(root, "--jobs", "2"))


def test_one_table_with_every_row_and_the_baselines(comparison):
    root, results = comparison
    directory = root / "runs" / "cmp"
    assert list(results) == ["lstm", "tcnlm"]
    table = (directory / "comparison.md").read_text()
    for row, metrics in results.items():
        saved = json.loads((directory / row / "metrics.json").read_text())
        assert saved["test_perplexity"] == metrics["test_perplexity"]
        assert f"| {row} |" in table and f"{metrics['test_perplexity']:.2f}" in table
    tcnlm_model = json.loads((directory / "tcnlm" / "config.json").read_text())["model"]
    assert tcnlm_model["options"]["num_topics"] == 4
    assert tcnlm_model["options"]["num_factors"] == 16
    assert json.loads((directory / "lstm" / "config.json").read_text())["model"][
        "options"] == {}
    assert "oracle (true generator)" in table and "unigram" in table
    ratio = results["tcnlm"]["test_perplexity"] / results["lstm"]["test_perplexity"]
    assert f"| {ratio:.3f} |" in table
    assert (directory / "tcnlm" / "topics.txt").is_file()
    assert results["tcnlm"]["coherence"]["mean"] == json.loads(
        (directory / "tcnlm" / "coherence.json").read_text())["mean"]
    assert "coherence" not in results["lstm"]
    for row in results:   # --jobs 2: each row's training output went to its log
        assert "test perplexity" in (directory / f"{row}.log").read_text()


def test_rerun_reuses_finished_runs(comparison, capfd):
    root, results = comparison
    again = compare(tiny_args(root, "--jobs", "2"))
    assert "reusing" in capfd.readouterr().out
    assert again["lstm"]["test_perplexity"] == results["lstm"]["test_perplexity"]


def test_changed_settings_are_refused(comparison):
    root, _ = comparison
    with pytest.raises(SystemExit) as exit_info:
        compare(tiny_args(root, "--jobs", "2", "--seed", "3"))
    assert exit_info.value.code == 2


@pytest.mark.parametrize("argv,fragment", [
    (["--models", "lstm,gpt"], "--models"),
    (["--", "--max-steps", "3"], "--max-steps"),
    (["--jobs", "0"], "--jobs"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, capsys, argv, fragment):
    with pytest.raises(SystemExit) as exit_info:
        compare(["--runs-dir", str(tmp_path), *argv])
    assert exit_info.value.code == 2
    assert fragment in capsys.readouterr().err


def test_interrupted_row_is_resumed(tmp_path, capfd):
    from train.run import main as train
    train(TINY + ["--model", "lstm", "--max-steps", "2", "--runs-dir",
                   str(tmp_path / "runs" / "cmp"), "--run-name", "lstm",
                   "--cache-dir", str(tmp_path / "cache")])
    results = compare(tiny_args(tmp_path, "--models", "lstm"))
    assert "resuming" in capfd.readouterr().out
    assert results["lstm"]["steps"] > 2 and "test_perplexity" in results["lstm"]
