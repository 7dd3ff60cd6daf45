"""A corpus of one's own, named by its folder: ``--dataset NAME --data-dir DIR`` reads
``DIR/NAME/{train,valid,test}.txt`` with the general settings and says so; a missing split,
an empty file or a name that is not a folder name is one line."""
import argparse
import ast
import contextlib
import io
import json
import random
import re

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


#: raw text, one article per file, for the quickstart: sentences of a few topics' words
TOPIC_WORDS = ("senate bill vote law", "market stock price bank", "team game win season",
               "rain storm wind coast")


def write_raw_articles(directory, count=48):
    """``count`` raw-text articles, each mostly about one of :data:`TOPIC_WORDS`' topics."""
    directory.mkdir(parents=True)
    rng = random.Random(1)
    for i in range(count):
        words = TOPIC_WORDS[i % len(TOPIC_WORDS)].split()
        sentences = [" ".join(rng.choice(words + ["the", "a", "of"]) for _ in range(6))
                     .capitalize() + "." for _ in range(4)]
        (directory / f"article{i}.txt").write_text(" ".join(sentences) + "\n")


def readme_python_quickstart() -> str:
    """The README's Python quickstart block."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"<!-- python-api-quickstart -->\s*```python\n(.*?)```", text,
                     re.S).group(1)


@pytest.mark.slow
def test_the_quickstart_from_raw_text_to_generating_from_python(tmp_path, monkeypatch):
    """The README's quickstart on a tiny corpus, in a fresh folder: raw articles ->
    train.prepare -> data/mycorpus -> a TCNLM trained with the general settings ->
    evaluate.perplexity -> train.export -> its Python block (load the export, perplexity,
    topics, top-p generation, a preset), whose numbers are the commands'."""
    from evaluate.perplexity import main as perplexity_main
    from evaluate.score import main as score_main
    from train.export import main as export_main
    from train.prepare import main as prepare_main
    from train.run import main as train_main

    monkeypatch.chdir(tmp_path)
    write_raw_articles(tmp_path / "my_articles")
    prepare_main(["--input", "my_articles/", "--output", "data/mycorpus"])
    tiny = TINY[TINY.index("--hidden-size"):]      # the sizes and budget, not the synthetic corpus
    train_main(["--dataset", "mycorpus", "--data-dir", "data", "--model", "tcnlm",
                "--run-name", "my-tcnlm", "--num-topics", "4", "--min-freq", "1",
                "--cache-dir", str(tmp_path / "cache"), *tiny])
    config = json.loads((tmp_path / "runs" / "my-tcnlm" / "config.json").read_text())
    assert config["data"]["dataset"] == "mycorpus"
    assert config["data"]["topic_min_docs"] == GENERAL_TOPIC_MIN_DOCS
    evaluated = perplexity_main(["--run", "runs/my-tcnlm"])
    saved = export_main(["--run", "runs/my-tcnlm"])
    served = score_main(["--saved-model", str(saved), "--text-file", "data/mycorpus/test.txt"])
    assert served["perplexity"] == pytest.approx(evaluated["perplexity"], rel=1e-5)

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(readme_python_quickstart(), {})
    perplexity, topics, generated = [ast.literal_eval(line)
                                     for line in printed.getvalue().splitlines()]
    assert perplexity == pytest.approx(served["perplexity"], rel=1e-5)
    assert len(topics) == 3 and all(len(words) == 10 for words in topics)
    assert len(generated) == 2 and all(s.startswith("the senate") for s in generated)
    import tcnlm_tf
    preset = tcnlm_tf.load("presets/my-tcnlm")
    assert preset.perplexity("data/mycorpus/test.txt") == pytest.approx(
        evaluated["perplexity"], rel=1e-5)
