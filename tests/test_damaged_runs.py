"""A run directory with a damaged file: config.json truncated, not JSON or
not an object; lm_vocab.txt deleted, one line short or a word twice; two words of a
vocabulary swapped (a valid file of the right size); vocab_digests.json damaged. Evaluating
it and resuming it each end in one line naming the file, never a traceback, blame on the
checkpoints or numbers for a scrambled vocabulary, and leave the file as it was."""
from __future__ import annotations

import re
import shutil

import pytest

from evaluate.perplexity import main as perplexity
from tcnlm_tf.errors import UserError
from tcnlm_tf.runs.loading import load_run
from tcnlm_tf.serving.preset import load_preset, save_preset
from tests.conftest import TINY, run_flags
from train.run import main as train

#: trains a tiny run: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("damaged")
    train(TINY + run_flags(workdir, "good"))
    return workdir


def truncate(path):
    text = path.read_text()
    path.write_text(text[:len(text) // 2])


def drop_line(path):
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")


def repeat_line(path):
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + lines[-1:]) + "\n")


def swap_words(path):
    """Two words past the specials trade lines: a valid vocabulary of the same size, whose
    ids now name each other's word."""
    lines = path.read_text().splitlines()
    lines[3], lines[4] = lines[4], lines[3]
    path.write_text("\n".join(lines) + "\n")


DAMAGE = {
    "config-truncated": ("config.json", truncate, "config.json is damaged (not JSON"),
    "config-a-list": ("config.json", lambda p: p.write_text("[]\n"),
                      "config.json is damaged (expected an object"),
    "config-wrong-type": ("config.json",
                          lambda p: p.write_text(re.sub(r'"hidden_size": \d+',
                                                        '"hidden_size": "sixteen"',
                                                        p.read_text())),
                          "model.hidden_size should be of type int, got 'sixteen'"),
    "vocab-deleted": ("lm_vocab.txt", lambda p: p.unlink(), "lm_vocab.txt"),
    "vocab-line-short": ("lm_vocab.txt", drop_line, "lm_vocab.txt"),
    "vocab-word-twice": ("lm_vocab.txt", repeat_line, "lm_vocab.txt"),
    "vocab-swapped": ("lm_vocab.txt", swap_words, "lm_vocab.txt"),
    "topic-vocab-swapped": ("topic_vocab.txt", swap_words, "topic_vocab.txt"),
}


@pytest.mark.parametrize("command", ["evaluate", "resume"])
@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_run_file_is_named_in_one_line(trained, case, command, capsys):
    name, damage, fragment = DAMAGE[case]
    run_dir = trained / "runs" / f"{case}-{command}"
    shutil.copytree(trained / "runs" / "good", run_dir)
    damage(run_dir / name)
    before = (run_dir / name).read_bytes() if (run_dir / name).exists() else None
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        if command == "evaluate":
            perplexity(["--run", str(run_dir)])
        else:
            train(TINY + run_flags(trained, run_dir.name) + ["--resume"])
    assert exit_info.value.code != 0
    err = capsys.readouterr().err.strip()
    last = err.splitlines()[-1]
    assert last.startswith("error: ") and fragment in last, err
    assert "Traceback" not in err and "checkpoint" not in last.split(":")[1]
    after = (run_dir / name).read_bytes() if (run_dir / name).exists() else None
    assert after == before


def digest_a_number(path):
    path.write_text('{"lm_vocab.txt": 7}\n')


@pytest.mark.parametrize("damage", [truncate, digest_a_number])
def test_damaged_vocabulary_digests_are_named_in_one_line(trained, damage, capsys):
    """Evaluating: the digests cannot vouch for the vocabularies (a resume rewrites them
    from the corpus's, which it compares with the files)."""
    run_dir = trained / "runs" / f"digests-{damage.__name__}"
    shutil.copytree(trained / "runs" / "good", run_dir)
    damage(run_dir / "vocab_digests.json")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        perplexity(["--run", str(run_dir)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert str(run_dir / "vocab_digests.json") in err and "restore it" in err


def test_a_preset_with_swapped_words_is_one_error(trained, tmp_path):
    """A preset keeps the run's digests beside the vocabularies in its assets/."""
    preset = save_preset(load_run(trained / "runs" / "good"), tmp_path / "preset")
    swap_words(preset / "assets" / "lm_vocab.txt")
    with pytest.raises(UserError, match="was changed after the run wrote it") as error:
        load_preset(preset)
    assert str(preset / "assets" / "lm_vocab.txt") in str(error.value)
