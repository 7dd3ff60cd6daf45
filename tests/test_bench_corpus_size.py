"""Tests for ``python -m benchmarks.bench_corpus_size``: the corpus generator, the measured
child processes, the flags' one-line errors, and the whole benchmark at tiny sizes (with a
baseline at ``HEAD``, checked out from a clone so that this checkout's repository is left
as it is)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import bench_corpus_size as bench
from tcnlm_tf.cli.command_line import build_parser, config_from_args
from tcnlm_tf.data.corpus import ReadStats, iter_corpus_file
from tcnlm_tf.data.loading import load_corpus
from tests.conftest import REPO_ROOT

#: trains tiny runs: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

PROGRAM = [sys.executable, "-m", "benchmarks.bench_corpus_size"]
SMALL = bench.CorpusSpec(tokens=6_000, vocabulary=500, topics=5, seed=3)
TINY_TRAINING = ["--steps", "3", "--models", "lstm", "--hidden-size", "16",
                 "--embedding-dim", "8", "--batch-size", "8", "--seq-len", "10"]


def env() -> dict[str, str]:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO_ROOT)}


def split_tokens(path: Path) -> list[list[list[str]]]:
    """The documents of a split file: sentences (split at TABs) of tokens (at spaces)."""
    return [[sentence.split(" ") for sentence in line.split("\t")]
            for line in path.read_text(encoding="ascii").split("\n")[:-1]]


# ------------------------------------------------------------------------------ generator


def test_generated_corpus_format_counts_and_determinism(tmp_path):
    info = bench.generate_corpus(tmp_path / "a", SMALL)
    assert bench.generate_corpus(tmp_path / "b", SMALL)["splits"] == info["splits"]
    bench.generate_corpus(tmp_path / "c", bench.CorpusSpec(6_000, 500, 5, seed=4))
    words = set(bench.pseudo_words(SMALL.vocabulary))
    assert len(words) == SMALL.vocabulary
    for split in bench.SPLITS:
        text = (tmp_path / "a" / f"{split}.txt").read_bytes()
        assert text == (tmp_path / "b" / f"{split}.txt").read_bytes()       # same seed
        assert text != (tmp_path / "c" / f"{split}.txt").read_bytes()       # other seed
        assert text.endswith(b"\n") and text == text.lower()
        assert set(text) <= set(b"abcdefghijklmnopqrstuvwxyz \t\n")
        assert b"  " not in text and b" \t" not in text and b"\t " not in text
        assert b" \n" not in text and b"\t\n" not in text and b"\n\n" not in text
        documents = split_tokens(tmp_path / "a" / f"{split}.txt")
        sentences = [s for d in documents for s in d]
        tokens = [t for s in sentences for t in s]
        counts = info["splits"][split]
        expected = SMALL.tokens if split == "train" else SMALL.held_out_tokens()
        assert len(tokens) == counts["tokens"] == expected
        assert len(documents) == counts["documents"] and len(documents) >= 3
        assert len(sentences) == counts["sentences"]
        assert len(text) == counts["bytes"]
        assert set(tokens) <= words
        assert all(1 <= len(s) <= bench.TOKENS_PER_SENTENCE[1] for s in sentences)
        # every document but the last (cut to the exact count) has 10 to 30 sentences
        assert all(bench.SENTENCES_PER_DOCUMENT[0] <= len(d) <= bench.SENTENCES_PER_DOCUMENT[1]
                   for d in documents[:-1])
        # the project's own reader takes every line, and skips nothing
        stats = ReadStats()
        assert sum(1 for _ in iter_corpus_file(tmp_path / "a" / f"{split}.txt", stats)) \
            == len(documents)
        assert stats.tokens == len(tokens) and not stats.problems(Path(split))
    assert json.loads((tmp_path / "a" / "generated.json").read_text())["spec"] \
        == SMALL.to_dict()


def test_generated_words_are_zipfian_with_topic_blocks(tmp_path):
    spec = bench.CorpusSpec(tokens=60_000, vocabulary=2_000, topics=10, seed=0)
    bench.generate_corpus(tmp_path / "c", spec)
    rank = {w: i for i, w in enumerate(bench.pseudo_words(spec.vocabulary))}
    documents = split_tokens(tmp_path / "c" / "train.txt")
    ids = [np.array([rank[t] for s in d for t in s]) for d in documents]
    every = np.concatenate(ids)
    general = every < spec.general
    assert general.mean() == pytest.approx(bench.GENERAL_SHARE, abs=0.02)
    counts = np.bincount(every[general], minlength=spec.general)
    # Zipf, exponent 1: rank 1 about twice as frequent as rank 2, ten times rank 10
    assert counts[0] / counts[1] == pytest.approx(2.0, rel=0.15)
    assert counts[0] / counts[9] == pytest.approx(10.0, rel=0.25)
    # a document's topic words come from at most three blocks, most from one to three
    blocks = [np.unique((d[d >= spec.general] - spec.general) // spec.block) for d in ids]
    assert all(len(b) <= bench.TOPICS_PER_DOCUMENT[1] for b in blocks)
    assert all(len(b) >= 1 for b in blocks[:-1])        # the last one may be cut short
    assert len({int(b) for bs in blocks for b in bs}) == spec.topics


def test_corpus_is_reused_by_size_and_seed(tmp_path):
    first = bench.ensure_corpus(tmp_path, SMALL)
    stamp = (tmp_path / SMALL.name / "train.txt").stat().st_mtime_ns
    second = bench.ensure_corpus(tmp_path, SMALL)
    assert (first["reused"], second["reused"]) == (False, True)
    assert (tmp_path / SMALL.name / "train.txt").stat().st_mtime_ns == stamp
    (tmp_path / SMALL.name / "test.txt").write_text("changed\n")     # not what it made
    assert bench.ensure_corpus(tmp_path, SMALL)["reused"] is False
    assert bench.CorpusSpec(6_000, 500, 5, seed=4).name != SMALL.name
    assert bench.CorpusSpec(7_000, 500, 5, seed=3).name != SMALL.name


@pytest.mark.parametrize("text, tokens", [("20K", 20_000), ("10M", 10_000_000),
                                          ("1.5m", 1_500_000), ("1.1M", 1_100_000),
                                          ("2G", 2 * 10**9),
                                          ("12345", 12_345)])
def test_token_counts(text, tokens):
    assert bench.token_count(text) == tokens
    assert bench.token_count(bench.size_label(tokens)) == tokens


# ------------------------------------------------------------------------------ processes


def test_measured_peak_rss_is_the_child_own(tmp_path):
    """The child's peak resident set, not the parent's: this process holds 300 MB while
    one child allocates 150 MB and another nothing."""
    held = np.ones(300 * 10**6 // 8)
    assert held.sum() > 0
    big = bench.run_measured([sys.executable, "-c", "import numpy as np, time; "
                              "a = np.ones(150 * 10**6 // 8); print(a.sum()); "
                              "time.sleep(0.5)"],
                             REPO_ROOT, tmp_path / "big.log", 0)
    small = bench.run_measured([sys.executable, "-c", "pass"], REPO_ROOT,
                               tmp_path / "small.log", 0)
    assert big.ok and small.ok and big.problem(0) is None
    assert big.peak_rss_mb >= 150 and big.peak_rss_mb < 300
    assert 0 < small.peak_rss_mb < 100
    assert big.seconds > 0 and big.started > 0
    # the anonymous part (sampled every 50 ms: the child holds its array for 0.5 s) holds
    # the array, the file-backed part does not
    assert 150 <= big.peak_anon_mb <= big.peak_rss_mb and big.peak_file_mb < 100


def test_mapped_file_pages_are_counted_apart(tmp_path):
    """A child that reads a 200 MB file through a memory map has it in its file-backed
    resident set, not in its anonymous one (the sampled peaks)."""
    mapped = tmp_path / "mapped.bin"
    with open(mapped, "wb") as handle:
        handle.truncate(200 * 10**6)
    child = bench.run_measured([sys.executable, "-c", "import numpy as np, sys, time; "
                                "m = np.memmap(sys.argv[1], np.uint8, 'r'); "
                                "print(int(m[::4096].sum())); time.sleep(0.5)", str(mapped)],
                               REPO_ROOT, tmp_path / "mapped.log", 0)
    assert child.ok
    assert child.peak_file_mb >= 190
    assert 0 < child.peak_anon_mb < 100


def test_measured_failure_and_time_limit(tmp_path):
    failed = bench.run_measured([sys.executable, "-c", "raise MemoryError('no room')"],
                                REPO_ROOT, tmp_path / "failed.log", 0)
    assert failed.status == 1
    assert failed.problem(0) == "exit status 1: MemoryError: no room"
    slow = bench.run_measured([sys.executable, "-c", "import numpy as np, time; "
                               "a = np.ones(80 * 10**6 // 8); time.sleep(60)"],
                              REPO_ROOT, tmp_path / "slow.log", 6)
    assert slow.status is None and slow.seconds < 30
    assert slow.peak_rss_mb >= 80
    assert slow.problem(6).startswith("did not finish in 6 s (peak RSS so far ")


def test_throughput_from_events():
    started = 100.0
    events = [(1, 110.0, 5.0), (2, 111.0, 1000.0), (3, 113.0, 500.0)]
    startup, rate = bench.throughput(events, started)
    assert startup == 10.0
    # steps 2 and 3: 1 s at 1000 tokens/s and 2 s at 500 tokens/s, 2000 tokens in 3 s
    assert rate == pytest.approx(2000 / 3)
    assert bench.throughput([], started) == (None, None)
    assert bench.throughput(events[:1], started) == (10.0, None)


# ---------------------------------------------------------------------------------- flags


@pytest.mark.parametrize("flags, message", [
    (["--sizes", "0"], "--sizes: a corpus size is a whole number of tokens, at least 1K"),
    (["--sizes", "10X"], "--sizes: expected a token count"),
    (["--models", "lstm,nope"], "--models 'lstm,nope': unknown nope"),
    (["--sizes", "20K", "--baseline-sizes", "40K"], "--baseline-sizes 40K: not among"),
    (["--train-flags", "--model tcnlm"], "--train-flags: --model is set by the benchmark"),
    (["--train-flags", "--num-topics 4"], "train.run flags of --model lstm: --num-topics"),
])
def test_bad_flags_are_one_line_errors(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--work-dir", str(tmp_path), *flags])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {message}")
    assert not any(tmp_path.iterdir())                  # nothing generated


def test_size_zero_from_the_command_line(tmp_path):
    done = subprocess.run([*PROGRAM, "--work-dir", str(tmp_path), "--sizes", "0"],
                          cwd=REPO_ROOT, env=env(), capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: --sizes")


# ------------------------------------------------------------------------------ end to end


def positive(row: dict, key: str) -> float:
    value = row[key]
    assert isinstance(value, (int, float)) and math.isfinite(value) and value > 0, (key, row)
    return value


def test_benchmark_end_to_end_with_a_baseline(tmp_path):
    clone = tmp_path / "clone"          # the project is a git checkout (CI clones it)
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(REPO_ROOT),
                    str(clone)], check=True, capture_output=True)
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    work, output = tmp_path / "work", tmp_path / "out" / "table.json"
    done = subprocess.run([*PROGRAM, "--work-dir", str(work), "--sizes", "20K,40K",
                           "--vocabulary", "5000", *TINY_TRAINING, "--output", str(output),
                           "--baseline", "HEAD", "--repository", str(clone),
                           "--baseline-sizes", "20K"],
                          cwd=REPO_ROOT, env=env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(output.read_text())
    assert report["complete"] is True
    rows = report["rows"]
    assert [(r["size"], r["code"], r["model"]) for r in rows] == [
        (20_000, "current", "lstm"), (20_000, "baseline", "lstm"), (40_000, "current", "lstm")]
    for row in rows:
        assert (row["prep_status"], row["train_status"], row["train_notes"]) == ("ok", "ok", [])
        for key in ("tokens", "text_mb", "cache_mb", "prep_s", "prep_peak_rss_mb",
                    "prep_peak_anon_mb", "startup_s", "train_peak_rss_mb",
                    "train_peak_anon_mb", "train_peak_file_mb", "tokens_per_sec"):
            positive(row, key)
        assert row["tokens"] == row["prepared_tokens"] == row["size"]
        assert row["steps_logged"] == 3
        # preparing 20K tokens costs far less memory than TensorFlow's training process
        assert row["prep_peak_rss_mb"] < row["train_peak_rss_mb"]
    assert report["codes"]["baseline"]["commit"] == head
    assert (work / f"baseline-{head[:12]}" / "train" / "run.py").is_file()
    summary = report["summary"]
    assert set(summary["peak_rss_ratio"]) == {"sizes", "preparation", "training lstm"}
    assert set(summary["peak_anon_ratio"]) == {"sizes", "preparation", "training lstm"}
    assert set(summary["prep_s_per_million_tokens"]["current"]) == {"20K", "40K"}
    assert set(summary["tokens_per_sec_current_over_baseline"]) == {"20K"}
    # the printed table: one line per row, the figures of the JSON
    lines = done.stdout.splitlines()
    assert lines[0].startswith("machine: ") and lines[1].startswith(
        "command: python -m benchmarks.bench_corpus_size --work-dir")
    table = [line.split(" | ") for line in lines if line.startswith(("20K ", "40K "))]
    assert [(c[0].strip(), c[1].strip(), c[2].strip()) for c in table] == [
        ("20K", "current", "lstm"), ("20K", "baseline", "lstm"), ("40K", "current", "lstm")]
    assert [c[-1].strip() for c in table] == [f"{r['tokens_per_sec']:,.0f}" for r in rows]
    assert "peak RSS at 40K / at 20K, current code" in done.stdout
    assert "peak anonymous RSS at 40K / at 20K, current code" in done.stdout
    # each generated corpus has the asked training tokens, and its prepared cache reads
    # back with them (opened, not prepared again)
    for size in (20_000, 40_000):
        spec = bench.CorpusSpec(size, vocabulary=5000)
        train = work / "corpora" / spec.name / "train.txt"
        assert sum(len(line.replace("\t", " ").split(" "))
                   for line in train.read_text().splitlines()) == size
        # the data settings train.run gives a corpus of one's own (the general ones)
        data = config_from_args(build_parser().parse_args(
            ["--dataset", spec.name, "--data-dir", str(work / "corpora")])).data
        messages = []
        corpus = load_corpus(data, log=messages.append,
                             cache_dir=work / "measured" / "current" / spec.name / "cache")
        assert messages == [] and len(corpus.splits["train"].lm_ids) == size
