"""``evaluate.output_layers``: each recorded row beside the LSTMs of its own output layer,
with paired bootstrap intervals, from hand-made records with a known answer."""
import json
import math

import numpy as np
import pytest

from evaluate.output_layers import main

TOKENS = np.arange(20, 80, dtype=float)
BASE = 4.5 * TOKENS


def record(directory, name, decoder="adaptive", tied=False, nats=0.0, documents=True):
    """A finished run ``name`` whose every test token costs ``nats`` more than BASE."""
    run = directory / name
    run.mkdir(parents=True)
    model = {"model": "lstm", "decoder": decoder,
             "decoder_options": {"tie_embeddings": tied} if decoder == "softmax" else {}}
    (run / "config.json").write_text(json.dumps({"model": model}))
    nll = BASE + nats * TOKENS
    metrics = {"test_perplexity": math.exp(nll.sum() / TOKENS.sum()), "epochs": []}
    if documents:
        metrics["test_documents"] = {"nll": nll.tolist(), "tokens": TOKENS.tolist()}
    (run / "metrics.json").write_text(json.dumps(metrics))


def comparison(directory, **settings):
    directory.mkdir(parents=True)
    (directory / "compare.json").write_text(json.dumps(
        {"dataset": "apnews", "preset": "small", "num_topics": 50, "train_args": [],
         **settings}))
    return directory


def test_each_row_is_divided_by_the_lstms_of_its_own_output_layer(tmp_path, capsys):
    adaptive = comparison(tmp_path / "adaptive")
    record(adaptive, "lstm")
    record(adaptive, "lstm-document", nats=-0.1)
    record(adaptive, "tdlm", nats=-0.05)
    record(adaptive, "lstm-tied", "softmax", tied=True, nats=-0.2)
    tied = comparison(tmp_path / "tied")
    record(tied, "tdlm", "softmax", tied=True, nats=-0.3)
    record(tied, "lstm-document", "softmax", tied=True, nats=-0.25, documents=False)
    full = comparison(tmp_path / "full")
    record(full, "topic_rnn", "softmax", nats=0.02)
    text = main(["--records", str(adaptive), str(tied), str(full)])
    lines = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in text.splitlines()
             if line.startswith("| ") and "---" not in line}

    def shown(nats):
        return f"{math.exp(nats):.3f} [{math.exp(nats):.3f}, {math.exp(nats):.3f}]"

    row = lines[("tdlm", "adaptive softmax")]
    assert f"| {shown(-0.05)} | {shown(0.05)} |" in row      # / lstm, / lstm-document
    row = lines[("tdlm", "tied full softmax")]
    # / lstm-tied with an interval; / the tied document LSTM without (no per-document scores)
    assert f"| {shown(-0.1)} | {math.exp(-0.05):.3f} |" in row
    assert lines[("topic_rnn", "full softmax")].endswith("| - | - |")   # no LSTM of its layer
    assert "T = 50" in capsys.readouterr().out


def test_comparisons_of_other_settings_are_refused(tmp_path, capsys):
    one = comparison(tmp_path / "one")
    record(one, "lstm")
    other = comparison(tmp_path / "other", train_args=["--context", "preceding"])
    record(other, "lstm")
    with pytest.raises(SystemExit):
        main(["--records", str(one), str(other)])
    assert "differ in context" in capsys.readouterr().err


def test_table_6_sets_each_row_beside_the_papers_ratio(tmp_path):
    from evaluate.table_6 import main as table_6

    records = comparison(tmp_path / "table6", num_topics=30, seed=[0, 1],
                         train_args=["--hidden-size", "100"])
    for seed, nats in ((0, 0.0), (1, 0.0)):
        record(records, f"lstm-seed{seed}")
    record(records, "tcnlm-seed0", nats=-0.2)
    record(records, "tcnlm-seed1", nats=-0.2)
    record(records, "tcnlm-constant-t-seed0", nats=0.1)
    text = table_6(["--records", str(records)])
    ratio = math.exp(-0.2)
    assert (f"| tcnlm | 2 | {math.exp(4.5 - 0.2):.2f} ± 0.00 | {ratio:.3f} [{ratio:.3f}, "
            f"{ratio:.3f}] | 82.67 | 0.814 |") in text
    assert "| tcnlm-constant-t | 1 |" in text and "not in the paper" in text
    with pytest.raises(SystemExit):
        table_6(["--records", str(comparison(tmp_path / "small", num_topics=50))])
