"""--precision: every model and decoder trains under mixed_bfloat16 with float32 variables,
float32 normalisers and topic models; its checkpoints load under float32 (and float32 ones
under mixed_bfloat16) with the same perplexity to bfloat16's rounding; exports compute in
float32; mixed_float16 skips a step whose scaled gradients overflow, halving the scale."""
import json

import numpy as np
import pytest
import tensorflow as tf

from evaluate.common import read_documents, split_file
from tcnlm_tf.config import RunConfig
from tcnlm_tf.data import pipeline
from tcnlm_tf.metrics.evaluation import corpus_nll
from tcnlm_tf.metrics.perplexity import perplexity
from tcnlm_tf.precision import building, cpu_has_bf16
from tcnlm_tf.runs.loading import encode_documents, load_run
from tests.conftest import TINY, TINY_MODELS, run_flags
from train.run import main

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

#: every model (in sentence mode: a mode changes the batches, not which layers compute in
#: which precision), and the decoders the models' defaults leave out
MODELS = {**{name: flags for name, flags in TINY_MODELS.items() if "-" not in name},
          "lstm-mos": ["--model", "lstm", "--decoder", "mos"],
          "lstm-tied": ["--model", "lstm", "--decoder", "softmax", "--tie-embeddings"],
          "lclm-output": TINY_MODELS["lclm"] + ["--lclm-fusion", "output"]}
#: layers that compute in float32 under every policy (tcnlm_tf.precision)
FLOAT32_LAYERS = ("bag_of_words", "ntm", "lda", "inference_network", "topic_model")


def train(tmp_path, name, flags, precision, extra=()):
    main(TINY + flags + ["--precision", precision, *extra] + run_flags(tmp_path, name))
    return tmp_path / "runs" / name


def test_mixed_bfloat16_everywhere(tmp_path):
    """Every model and decoder trains 3 steps under mixed_bfloat16: the saved config says so, every
    variable is float32, the language model's products run in bfloat16, the topic models in
    float32, and the target log-probabilities are float32 and finite. The same checkpoint
    evaluates under float32 to within bfloat16's rounding (1 %) of its bfloat16 perplexity,
    and token by token: after 3 steps a model is close to uniform (perplexity near the
    vocabulary size, whatever it computes), so its per-token log-probabilities must also
    agree to 0.01 nats and vary together across the tokens (correlation above 0.999)."""
    for name, flags in MODELS.items():
        run_dir = train(tmp_path, name, flags, "mixed_bfloat16")
        assert RunConfig.load(run_dir / "config.json").train.precision == "mixed_bfloat16"
        run = load_run(run_dir)
        layers = run.model._flatten_layers(include_self=False)
        assert all(v.dtype == "float32" for v in run.model.weights), name
        bf16 = {layer.name for layer in layers if layer.compute_dtype == "bfloat16"}
        assert "embedding" in bf16 and run.model.softmax.name in bf16, (name, bf16)
        assert not bf16 & set(FLOAT32_LAYERS), (name, bf16)
        documents = read_documents(split_file(run, "valid"))[:3]
        as_float32 = load_run(run_dir, precision="float32")
        mixed = perplexity(*corpus_nll(run, documents))
        exact = perplexity(*corpus_nll(as_float32, documents))
        assert np.isfinite(mixed) and mixed == pytest.approx(exact, rel=0.01), name
        mixed, exact = (target_log_probs(r, documents) for r in (run, as_float32))
        assert np.abs(mixed - exact).max() < 0.01, name
        assert np.corrcoef(mixed, exact)[0, 1] > 0.999, name


def target_log_probs(run, documents):
    """log p of each real target in the first batch of ``documents`` (``run``'s validation
    batches), as a flat float64 array."""
    batch = next(iter(pipeline.model_dataset(run.model, run.config,
                                             encode_documents(run, documents), "valid")))
    log_probs = run.model(batch, training=False).target_log_probs
    return np.asarray(log_probs, np.float64)[batch["weights"].numpy() > 0]


def test_float32_runs_resume_under_mixed_bfloat16(tmp_path):
    """Checkpoints are float32 under every policy: a float32 run resumes under
    mixed_bfloat16 (--precision may change on --resume) and the config records it; a
    config.json from before --precision existed loads as float32."""
    flags = TINY_MODELS["tcnlm"]
    run_dir = train(tmp_path, "tcnlm", flags, "float32")
    main(TINY + flags + ["--max-steps", "6", "--resume", "--precision", "mixed_bfloat16"]
         + run_flags(tmp_path, "tcnlm"))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["steps"] == 6
    assert RunConfig.load(run_dir / "config.json").train.precision == "mixed_bfloat16"
    raw = json.loads((run_dir / "config.json").read_text())
    del raw["train"]["precision"]
    assert RunConfig.from_dict(raw).train.precision == "float32"


def test_exports_compute_in_float32(tmp_path):
    """A mixed_bfloat16 run's export computes in float32: its score signature returns
    float32 and equals the float32 evaluation of the same weights."""
    from tcnlm_tf.serving.module import ServingModule
    from train.export import export

    run_dir = train(tmp_path, "lstm", TINY_MODELS["lstm"], "mixed_bfloat16")
    saved = tf.saved_model.load(str(export(run_dir, tmp_path / "saved_models")))
    sentence = tf.constant(["the"])
    out = saved.signatures["serving_default"](sentences=sentence)
    assert out["token_log_probs"].dtype == tf.float32
    in_memory = ServingModule(load_run(run_dir, precision="float32"))
    np.testing.assert_allclose(out["log_likelihood"].numpy(),
                               in_memory._score(sentence, tf.constant([""]))["log_likelihood"],
                               rtol=1e-6)


def test_mixed_float16_skips_overflowing_steps(tmp_path):
    """mixed_float16 scales the loss: a scale so large that the float16 gradients overflow
    skips the step (weights and step count unchanged, no non-finite-loss stop) and halves
    the scale; the next steps apply."""
    from tcnlm_tf.data.loading import load_corpus
    from train.trainer import Trainer

    run_dir = train(tmp_path, "lstm", TINY_MODELS["lstm"], "mixed_float16")
    config = RunConfig.load(run_dir / "config.json")
    corpus = load_corpus(config.data, cache_dir=tmp_path / "cache")
    trainer = Trainer(config, corpus, tmp_path / "fresh", log=lambda _: None)
    assert trainer.model.embedding.compute_dtype == "float16"
    batch = next(iter(trainer.distribute(trainer.dataset("train"))))
    before = [w.numpy() for w in trainer.model.trainable_weights]
    trainer.scaled_optimizer.dynamic_scale.assign(2.0 ** 60)
    sums, _ = trainer.train_step(batch, None, tf.constant(0.0))
    assert not np.isfinite(float(sums["grad_norm"])) and np.isfinite(float(sums["nll_sum"]))
    assert trainer.step == 0 and float(trainer.scaled_optimizer.dynamic_scale.numpy()) == 2.0 ** 59
    weights = trainer.model.trainable_weights
    assert all(np.array_equal(b, w.numpy()) for b, w in zip(before, weights))
    trainer.scaled_optimizer.dynamic_scale.assign(2.0 ** 10)
    sums, _ = trainer.train_step(batch, None, tf.constant(0.0))
    assert np.isfinite(float(sums["grad_norm"])) and trainer.step == 1
    assert not all(np.array_equal(b, w.numpy())
                   for b, w in zip(before, trainer.model.trainable_weights))


def test_building_restores_the_global_policy():
    import keras

    previous = keras.config.dtype_policy().name
    with building("mixed_bfloat16"):
        assert keras.layers.Dense(2).compute_dtype == "bfloat16"
    assert keras.config.dtype_policy().name == previous
    with pytest.raises(ValueError, match="unknown precision"):
        with building("bfloat16"):
            pass


def test_a_precision_this_machine_would_emulate_is_warned_of():
    from tcnlm_tf.precision import slow_precision_warning as warning

    assert warning("mixed_bfloat16", None, cpu_bf16=True) is None
    assert "AVX512_BF16" in warning("mixed_bfloat16", None, cpu_bf16=False)
    assert warning("mixed_bfloat16", True, cpu_bf16=False) is None
    assert "compute capability" in warning("mixed_bfloat16", False, cpu_bf16=True)
    assert "without a GPU" in warning("mixed_float16", None, cpu_bf16=True)
    assert warning("mixed_float16", False, cpu_bf16=False) is None
    assert warning("float32", None, cpu_bf16=False) is None


def test_cpu_bf16_flags():
    assert cpu_has_bf16("processor: 0\nflags\t\t: fpu avx512f avx512_bf16 amx_tile\n")
    assert cpu_has_bf16("flags : fpu amx_bf16\n")
    assert not cpu_has_bf16("flags : fpu avx512f avx2\n")
    assert not cpu_has_bf16("")
