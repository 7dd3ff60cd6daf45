"""A training process SIGKILLed at a random point mid-epoch, or stopped by SIGTERM, and
resumed ends at exactly the weights of one that never stopped; corpus files of random
bytes, mixed encodings, NUL bytes, 100,000-token lines and lines of TABs either train with
the skipped lines counted or stop with one line, never a traceback."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import REPO_ROOT, TINY_EPOCH, run_flags
from train.run import main

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

#: TINY for 2 whole epochs, a checkpoint after nearly every step
KILLABLE = (TINY_EPOCH + ["--epochs", "2", "--checkpoint-minutes", "0.001"])


def model_tensors(run_dir):
    reader = tf.train.load_checkpoint(str(run_dir / "checkpoints"))
    return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
            if key.startswith("model/")}


@pytest.mark.parametrize("mode", ["sentence", "document"])
def test_a_run_killed_mid_epoch_resumes_to_the_uninterrupted_weights(tmp_path, mode):
    flags = KILLABLE + ["--mode", mode]
    main(flags + run_flags(tmp_path, "whole"))
    killed = tmp_path / "runs" / "killed"
    process = subprocess.Popen([sys.executable, "-m", "train.run", *flags,
                                *run_flags(tmp_path, "killed")], cwd=REPO_ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    deadline = time.monotonic() + 240
    while not list((killed / "checkpoints").glob("ckpt-*.index")):
        assert process.poll() is None and time.monotonic() < deadline, "no checkpoint came"
        time.sleep(0.05)
    time.sleep(random.uniform(0.0, 1.0))          # anywhere after the first checkpoint
    process.kill()
    assert process.wait(timeout=60) == -9, "the run ended before it could be killed"
    resumed = main(flags + run_flags(tmp_path, "killed") + ["--resume"])
    assert resumed["stopped"] == "epochs"
    whole, cut = model_tensors(tmp_path / "runs" / "whole"), model_tensors(killed)
    assert whole.keys() == cut.keys() and whole
    for key in whole:
        np.testing.assert_array_equal(cut[key], whole[key], err_msg=key)


def test_a_run_stopped_by_sigterm_checkpoints_its_step_and_resumes_to_the_same_weights(
        tmp_path):
    """SIGTERM (a scheduler's pre-emption or wall-time limit) during the first step: the
    step finishes, a checkpoint of it is saved (none is due on the clock) with the lanes'
    carried state (stream mode), the process exits 143 saying how to go on, and the resumed
    run ends at exactly the weights of one that never stopped."""
    flags = TINY_EPOCH + ["--epochs", "2", "--mode", "stream"]
    main(flags + run_flags(tmp_path, "whole"))
    stopped = tmp_path / "runs" / "stopped"
    process = subprocess.Popen([sys.executable, "-m", "train.run", *flags,
                                *run_flags(tmp_path, "stopped")], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                                    "PYTHONUNBUFFERED": "1"})
    for line in process.stdout:                   # the first epoch starts: its first step
        if line.startswith("epoch 1/2"):          # is being traced, which takes seconds
            process.send_signal(signal.SIGTERM)
            break
    err = process.communicate(timeout=240)[0]     # stdout and stderr, from the signal on
    assert process.returncode == 143, err[-2000:]
    assert "SIGTERM received" in err and "stopped by SIGTERM after step" in err
    assert f"--resume --runs-dir {tmp_path / 'runs'} --run-name stopped" in err
    step = int(err.split("stopped by SIGTERM after step ")[1].split(":")[0])
    assert (stopped / "checkpoints" / f"ckpt-{step}.index").is_file()
    assert json.loads((stopped / "metrics.json").read_text())["stopped"] == "interrupted"
    assert main(flags + run_flags(tmp_path, "stopped") + ["--resume"])["stopped"] == "epochs"
    whole, cut = model_tensors(tmp_path / "runs" / "whole"), model_tensors(stopped)
    assert whole.keys() == cut.keys() and whole
    for key in whole:
        np.testing.assert_array_equal(cut[key], whole[key], err_msg=key)


def good_lines(rng, count):
    words = [f"w{i}" for i in range(40)]
    return ["\t".join(" ".join(rng.choice(words, size=8)) for _ in range(3))
            for _ in range(count)]


#: kind -> (bad bytes, what the reader reports skipping: None when it keeps everything and
#: reports no skip)
BAD_CONTENT = {
    "random bytes": (lambda rng: bytes(rng.integers(0, 256, 5000, dtype=np.uint8)),
                     "undecodable lines"),
    "mixed encodings": (lambda rng: "caf\u00e9 na\u00efve\tr\u00e9sum\u00e9\n".encode("latin-1")
                        + "caf\u00e9 na\u00efve\n".encode("utf-8")
                        + "\u00fcber alles\n".encode("utf-16"), "undecodable lines"),
    "NUL bytes": (lambda rng: b"w1 w2\x00w3 w4\tw5\x00\x00 w6\n\x00\x00\x00\n",
                  "lines with nul bytes"),
    "a 100,000-token line": (lambda rng: (" ".join(["w1"] * 100_000) + "\n").encode(), None),
    "lines of only TABs": (lambda rng: b"\t\t\t\n\t\n" * 20, "empty lines"),
}


@pytest.mark.parametrize("kind", list(BAD_CONTENT))
def test_bad_corpus_files_train_with_skips_counted(tmp_path, kind, capsys):
    """train.run and train.prepare, called as the command line calls them (in this process,
    so the test does not pay for TensorFlow's start-up each time)."""
    from train.prepare import main as prepare_main
    rng = np.random.default_rng(7)
    corpus = tmp_path / "data" / "apnews"
    corpus.mkdir(parents=True)
    make, skipped = BAD_CONTENT[kind]
    train = ("\n".join(good_lines(rng, 40)) + "\n").encode() + make(rng)
    (corpus / "train.txt").write_bytes(train + ("\n".join(good_lines(rng, 20)) + "\n").encode())
    for split in ("valid", "test"):
        (corpus / f"{split}.txt").write_text("\n".join(good_lines(rng, 6)) + "\n")
    # every one of these trains (the good lines are enough), its bad lines counted
    metrics = main(["--dataset", "apnews", "--data-dir", str(tmp_path / "data"),
                    "--min-freq", "1", "--topic-min-docs", "1", "--hidden-size", "8",
                    "--embedding-dim", "8", "--max-steps", "1", *run_flags(tmp_path, "fuzz")])
    assert metrics["steps"] == 1
    out = capsys.readouterr()
    if skipped:
        assert "skipped" in out.out + out.err and skipped in out.out + out.err
    else:                                        # kept whole: at the reader's length limit
        assert "skipped" not in out.out + out.err
    raw = tmp_path / "raw.txt"
    raw.write_bytes(train)
    prepare_main(["--input", str(raw), "--output", str(tmp_path / "prepared")])
    prepared = "".join(p.read_text() for p in (tmp_path / "prepared").glob("*.txt"))
    assert prepared and "\x00" not in prepared
