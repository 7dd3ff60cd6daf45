"""A corpus of one's own, named by its folder: ``--dataset NAME --data-dir DIR`` reads
``DIR/NAME/{train,valid,test}.txt`` with the general settings and says so; a missing split,
an empty file or a name that is not a folder name is one line."""
import argparse
import json
import random
import subprocess
import sys

import pytest

from tcnlm_tf.arguments import dataset_name
from tcnlm_tf.cli.command_line import (GENERAL_TOPIC_MIN_DOCS, build_parser, config_from_args,
                                       corpus_note)
from tcnlm_tf.config import DataConfig
from tcnlm_tf.data.loading import source_dir
from tcnlm_tf.errors import UserError
from tests.conftest import REPO_ROOT, TINY

WORDS = ("senate bill vote market stock price team game win rain storm city council budget "
         "school court").split()


def write_corpus(directory, documents=(40, 6, 6)):
    directory.mkdir(parents=True)
    rng = random.Random(0)
    for split, count in zip(("train", "valid", "test"), documents):
        lines = ("\t".join(" ".join(rng.choice(WORDS) for _ in range(7)) for _ in range(3))
                 for _ in range(count))
        (directory / f"{split}.txt").write_text("\n".join(lines) + "\n")


def config_of(*argv):
    return config_from_args(build_parser().parse_args(list(argv)))


def test_a_name_is_one_folder_name():
    assert dataset_name("my-corpus_2.v1") == "my-corpus_2.v1"
    for bad in ("../etc", "a/b", "", ".hidden", "with space"):
        with pytest.raises(argparse.ArgumentTypeError, match="not a corpus name"):
            dataset_name(bad)


def test_own_corpora_get_the_general_settings_and_the_papers_theirs(tmp_path):
    own = config_of("--dataset", "mycorpus", "--data-dir", str(tmp_path))
    assert own.data.topic_min_docs == GENERAL_TOPIC_MIN_DOCS
    assert "general settings" in corpus_note(own.data)
    assert f"at least {GENERAL_TOPIC_MIN_DOCS} training documents" in corpus_note(own.data)
    paper = config_of("--dataset", "apnews", "--data-dir", str(tmp_path))
    assert paper.data.topic_min_docs == 100 and corpus_note(paper.data) is None
    chosen = config_of("--dataset", "mycorpus", "--data-dir", str(tmp_path),
                       "--topic-min-docs", "3")
    assert chosen.data.topic_min_docs == 3 and "at least 3 training" in corpus_note(chosen.data)


def test_a_missing_split_names_the_file_and_what_the_folder_holds(tmp_path):
    write_corpus(tmp_path / "half")
    (tmp_path / "half" / "valid.txt").unlink()
    with pytest.raises(UserError) as error:
        source_dir(DataConfig(dataset="half", data_dir=str(tmp_path)))
    message = str(error.value)
    assert str(tmp_path / "half" / "valid.txt") in message and "holds test.txt, train.txt" \
        in message and "train.prepare" in message and "\n" not in message


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_split_is_one_line(tmp_path, text):
    write_corpus(tmp_path / "empty")
    (tmp_path / "empty" / "test.txt").write_text(text)
    with pytest.raises(UserError, match=r"empty/test.txt holds no text"):
        source_dir(DataConfig(dataset="empty", data_dir=str(tmp_path)))


@pytest.mark.slow
def test_training_on_an_own_corpus(tmp_path):
    write_corpus(tmp_path / "data" / "mycorpus")
    tiny = TINY[TINY.index("--hidden-size"):]      # the sizes and budget, not the synthetic corpus
    result = subprocess.run(
        [sys.executable, "-m", "train.run", "--dataset", "mycorpus", "--data-dir",
         str(tmp_path / "data"), "--runs-dir", str(tmp_path / "runs"), "--cache-dir",
         str(tmp_path / "cache"), "--run-name", "own", "--min-freq", "1", *tiny],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "corpus 'mycorpus' is not one the papers name" in result.stdout
    config = json.loads((tmp_path / "runs" / "own" / "config.json").read_text())
    assert config["data"]["dataset"] == "mycorpus"
    assert config["data"]["topic_min_docs"] == GENERAL_TOPIC_MIN_DOCS
