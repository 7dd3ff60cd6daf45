"""A run does not depend on the directory it was started from: it stores
its data location absolute, is evaluated and resumed from another working directory, and
when its corpus moved, the evaluators and --resume take --data-dir or $TCNLM_DATA_DIR."""
from __future__ import annotations

import json
import shutil

import pytest

from evaluate.perplexity import main as perplexity
from tcnlm_tf.config import DataConfig
from tcnlm_tf.data.loading import source_dir
from tests.conftest import TINY_EPOCH
from train.run import main as train

#: trains a tiny run: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

#: TINY_EPOCH's sizes without its synthetic-corpus settings, for a corpus of files
SIZES = [flag for i, flag in enumerate(TINY_EPOCH)
         if flag != "--synthetic" and (i == 0 or TINY_EPOCH[i - 1] != "--synthetic")]


def test_a_run_is_evaluated_and_resumed_from_elsewhere_and_after_its_corpus_moved(
        tmp_path, monkeypatch, capsys):
    synthetic = source_dir(DataConfig(dataset="synthetic", synthetic={
        "train_docs": 60, "valid_docs": 8, "test_docs": 8, "num_topics": 4,
        "content_vocab_size": 120, "seed": 5}), cache_dir=tmp_path / "synthetic")
    corpus = tmp_path / "project" / "data" / "apnews"
    corpus.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        shutil.copyfile(synthetic / f"{split}.txt", corpus / f"{split}.txt")
    monkeypatch.delenv("TCNLM_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path / "project")
    flags = SIZES + ["--dataset", "apnews", "--data-dir", "data", "--min-freq", "1",
                     "--topic-min-docs", "1", "--runs-dir", str(tmp_path / "runs"),
                     "--cache-dir", str(tmp_path / "cache"), "--run-name", "moved"]
    trained = train(flags)
    run = tmp_path / "runs" / "moved"
    stored = json.loads((run / "config.json").read_text())["data"]["data_dir"]
    assert stored == str(tmp_path / "project" / "data")             # absolute

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert perplexity(["--run", str(run)])["perplexity"] == pytest.approx(
        trained["test_perplexity"], rel=1e-4)

    shutil.move(str(tmp_path / "project" / "data"), str(tmp_path / "new-home"))
    capsys.readouterr()
    with pytest.raises(SystemExit):
        perplexity(["--run", str(run)])
    err = capsys.readouterr().err.strip()
    assert "corpus not found" in err and "--data-dir" in err and "\n" not in err
    assert perplexity(["--run", str(run), "--data-dir", str(tmp_path / "new-home")])[
        "perplexity"] == pytest.approx(trained["test_perplexity"], rel=1e-4)
    monkeypatch.setenv("TCNLM_DATA_DIR", str(tmp_path / "new-home"))
    assert perplexity(["--run", str(run)])["perplexity"] == pytest.approx(
        trained["test_perplexity"], rel=1e-4)
    monkeypatch.delenv("TCNLM_DATA_DIR")

    # resumed from another directory with the corpus's new location: one more epoch
    resumed = train(["--runs-dir", str(tmp_path / "runs"), "--cache-dir",
                     str(tmp_path / "cache"), "--run-name", "moved", "--resume", "--epochs",
                     "2", "--data-dir", str(tmp_path / "new-home")])
    assert [e["epoch"] for e in resumed["epochs"]] == [1, 2]
