"""MirroredStrategy with two replicas (two logical CPU devices) takes exactly the same
optimiser steps as one replica: loss normalisation, gradient all-reduce and global-norm
clipping do not depend on the replica count. Runs in a subprocess because logical devices
must be configured before TensorFlow starts."""
import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO_ROOT

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from pathlib import Path
    from tcnlm_tf.config import RunConfig
    from tcnlm_tf.data.loading import load_corpus
    from train.trainer import Trainer

    model, mode, workdir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    config = RunConfig()
    config.model.model = model
    if model == "tdlm":   # small, and no dropout, so both replica counts draw nothing
        config.model.options = {"num_topics": 4, "num_filters": 6, "topic_dim": 8,
                                "topic_dropout": 0.0}
    config.data.synthetic = {"train_docs": 60, "valid_docs": 8, "test_docs": 8,
                             "num_topics": 4, "content_vocab_size": 120}
    config.data.topic_min_docs = 2
    config.model.mode = mode
    config.model.hidden_size, config.model.embedding_dim, config.model.dropout = 24, 12, 0.0
    config.train.batch_size, config.train.max_steps = 8, 3
    config.train.clip_norm = 0.5   # small enough that clipping is active
    corpus = load_corpus(config.data, cache_dir=workdir / "cache", log=lambda _: None)
    weights = {}
    for devices in (["/cpu:0"], ["/cpu:0", "/cpu:1"]):
        strategy = tf.distribute.MirroredStrategy(devices)
        trainer = Trainer(config, corpus, workdir / str(len(devices)), strategy=strategy,
                          log=lambda _: None)
        assert trainer.num_replicas == len(devices)
        trainer.fit()
        assert all(opt.iterations.numpy() > 0 for opt in trainer.task_optimizers.values())
        weights[len(devices)] = [v.numpy() for v in trainer.model.trainable_variables]
        valid = trainer.evaluate("valid")
        weights[f"valid{len(devices)}"] = valid
    diff = max(float(np.abs(a - b).max()) for a, b in zip(weights[1], weights[2]))
    print(json.dumps({"diff": diff, "valid1": weights["valid1"], "valid2": weights["valid2"]}))
""")


@pytest.mark.parametrize("model,mode", [("lstm", "sentence"), ("lstm", "document"),
                                        ("tdlm", "sentence")])
def test_two_replicas_match_one(model, mode, tmp_path):
    """TDLM's alternating tasks (its topic model's own batches and optimiser) included."""
    result = subprocess.run([sys.executable, "-c", SCRIPT, model, mode, str(tmp_path)],
                            cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["diff"] < 1e-5, out
    nll1, tokens1 = out["valid1"]
    nll2, tokens2 = out["valid2"]
    assert tokens1 == tokens2 > 0
    assert nll2 == pytest.approx(nll1, rel=1e-5)
