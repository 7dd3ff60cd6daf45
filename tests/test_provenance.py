"""Provenance: every run's metrics say which code, command and machine made it; records name
no path of the machine; ``train.run --config`` re-runs a recorded run from its record alone
to the same weights; its errors are one line."""
import json
import subprocess
import sys

import numpy as np
import pytest

from evaluate.record import main as record
from tcnlm_tf.runs import provenance
from tcnlm_tf.runs.directory import RunDirectory
from tests.conftest import REPO_ROOT, TINY_MODELS
from tests.determinism_check import digest
from train.run import main as train


def test_paths_inside_the_data_directory_are_written_with_a_placeholder(tmp_path):
    data = tmp_path / "data"
    inside = str(data / "stopwords" / "list.txt")
    assert provenance.portable_path(inside, data) == "<data-dir>/stopwords/list.txt"
    assert provenance.expand_path("<data-dir>/stopwords/list.txt", tmp_path / "moved") == str(
        (tmp_path / "moved" / "stopwords" / "list.txt").resolve())
    assert provenance.portable_path("/elsewhere/list.txt", data) == "/elsewhere/list.txt"
    assert provenance.portable({"a": [str(data)], "b": inside, "c": 3}, data) == {
        "a": ["<data-dir>"], "b": "<data-dir>/stopwords/list.txt", "c": 3}
    command = provenance.portable_command(
        ["--data-dir", str(data), "--runs-dir=/r", "--cache-dir", "/c", "--stopwords", inside,
         "--seed", "1"], data)
    assert command == ("python -m train.run --data-dir '<data-dir>' '--runs-dir=<runs-dir>' "
                       "--cache-dir '<cache-dir>' --stopwords '<data-dir>/stopwords/list.txt' "
                       "--seed 1")


def test_an_entry_names_the_commit_threads_cpu_and_versions(monkeypatch):
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "1")
    entry = provenance.collect(["--seed", "2"], None, from_step=7)
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    assert entry["commit"] == (commit or None) and entry["from_step"] == 7
    assert entry["threads"]["TF_NUM_INTRAOP_THREADS"] == "1"
    assert entry["versions"]["tensorflow"] and entry["cpu"]
    assert entry["command"] == "python -m train.run --seed 2"
    assert provenance.commits({"provenance": [entry, entry]}) == [
        (commit or "unknown") + ("+dirty" if entry["dirty"] else "")]
    assert entry["bf16_units"] == provenance.bf16_units()


@pytest.mark.parametrize("flags, units", [
    ({"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}, "AMX_BF16 and AVX512_BF16"),
    ({"avx512f", "avx512_bf16", "avx512_vnni"}, "AVX512_BF16 without AMX"),
    ({"avx2", "fma"}, "none"),
    (set(), "unknown")])
def test_the_cpus_bfloat16_units_come_from_its_flags(monkeypatch, flags, units):
    """A CPU's bfloat16 units, which its name does not tell, named in every run's
    provenance and in the first line of every benchmark printout."""
    from benchmarks.harness import machine_line

    monkeypatch.setattr(provenance, "cpu_flags", lambda: flags)
    assert provenance.bf16_units() == units
    assert f", bfloat16 units {units}, " in machine_line()


def write_corpus(root):
    """A tiny corpus in the TDLM format and a stop-word list inside the data directory."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    for split, count in (("train", 40), ("valid", 6), ("test", 6)):
        lines = []
        for _ in range(count):
            topic = rng.integers(0, 4)
            sentences = [" ".join(rng.choice(words[topic * 10:topic * 10 + 10],
                                             rng.integers(3, 12)))
                         for _ in range(rng.integers(2, 5))]
            lines.append("\t".join(sentences))
        (root / "apnews").mkdir(parents=True, exist_ok=True)
        (root / "apnews" / f"{split}.txt").write_text("\n".join(lines) + "\n")
    (root / "stop.txt").write_text("w0\nw10\n")


TRAIN = ["--dataset", "apnews", "--min-freq", "1", "--topic-min-docs", "2",
         "--hidden-size", "16", "--embedding-dim", "12", "--batch-size", "8", "--seq-len", "6",
         "--epochs", "1", "--log-every", "100", "--seed", "3"]


@pytest.mark.slow
def test_a_recorded_run_re_runs_from_its_record_alone_to_the_same_weights(tmp_path):
    data = tmp_path / "data"
    write_corpus(data)
    model = [flag for flag in TINY_MODELS["tcnlm"]]
    flags = TRAIN + model + ["--data-dir", str(data), "--stopwords", str(data / "stop.txt"),
                             "--cache-dir", str(tmp_path / "cache"), "--runs-dir",
                             str(tmp_path / "runs")]
    first = train(flags + ["--run-name", "first", "--max-steps", "3"])
    resumed = train(["--runs-dir", str(tmp_path / "runs"), "--run-name", "first", "--resume",
                     "--cache-dir", str(tmp_path / "cache")])
    assert [e["from_step"] for e in resumed["provenance"]] == [0, first["steps"]]
    entry = resumed["provenance"][0]
    assert "--data-dir '<data-dir>'" in entry["command"]
    assert "--stopwords '<data-dir>/stop.txt'" in entry["command"]

    records = tmp_path / "results"
    record(["--run", str(tmp_path / "runs" / "first"), "--record-dir", str(records)])
    for path in (records / "first").iterdir():
        assert str(tmp_path) not in path.read_text(), f"{path.name} names a path"
    config = json.loads((records / "first" / "config.json").read_text())
    assert config["data"]["data_dir"] == "<data-dir>"
    assert config["data"]["stopwords"] == "<data-dir>/stop.txt"

    moved = tmp_path / "elsewhere"          # the corpus on another machine
    write_corpus(moved)
    again = train(["--config", str(records / "first" / "config.json"), "--data-dir", str(moved),
                   "--runs-dir", str(tmp_path / "runs"), "--run-name", "again",
                   "--cache-dir", str(tmp_path / "other-cache")])
    assert again["test_perplexity"] == resumed["test_perplexity"]
    assert again["test_documents"] == resumed["test_documents"]
    runs = tmp_path / "runs"
    for files in ("best", "checkpoints"):
        assert digest(getattr(RunDirectory(runs / "again"), files)) == digest(
            getattr(RunDirectory(runs / "first"), files))
    saved = json.loads((runs / "again" / "config.json").read_text())
    original = json.loads((runs / "first" / "config.json").read_text())
    assert saved["data"].pop("data_dir") == str(moved.resolve())
    assert saved["data"].pop("stopwords") == str((moved / "stop.txt").resolve())
    for key in ("data_dir", "stopwords"):
        original["data"].pop(key)
    assert saved == original

    # a flag beside --config replaces that setting only
    seeded = train(["--config", str(records / "first"), "--data-dir", str(moved), "--seed", "4",
                    "--runs-dir", str(runs), "--run-name", "seed4", "--cache-dir",
                    str(tmp_path / "other-cache"), "--max-steps", "1"])
    assert seeded["steps"] == 1
    changed = json.loads((runs / "seed4" / "config.json").read_text())
    assert changed["train"]["seed"] == 4 and changed["model"] == original["model"]


@pytest.mark.parametrize("extra, message", [
    (["--model", "lstm"], "--model cannot change what --config"),
    (["--resume", "--run-name", "x"], "--config starts a new run and --resume continues one"),
])
def test_config_errors_are_one_line(tmp_path, extra, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model": {"model": "tcnlm", "options": {}}}))
    result = subprocess.run([sys.executable, "-m", "train.run", "--config", str(path), *extra,
                             "--runs-dir", str(tmp_path / "runs")], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_every_setting_of_a_run_has_a_flag():
    """--config re-runs every field, and a user can set each one on the command line."""
    from tcnlm_tf.cli.command_line import FIELDS, build_parser

    destinations = {action.dest for action in build_parser()._actions}
    missing = {section: sorted(names - destinations) for section, names in FIELDS.items()}
    assert missing == {"data": [], "model": [], "train": []}
