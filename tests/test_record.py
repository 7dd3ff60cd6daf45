"""``evaluate.record``: a finished run's record written into a tracked folder and committed
alone, from a hand-made run directory (no training), and one-line errors for a directory
that is no run and for a run that has not finished."""
import json

import pytest

from evaluate.record import main
from tests.conftest import git, init_repo

METRICS = {"model": "lstm", "test_perplexity": 104.1, "stopped": "epochs",
           "epochs": [{"epoch": 1, "valid_perplexity": 300.0},
                      {"epoch": 2, "valid_perplexity": 200.5}]}


def make_run(directory, metrics=METRICS):
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(
        {"model": {"model": "lstm", "num_layers": 2, "hidden_size": 650, "options": {}}}))
    (directory / "metrics.json").write_text(json.dumps(metrics))
    return directory


@pytest.fixture
def repo(tmp_path):
    return init_repo(tmp_path / "repo")


def test_a_finished_run_is_recorded_and_committed_alone(tmp_path, repo, capsys):
    run = make_run(tmp_path / "runs" / "pd-tied")
    (repo / "unrelated.txt").write_text("staged, not part of the record\n")
    git("add", "unrelated.txt", cwd=repo)
    record = repo / "results" / "i29"
    main(["--run", str(run), "--record-dir", str(record), "--commit-records"])
    assert git("log", "-1", "--format=%s", cwd=repo).strip() == (
        "results: i29/pd-tied, test perplexity 104.10 after 2 epochs (epochs)")
    assert sorted(git("show", "--name-only", "--format=", "HEAD", cwd=repo).split()) == [
        "results/i29/pd-tied/config.json", "results/i29/pd-tied/metrics.json"]
    assert "unrelated.txt" in git("diff", "--cached", "--name-only", cwd=repo)  # still staged
    recorded = json.loads((record / "pd-tied" / "metrics.json").read_text())
    assert recorded == {**METRICS, "size": "2x650"}
    assert json.loads((record / "pd-tied" / "config.json").read_text()) == json.loads(
        (run / "config.json").read_text())
    assert "test perplexity 104.10 after 2 epochs" in capsys.readouterr().out
    # again: the same files, so nothing new to commit
    main(["--run", str(run), "--record-dir", str(record), "--commit-records"])
    assert git("rev-list", "--count", "HEAD", cwd=repo).strip() == "2"
    assert "already committed" in capsys.readouterr().out


@pytest.mark.parametrize("case, message", [
    ("no run", "no config.json there; give the directory of a train.run run"),
    ("unfinished", "not finished (its metrics have no test perplexity yet)"),
    ("no git", "is not inside a git work tree"),
    ("a file in the way", "cannot write"),
    ("damaged config", "cannot read"),
])
def test_what_cannot_be_recorded_is_a_one_line_error(tmp_path, capsys, case, message):
    run, records, flags = tmp_path / "empty", tmp_path / "records", []
    run.mkdir()
    if case == "unfinished":
        run = make_run(tmp_path / "unfinished", {k: v for k, v in METRICS.items()
                                                 if k != "test_perplexity"})
    elif case == "no git":
        run, flags = make_run(tmp_path / "finished"), ["--commit-records"]
    elif case == "damaged config":
        run = make_run(tmp_path / "finished")
        (run / "config.json").write_text('{"model": ')
    elif case == "a file in the way":
        run = make_run(tmp_path / "finished")
        records.write_text("not a folder\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["--run", str(run), "--record-dir", str(records), *flags])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (records / run.name / "metrics.json").exists()
