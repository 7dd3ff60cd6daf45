"""``python -m evaluate.compare`` on tiny models: one table, reuse and resume of its runs."""
import json
import subprocess

import numpy as np
import pytest

from evaluate.compare import main as compare
from tcnlm_tf.errors import UserError
from tests.conftest import git, init_repo
from tests.test_evaluate import TINY

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow


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
        "options"] == {"embeddings": None}            # no topic option reached the LSTM
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


def test_ablations_score_the_topic_rows_again_without_training(comparison, capfd):
    root, _ = comparison
    results = compare(tiny_args(root, "--jobs", "2", "--ablations"))
    assert "training in" not in capfd.readouterr().out
    directory = root / "runs" / "cmp"
    saved = json.loads((directory / "tcnlm" / "ablations.json").read_text())
    assert results["tcnlm"]["ablations"] == saved and "ablations" not in results["lstm"]
    assert set(saved) == {"shuffled", "uniform", "preceding"}   # trained under rest
    own = results["tcnlm"]["test_perplexity"]
    row = (f"| tcnlm, T=4 | {own:.2f} | {saved['shuffled']:.2f} "
           f"({saved['shuffled'] / own:.3f}×) | {saved['uniform']:.2f} "
           f"({saved['uniform'] / own:.3f}×) | {saved['preceding']:.2f} "
           f"({saved['preceding'] / own:.3f}×) |")
    table = (directory / "comparison.md").read_text()
    assert row in table and "| the preceding text only |" in table
    assert saved["preceding"] != own        # the same weights, scored with less context


@pytest.mark.parametrize("mode,context,expected", [
    ("sentence", None, ["shuffled", "uniform", "preceding"]),    # a run saved before --context
    ("sentence", "rest", ["shuffled", "uniform", "preceding"]),
    ("sentence", "preceding", ["shuffled", "uniform"]),
    ("document", "rest", ["shuffled", "uniform"]),
])
def test_only_a_sentence_run_trained_under_rest_is_scored_on_the_preceding_text(
        tmp_path, mode, context, expected):
    from evaluate.compare import ablation_flags
    data = {"dataset": "apnews"} if context is None else {"dataset": "apnews",
                                                           "context": context}
    (tmp_path / "config.json").write_text(json.dumps({"data": data, "model": {"mode": mode}}))
    flags = ablation_flags(tmp_path)
    assert list(flags) == expected
    assert flags.get("preceding") in (None, ["--context", "preceding"])


def test_changed_settings_are_refused(comparison, capsys):
    root, _ = comparison
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        compare(tiny_args(root, "--jobs", "2", "--seed", "3"))
    assert exit_info.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "made with other settings (seed differ)" in line and "use --name" in line


def test_parallel_runs_share_the_cpus_unless_the_environment_says_otherwise(monkeypatch):
    from evaluate.compare import THREAD_VARIABLES, child_environment

    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3, 4})
    assert not set(THREAD_VARIABLES) & set(child_environment(1))
    assert [child_environment(2)[name] for name in THREAD_VARIABLES] == ["2", "2"]
    assert [child_environment(8)[name] for name in THREAD_VARIABLES] == ["1", "1"]
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "3")
    env = child_environment(2)
    assert env["TF_NUM_INTRAOP_THREADS"] == "3" and "TF_NUM_INTEROP_THREADS" not in env


def test_an_evaluation_that_exits_fails_its_row_and_the_others_go_on(tmp_path, capsys):
    """An evaluation command run in-process after a row trains ends with SystemExit(2) on
    a one-line error: the row is reported as trained but not evaluated, and the other rows
    (two at a time) still finish, instead of the comparison ending with them orphaned."""
    import sys

    from evaluate.compare import failure_message, run_commands

    done = []

    def evaluate(row):
        if row == "a":
            raise SystemExit(2)
        done.append(row)

    commands = {row: [sys.executable, "-c", "pass"] for row in ("a", "b", "c")}
    failed = run_commands(commands, tmp_path, jobs=2, on_success=evaluate)
    assert sorted(done) == ["b", "c"] and list(failed) == ["a"]
    message = failure_message(failed, tmp_path)
    assert "a trained, but" in message and "exit status 2" in message
    assert "training failed" not in message


def test_a_row_without_runs_may_join_at_a_fixed_budget_but_no_budget_changes(tmp_path):
    """A comparison may gain a --fixed-budget row none of whose runs exists yet (fixed-budget
    rows are added to a comparison last); a budget of a row that has runs, or one given
    before, may not change."""
    from evaluate.compare import SETTINGS_FILE, check_settings

    base = {"dataset": "apnews", "max_epochs": 30}
    check_settings(tmp_path, base)
    (tmp_path / "lstm").mkdir()
    runs_of = lambda row: [row, f"{row}-seed1"]  # noqa: E731
    check_settings(tmp_path, dict(base, fixed_budget={"moe": 10}), runs_of)
    assert json.loads((tmp_path / SETTINGS_FILE).read_text())["fixed_budget"] == {"moe": 10}
    (tmp_path / "moe-seed1").mkdir()
    for budget, row in (({"moe": 5}, "moe"), ({}, "moe"), ({"moe": 10, "lstm": 3}, "lstm")):
        with pytest.raises(UserError, match=f"holds runs of {row} under another --fixed-budget"):
            check_settings(tmp_path, dict(base, fixed_budget=budget), runs_of)
    check_settings(tmp_path, dict(base, fixed_budget={"moe": 10, "sdlm": 10}), runs_of)
    with pytest.raises(UserError, match="other settings"):
        check_settings(tmp_path, dict(base, dataset="synthetic", fixed_budget={"moe": 10,
                                                                                "sdlm": 10}))


def test_a_larger_max_epochs_trains_on_the_rows_stopped_on_the_cap(tmp_path, capfd):
    """A row stopped on a cap of 1 epoch continues to 2 under --max-epochs 2, its first
    epoch kept; the cap may not shrink, and the grown comparison reuses the row."""
    flags = [f for f in TINY if f not in ("--epochs", "2")]
    assert "--epochs" not in flags

    def run(cap):
        return compare(["--models", "lstm", "--max-epochs", str(cap), "--patience", "5",
                        "--runs-dir", str(tmp_path / "runs"), "--cache-dir",
                        str(tmp_path / "cache"), "--name", "cmp", "--", *flags])["lstm"]

    first = run(1)
    assert first["stopped"] == "epochs" and len(first["epochs"]) == 1
    capfd.readouterr()
    second = run(2)
    assert "stopped on the epoch cap after 1 epoch; training on to --max-epochs 2" in (
        capfd.readouterr().out)
    assert [e["epoch"] for e in second["epochs"]] == [1, 2]
    assert second["epochs"][0] == first["epochs"][0] and second["steps"] == 2 * first["steps"]
    config = json.loads((tmp_path / "runs" / "cmp" / "lstm" / "config.json").read_text())
    assert config["train"]["epochs"] == 2
    with pytest.raises(SystemExit) as exit_info:
        run(1)
    assert exit_info.value.code == 2 and "can grow, not shrink" in capfd.readouterr().err
    assert run(2)["test_perplexity"] == second["test_perplexity"]
    assert "reusing" in capfd.readouterr().out


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


def test_converged_runs_with_seeds_learning_rates_curves_and_tensorboard(tmp_path):
    """The default budget trains until early stopping (here patience 1 or a cap of 3
    epochs); two seeds and two learning rates make four runs, the table keeps the better
    rate and shows mean ± standard deviation, and the curves go to a PNG and TensorBoard."""
    from tensorboard.backend.event_processing import event_accumulator

    flags = [f for f in TINY if f not in ("--epochs", "2", "--learning-rate", "0.005")]
    assert "--epochs" not in flags
    results = compare(["--models", "lstm", "--seeds", "0,1", "--learning-rates", "0.005,0.02",
                       "--max-epochs", "3", "--patience", "1", "--runs-dir",
                       str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"),
                       "--name", "cmp", "--", *flags])
    directory = tmp_path / "runs" / "cmp"
    assert sorted(results) == ["lstm-seed0-lr0.005", "lstm-seed0-lr0.02", "lstm-seed1-lr0.005",
                               "lstm-seed1-lr0.02"]
    for name, metrics in results.items():
        config = json.loads((directory / name / "config.json").read_text())["train"]
        assert config["epochs"] == 3 and config["patience"] == 1
        assert config["seed"] == int(name[len("lstm-seed")]) and name.endswith(
            f"lr{config['learning_rate']:g}")
        assert len(metrics["epochs"]) == 3 or metrics["stopped"] == "early_stopping"
    rows = json.loads((directory / "comparison.json").read_text())["rows"]
    assert len(rows) == 1
    best = min((0.005, 0.02), key=lambda r: np.mean(
        [results[f"lstm-seed{s}-lr{r:g}"]["best_valid_perplexity"] for s in (0, 1)]))
    tests = [results[f"lstm-seed{s}-lr{best:g}"]["test_perplexity"] for s in (0, 1)]
    assert rows[0]["learning_rate"] == best and rows[0]["seeds"] == [0, 1]
    np.testing.assert_allclose(rows[0]["test"], [np.mean(tests), np.std(tests, ddof=1)])
    table = (directory / "comparison.md").read_text()
    assert f"{np.mean(tests):.2f} ± {np.std(tests, ddof=1):.2f}" in table
    assert "until converged: patience 1, at most 3 epochs" in table
    assert (directory / "valid_curves.png").read_bytes()[:4] == b"\x89PNG"
    acc = event_accumulator.EventAccumulator(str(directory / "tensorboard" / "lstm-seed1-lr0.02"),
                                             size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    events = acc.Tensors("compare/valid_perplexity")
    metrics = results["lstm-seed1-lr0.02"]
    assert [e.step for e in events] == [metrics["train_tokens_per_epoch"] * (k + 1)
                                        for k in range(len(metrics["epochs"]))]


@pytest.mark.parametrize("argv,fragment", [
    (["--seeds", "1,1"], "--seeds"),
    (["--fixed-budget", "moe=0"], "--fixed-budget"),
    (["--models", "lstm", "--fixed-budget", "moe=2"], "moe"),
    (["--learning-rates", "0.1", "--", "--learning-rate", "0.2"], "--learning-rate"),
    (["--", "--seed", "3"], "--seeds"),
])
def test_bad_convergence_arguments_are_one_line_errors(tmp_path, capsys, argv, fragment):
    with pytest.raises(SystemExit) as exit_info:
        compare(["--runs-dir", str(tmp_path), *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err


def test_records_are_committed_and_rebuild_the_table_in_a_clean_clone(tmp_path, capfd):
    """Each finished row's record goes to --record-dir and, with --commit-records, into its
    own commit at once; in a clean clone of that repository, with no run directory at all,
    the same command trains nothing and rebuilds the same table from the records."""
    repo = init_repo(tmp_path / "repo")
    (repo / "unrelated.txt").write_text("staged, not part of any record\n")
    git("add", "unrelated.txt", cwd=repo)
    record = repo / "results" / "cmp"
    first = compare(tiny_args(tmp_path, "--record-dir", str(record), "--commit-records",
                              "--ablations"))
    subjects = git("log", "--format=%s", cwd=repo).splitlines()
    assert [s.split(",")[0] for s in subjects[:2]] == ["results: cmp/tcnlm", "results: cmp/lstm"]
    assert "unrelated.txt" not in git("show", "--name-only", "--format=", "HEAD", cwd=repo)
    assert "unrelated.txt" in git("diff", "--cached", "--name-only", cwd=repo)   # still staged
    committed = git("ls-files", cwd=repo).split()
    for path in ("lstm/metrics.json", "lstm/config.json", "tcnlm/topics.txt",
                 "tcnlm/coherence.json", "tcnlm/ablations.json", "compare.json",
                 "comparison.md", "valid_curves.png"):
        assert f"results/cmp/{path}" in committed
    capfd.readouterr()

    # the same command again evaluates the finished rows anew and, where that equals their
    # records, writes and commits nothing
    head = git("rev-parse", "HEAD", cwd=repo)
    compare(tiny_args(tmp_path, "--record-dir", str(record), "--commit-records", "--ablations"))
    assert git("rev-parse", "HEAD", cwd=repo) == head
    assert "evaluated anew" not in capfd.readouterr().out
    # a record scored before the toolkit convention (none named, another NPMI) is scored
    # again from its run directory, rewritten and committed
    path = record / "tcnlm" / "metrics.json"
    old = json.loads(path.read_text())
    coherence = {k: v for k, v in old["coherence"].items() if k != "convention"}
    path.write_text(json.dumps({**old, "coherence": {**coherence, "mean": -0.5}}))
    git("commit", "-q", "-m", "an old record", str(path), cwd=repo)
    compare(tiny_args(tmp_path, "--record-dir", str(record), "--commit-records", "--ablations"))
    out = capfd.readouterr().out
    assert f"== tcnlm: recorded in {record / 'tcnlm'} again (coherence evaluated anew)" in out
    assert "== lstm: recorded in" not in out
    assert json.loads(path.read_text()) == old
    assert git("log", "-1", "--format=%s", cwd=repo).strip().endswith(
        "after 2 epochs (epochs) again (coherence evaluated anew)")
    assert old["coherence"]["convention"] == "toolkit"
    assert "top_words" not in old["coherence"]             # they stay in coherence.json
    words = json.loads((record / "tcnlm" / "coherence.json").read_text())["top_words"]
    # the words scored: 20 for the NPMI, 25 for the diversity
    assert len(words) == 4 and all(len(topic) == 25 for topic in words)
    assert set(old["coherence"]["diversity"]) == {"10", "25"}
    # without --ablations the rows' ablation scores stay in their records; an early row
    # rewritten alone is committed with the table of every row, not of the rows before it
    path = record / "lstm" / "metrics.json"
    lstm = json.loads(path.read_text())
    path.write_text(json.dumps({**lstm, "size": "an older size"}))
    git("commit", "-q", "-m", "an old record", str(path), cwd=repo)
    compare(tiny_args(tmp_path, "--record-dir", str(record), "--commit-records"))
    out = capfd.readouterr().out
    assert "lstm: recorded in" in out and "tcnlm: recorded in" not in out
    assert json.loads(path.read_text()) == lstm
    assert json.loads((record / "tcnlm" / "metrics.json").read_text()) == old
    files = git("show", "--name-only", "--format=", "HEAD", cwd=repo).split()
    assert "results/cmp/comparison.md" in files and "results/cmp/lstm/metrics.json" in files
    table = git("show", "HEAD:results/cmp/comparison.md", cwd=repo)
    assert "| lstm |" in table and "| tcnlm |" in table
    head = git("rev-parse", "HEAD", cwd=repo)       # with --ablations again: nothing new
    compare(tiny_args(tmp_path, "--record-dir", str(record), "--commit-records", "--ablations"))
    assert "recorded in" not in capfd.readouterr().out
    assert git("rev-parse", "HEAD", cwd=repo) == head

    clone = tmp_path / "clone"
    git("clone", "-q", str(repo), str(clone), cwd=tmp_path)
    second = compare(tiny_args(tmp_path / "elsewhere", "--record-dir",
                               str(clone / "results" / "cmp"), "--ablations"))
    out = capfd.readouterr().out
    assert out.count("counted as finished") == 2 and "training in" not in out
    assert not (tmp_path / "elsewhere" / "runs" / "cmp" / "lstm").exists()
    for row in ("lstm", "tcnlm"):
        assert second[row]["test_perplexity"] == first[row]["test_perplexity"]
        assert second[row]["epochs"] == first[row]["epochs"]
    assert second["tcnlm"]["coherence"] == first["tcnlm"]["coherence"]
    assert second["tcnlm"]["ablations"] == first["tcnlm"]["ablations"]
    rebuilt = (clone / "results" / "cmp" / "comparison.md").read_text()
    original = (record / "comparison.md").read_text()
    assert "Read from their records in results/cmp (no run directory here): lstm, tcnlm" \
        in rebuilt
    assert [line for line in rebuilt.splitlines() if line.startswith("| ")] == [
        line for line in original.splitlines() if line.startswith("| ")]


def test_a_record_left_uncommitted_is_found(tmp_path):
    """A record written but never committed (its commit failed, or the comparison stopped
    in between) is found, file by file, so that the next comparison commits it; a committed
    one is not."""
    from evaluate.compare import uncommitted

    repo = init_repo(tmp_path / "repo")
    record = repo / "records" / "lstm"
    record.mkdir(parents=True)
    (record / "metrics.json").write_text("{}\n")
    (record / "config.json").write_text("{}\n")
    assert [p.name for p in uncommitted(record)] == ["config.json", "metrics.json"]
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "records", cwd=repo)
    assert uncommitted(record) == []
    (record / "metrics.json").write_text("{\"changed\": 1}\n")
    assert [p.name for p in uncommitted(record)] == ["metrics.json"]


def test_commit_records_needs_a_record_dir_in_a_git_work_tree(tmp_path, capsys):
    for extra, fragment in ((["--commit-records"], "needs --record-dir"),
                            (["--commit-records", "--record-dir", str(tmp_path / "plain")],
                             "is not inside a git work tree")):
        with pytest.raises(SystemExit):
            compare(tiny_args(tmp_path, *extra))
        err = capsys.readouterr().err.strip()
        assert fragment in err and "\n" not in err


def test_a_second_comparison_of_one_directory_is_refused_while_the_first_runs(tmp_path,
                                                                             capsys):
    """A second evaluate.compare of one --name (a resubmitted job) is refused with one line
    while the first runs, rather than training its rows beside the first one's (``lstm-2``)
    and tabulating them."""
    import os
    import sys
    import time

    from tests.conftest import REPO_ROOT

    argv = tiny_args(tmp_path, "--models", "lstm")
    first = subprocess.Popen([sys.executable, "-m", "evaluate.compare", *argv], cwd=REPO_ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    settings = tmp_path / "runs" / "cmp" / "compare.json"
    deadline = time.monotonic() + 120
    while not settings.is_file():
        assert first.poll() is None and time.monotonic() < deadline, "the first did not start"
        time.sleep(0.05)
    with pytest.raises(SystemExit) as exit_info:
        compare(argv)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err
    assert f"is in use by process {first.pid} on " in err and "another --name" in err
    assert first.wait(timeout=300) == 0, first.stderr.read()
    runs = sorted(p.name for p in (tmp_path / "runs" / "cmp").iterdir() if p.is_dir())
    assert "lstm" in runs and "lstm-2" not in runs


def test_a_comparison_started_in_another_directory_trains_its_rows(tmp_path, monkeypatch):
    """evaluate.compare started in a working directory of its own trains its rows: their
    ``python -m train.run`` imports this project's trainer without the project on
    PYTHONPATH ("training failed for lstm" otherwise); relative paths stay relative to that
    directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    results = compare(["--models", "lstm", "--runs-dir", "runs", "--cache-dir", "cache",
                       "--name", "cmp", "--max-epochs", "1", "--", *TINY])
    assert "test_perplexity" in results["lstm"]
    assert (tmp_path / "runs" / "cmp" / "lstm" / "metrics.json").is_file()
