"""The peers section of ``python -m benchmarks.run``: the FLOP count, the generated corpora,
the PyTorch peer's loss, its flags, and one tiny run through its child process."""
from __future__ import annotations

import argparse

import numpy as np
import pytest

from benchmarks.run import main
from benchmarks.sections import peers
from tcnlm_tf.errors import UserError
from tests.test_benchmark import QUICK, positive, table

#: train.run flags that shrink every workload to seconds (the vocabularies stay real)
TINY = "--hidden-size 16 --embedding-dim 16 --batch-size 4 --seq-len 6"


def tiny_args(**changes) -> argparse.Namespace:
    values = dict(peer_train_flags=TINY, seed=0, precisions=["float32"],
                  peer_workloads=list(peers.WORKLOADS))
    values.update(changes)
    return argparse.Namespace(**values)


def test_the_workloads_are_the_project_configurations():
    pd = peers.workload_config("pd-tied-medium", tiny_args(peer_train_flags=""), "data")
    assert (pd.model.num_layers, pd.model.hidden_size, pd.model.embedding_dim) == (2, 650, 650)
    assert pd.model.decoder_option("tie_embeddings") and pd.model.mode == "stream"
    assert (pd.train.batch_size, pd.data.seq_len, pd.train.optimizer) == (20, 35, "sgd")
    assert (pd.train.learning_rate, pd.train.clip_norm, pd.model.dropout) == (20, 0.25, 0.6)
    ap = peers.workload_config("apnews-small-adaptive", tiny_args(peer_train_flags=""), "data",
                               "mixed_bfloat16")
    assert (ap.model.num_layers, ap.model.hidden_size, ap.model.embedding_dim) == (1, 600, 300)
    assert (ap.train.batch_size, ap.data.seq_len, ap.train.optimizer) == (64, 30, "adam")
    assert ap.model.decoder == "adaptive" and ap.train.precision == "mixed_bfloat16"
    shrunk = peers.workload_config("pd-tied-medium", tiny_args(), "data")
    assert (shrunk.model.hidden_size, shrunk.train.batch_size) == (16, 4)


def test_multiply_adds_of_the_full_and_the_adaptive_softmax():
    config = peers.workload_config("apnews-small-softmax", tiny_args(), "data")
    targets = np.array([[0, 5, 1300], [4000, 7, 0]])
    # the LSTM at all 6 positions, the output layer at the 4 real targets (0 is padding)
    lstm = 6 * 4 * 16 * (16 + 16)
    assert peers.multiply_adds(config, 4809, (), targets) == lstm + 4 * 16 * 4809
    config = peers.workload_config("apnews-small-adaptive", tiny_args(), "data")
    # head: 4 targets x 16 x (1202 + 1); the tail: 2 targets x (16 x 4 + 4 x 3607)
    assert peers.multiply_adds(config, 4809, (1202,), targets) == (
        lstm + 4 * 16 * 1203 + 2 * (16 * 4 + 4 * 3607))
    config = peers.workload_config("pd-tied-medium", tiny_args(), "data")
    # two layers of 16 units on 16-d embeddings, the tied softmax at the real targets
    assert peers.multiply_adds(config, 13469, (), targets) == 2 * lstm + 4 * 16 * 13469


def test_the_generated_corpus_holds_every_word_and_starts_with_zipf_sentences():
    lines = peers.corpus_lines(500, 3, 2000, np.random.default_rng(1))
    words = [w for line in lines for sentence in line.split("\t") for w in sentence.split()]
    counts = {}
    for word in words:
        counts[word] = counts.get(word, 0) + 1
    assert len(counts) == 500 and min(counts.values()) >= 3
    first = [len(s.split()) for s in lines[0].split("\t")]
    assert len(first) == peers.SENTENCES_PER_DOCUMENT
    assert all(peers.SENTENCE_WORDS[0] <= n <= peers.SENTENCE_WORDS[1] for n in first)
    zipf_words = [w for line in lines[:10] for w in line.split()]
    assert zipf_words.count("w0") > 5 * zipf_words.count("w9")


@pytest.mark.parametrize("output", ["softmax", "tied", "adaptive"])
def test_the_peer_loss_is_the_weighted_mean_nll(output):
    import torch     # here, not at the top: the processes that never run this skip its import

    from benchmarks.torch_peers import PeerLM, torch_batches

    torch.manual_seed(0)
    model = PeerLM(300, 8, 8, 2, 0.0, output, (100,)).eval()
    rng = np.random.default_rng(0)
    batch = {"inputs": rng.integers(0, 300, (3, 5)), "targets": rng.integers(0, 300, (3, 5)),
             "weights": np.array([[1.0] * 5, [1.0] * 3 + [0.0] * 2, [0.0] * 5])}
    inputs, targets, weights, tokens = torch_batches([batch])[0]
    assert tokens == 8 and inputs.shape == (5, 3)
    hidden, _ = model.rnn(model.embedding(inputs))
    hidden = hidden.reshape(-1, 8)
    if output == "adaptive":
        log_p = model.decoder.log_prob(hidden)
    else:
        log_p = torch.log_softmax(model.decoder(hidden), -1)
    nll = -log_p.gather(1, targets.reshape(-1, 1)).squeeze(1)
    expected = (nll * weights.reshape(-1)).sum() / 8
    assert model.loss(inputs, targets, weights).item() == pytest.approx(expected.item(),
                                                                        rel=1e-5)
    if output == "tied":
        assert model.decoder.weight is model.embedding.weight


@pytest.mark.parametrize("flags", [["--peer-threads", "0"], ["--peer-workloads", "pd,x"],
                                   ["--sections", "peers", "--precisions", "mixed_float16"],
                                   ["--sections", "peers", "--peer-train-flags=--preset huge"],
                                   ["--sections", "peers", "--peer-train-flags=--decoder mos"],
                                   ["--sections", "peers", "--peer-train-flags=--seq-len '5"]])
def test_bad_peer_flags_give_one_line(flags, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(flags)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err


def test_other_sections_may_time_precisions_the_peers_do_not():
    peers.check(tiny_args(sections=["models"], precisions=["mixed_float16"]))
    with pytest.raises(UserError, match="mixed_float16"):
        peers.check(tiny_args(sections=["peers"], precisions=["mixed_float16"]))


@pytest.mark.slow
def test_peers_table_from_one_child(capsys):
    """One thread count, the adaptive workload under both precisions at tiny sizes: every
    row's ratios and shares follow from its printed times, FLOPs and the peaks (nothing here
    compares times: the machine's load decides them)."""
    main(["--sections", "peers", "--peer-threads", "1", "--peer-workloads",
          "apnews-small-adaptive", "--peer-batches", "1", "--peer-matmul-size", "128",
          f"--peer-train-flags={TINY}", *QUICK])
    out = capsys.readouterr().out
    rows = table(out, "threads")
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("1", "apnews-small-adaptive", p) for p in ("float32", "mixed_bfloat16")]
    peaks = {r[1]: r for r in table(out[out.index("matmul peak"):], "threads")}
    assert list(peaks) == ["float32", "mixed_bfloat16"]
    # 24 positions: the LSTM (4 x 16 x (16 + 16)) and the head (16 x 1,203) at each, and
    # the tail (16 x 4 + 4 x 3,607) at those of the 24 whose target is in it
    everywhere = 24 * (2048 + 16 * 1203)
    assert 6 * everywhere <= float(rows[0][3]) * 1e9 <= 6 * (everywhere + 24 * 14492) * 1.001
    by_key = {(r[1], r[2]): r for r in rows}
    for _, workload, precision, gflop, ours, theirs, ratio, ours_up, torch_up, ours_share, \
            torch_share in rows:
        if theirs == "-":       # a CPU whose PyTorch has no bfloat16 LSTM kernel says so
            assert precision == "mixed_bfloat16" and ratio == torch_up == torch_share == "-"
            assert f"PyTorch could not run {workload}, {precision} at 1 thread(s)" in out
            continue
        assert positive(ratio) == pytest.approx(positive(theirs) / positive(ours), rel=0.01,
                                                abs=0.006)
        _, _, tf_peak, torch_peak, _ = peaks[precision]
        assert positive(ours_share) == pytest.approx(
            100 * positive(gflop) / (positive(ours) / 1e3) / positive(tf_peak), rel=0.01,
            abs=0.06)
        assert positive(torch_share) == pytest.approx(
            100 * positive(gflop) / (positive(theirs) / 1e3) / positive(torch_peak), rel=0.01,
            abs=0.06)
        if precision == "float32":
            assert ours_up == torch_up == "-"
        else:
            f32 = by_key[workload, "float32"]
            assert positive(ours_up) == pytest.approx(positive(f32[4]) / positive(ours),
                                                      rel=0.01, abs=0.006)
            assert positive(torch_up) == pytest.approx(positive(f32[5]) / positive(theirs),
                                                       rel=0.01, abs=0.006)
    assert "adaptive softmax (cutoffs 1202), V = 4,809" in out


def test_a_peer_pytorch_cannot_run_leaves_its_cells_empty_and_says_why(monkeypatch, capsys):
    """PyTorch's oneDNN LSTM has no bfloat16 kernel on a CPU without bfloat16 instructions:
    its first step raises, and the section times our side alone there and says so."""
    from benchmarks import torch_peers

    made = torch_peers.training_step

    def failing(config, model, batches, precision):
        step = made(config, model, batches, precision)
        if precision == "float32":
            return step

        def refuse(i):
            raise RuntimeError("could not create a primitive descriptor\nsecond line")
        return refuse
    monkeypatch.setattr(torch_peers, "training_step", failing)
    args = tiny_args(precisions=["float32", "mixed_bfloat16"],
                     peer_workloads=["apnews-small-adaptive"], peer_batches=1,
                     peer_matmul_size=64, warmup=1, rounds=1, steps=1)
    result = peers.measure(args, 1)
    assert result["unsupported"] == {
        "apnews-small-adaptive, mixed_bfloat16": "could not create a primitive descriptor"}
    f32, bf16 = result["rows"]
    assert f32["torch"] > 0 and bf16["torch"] is None and bf16["ours"] > 0
    peers.print_peer_table([result], args.precisions)
    [row] = [r for r in table(capsys.readouterr().out, "threads") if r[2] == "mixed_bfloat16"]
    assert row[5] == row[6] == row[8] == row[10] == "-" and positive(row[4]) > 0
