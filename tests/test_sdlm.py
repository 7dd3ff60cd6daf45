"""SDLM (Gu et al. 2018) as a decoder of the project: the run keeps its knowledge base, the
decoder goes on other models, the export's next-word distribution over the whole vocabulary
sums to 1, evaluate.sememes explains a prediction, and the stream/SGD protocol options."""
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from evaluate.sememes import main as sememes_main
from tcnlm_tf.config import RunConfig
from tcnlm_tf.data import knowledge
from tcnlm_tf.data.loading import load_corpus
from tcnlm_tf.data.pipeline import EOS_ID, PAD_ID
from tcnlm_tf.decoders.output_layers import knowledge_base_path
from tcnlm_tf.metrics.evaluation import corpus_nll
from tcnlm_tf.models.registry import MODELS
from tcnlm_tf.runs.loading import load_run
from tests.conftest import TINY, run_flags
from train.run import build_parser, config_from_args, main
from train.trainer import Trainer

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("sdlm")


@pytest.fixture(scope="module")
def sdlm_run(workdir):
    main(TINY + ["--model", "sdlm", "--max-steps", "6"] + run_flags(workdir, "sdlm"))
    return workdir / "runs" / "sdlm"


def test_the_run_keeps_the_synthetic_knowledge_base_of_its_vocabulary(sdlm_run):
    config = RunConfig.load(sdlm_run / "config.json")
    assert (config.model.decoder, config.model.decoder_option("knowledge_base")) \
        == ("sdlm", "synthetic")
    kb = knowledge.load(knowledge_base_path(sdlm_run))
    words = (sdlm_run / "lm_vocab.txt").read_text(encoding="utf-8").splitlines()
    assert list(kb.words) == words
    # content words carry topic sememes, specials a private sense of their own
    assert any(s.startswith("topic:") for s in kb.sememes)
    assert all(kb.private[kb.senses_of(i)].all() for i in (PAD_ID, EOS_ID))
    decoder = load_run(sdlm_run).model.softmax
    assert decoder.__class__.__name__ == "SememeDecoder"


def test_reloading_without_the_knowledge_base_source_gives_the_same_perplexity(
        sdlm_run, workdir, tmp_path):
    """The run directory alone rebuilds the decoder: the synthetic corpus's truth file, the
    knowledge base's source, is not read again."""
    run = load_run(sdlm_run)
    corpus = load_corpus(run.config.data, cache_dir=workdir / "cache", log=lambda _: None)
    truth = corpus.source_dir / "truth.npz"
    moved = tmp_path / "truth.npz"
    truth.rename(moved)
    try:
        reloaded = load_run(sdlm_run)
    finally:
        moved.rename(truth)
    from evaluate.common import read_documents, split_file
    documents = read_documents(split_file(run, "valid"))
    assert corpus_nll(reloaded, documents) == pytest.approx(corpus_nll(run, documents),
                                                            rel=1e-6)


def test_export_next_words_over_the_whole_vocabulary_sums_to_one(exports):
    _, out = exports
    run_dir, path = out["sdlm"]
    run = load_run(run_dir)
    loaded = tf.saved_model.load(str(path))
    vocab = len(run.lm_vocab)
    result = loaded.signatures["next_words"](context=tf.constant(["", "the"]),
                                             documents=tf.constant(["", ""]),
                                             k=tf.constant(vocab, tf.int32))
    probabilities = result["probabilities"].numpy()
    assert probabilities.shape == (2, vocab - 1)          # every word but <pad>
    hidden, _ = run.model.encode(tf.constant([[EOS_ID]]), run.model.context({}))
    pad = float(tf.exp(run.model.log_probs(hidden[:, -1], run.model.context({}))[0, PAD_ID]))
    np.testing.assert_allclose(probabilities[0].sum() + pad, 1.0, atol=1e-5)
    assert probabilities[1].sum() <= 1.0 + 1e-5


def test_sememes_command_lists_words_and_real_sememes(sdlm_run, capsys):
    results = sememes_main(["--run", str(sdlm_run), "--text", "the", "--text", "it was"])
    printed = capsys.readouterr().out
    assert [r["text"] for r in results] == ["the", "it was"]
    kb = knowledge.load(knowledge_base_path(sdlm_run))
    real = set(kb.sememes[:kb.num_real_sememes])
    for result in results:
        assert len(result["words"]) == 5 and len(result["sememes"]) == 5
        assert {s for s, _ in result["sememes"]} <= real
        assert len(result["carried"]) == 5 and {s for s, _ in result["carried"]} <= real
        probabilities = [p for _, p in result["words"]]
        assert probabilities == sorted(probabilities, reverse=True)
        carried = [p for _, p in result["carried"]]
        assert carried == sorted(carried, reverse=True) and 0 < carried[-1] <= carried[0] <= 1
    assert "after: it was" in printed and json.loads(printed.strip().splitlines()[-1])
    assert (sdlm_run / "tensorboard" / "sememes").is_dir()


def test_sememes_command_refuses_a_run_without_the_decoder(workdir, capsys):
    main(TINY + ["--model", "lstm", "--max-steps", "1"] + run_flags(workdir, "plain"))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        sememes_main(["--run", str(workdir / "runs" / "plain"), "--text", "the"])
    assert exit_info.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "is not an SDLM-decoded run" in line and "--decoder sdlm" in line


@pytest.mark.parametrize("model", ["tcnlm", "tdlm"])
def test_the_decoder_goes_on_a_topic_model(workdir, model):
    metrics = main(TINY + ["--model", model, *MODELS[model].test_flags, "--decoder", "sdlm",
                           "--max-steps", "2"] + run_flags(workdir, f"{model}-sdlm"))
    assert metrics["stopped"] == "max_steps"
    assert load_run(workdir / "runs" / f"{model}-sdlm").model.softmax.__class__.__name__ \
        == "SememeDecoder"


def test_sgd_takes_plain_gradient_steps(workdir):
    """--optimizer sgd: one training step moves every weight by exactly -lr times its
    (clipped) gradient (no dropout, so the step's loss is the one computed here)."""
    config = config_from_args(build_parser().parse_args(
        TINY + ["--optimizer", "sgd", "--learning-rate", "0.5", "--mode", "stream",
                "--dropout", "0"] + run_flags(workdir, "sgd")))
    corpus = load_corpus(config.data, cache_dir=workdir / "cache", log=lambda _: None)
    trainer = Trainer(config, corpus, workdir / "runs" / "sgd", log=lambda _: None)
    assert isinstance(trainer.optimizer, keras.optimizers.SGD)
    batch = next(iter(trainer.dataset("train")))   # one replica: strategy.run takes it as is
    variables = trainer.model.trainable_variables
    before = [v.numpy() for v in variables]
    with tf.GradientTape() as tape:
        terms = trainer.model.loss_terms(batch, training=True)
        loss = (terms["nll_sum"] + terms["aux_loss"]) / terms["tokens"]
    grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
    grads, _ = tf.clip_by_global_norm(grads, config.train.clip_norm)
    trainer.train_step(batch, None, tf.constant(0.0))
    for variable, old, grad in zip(variables, before, grads):
        np.testing.assert_allclose(variable.numpy() - old, -0.5 * grad.numpy(), atol=1e-6,
                                   err_msg=variable.path)


@pytest.mark.parametrize("softmax,decoder", [("full", "softmax"), ("adaptive", "adaptive")])
def test_configs_written_before_decoders_load_with_their_output_layer(softmax, decoder):
    raw = RunConfig().to_dict()
    del raw["model"]["decoder"]
    raw["model"]["softmax"] = softmax
    assert RunConfig.from_dict(raw).model.decoder == decoder


def test_decoders_get_their_authors_output_dropouts():
    def dropouts(*flags):
        model = config_from_args(build_parser().parse_args(TINY + list(flags))).model
        return model.output_dropout, model.decoder_options

    assert dropouts("--model", "sdlm", "--dropout", "0.6") == (0.5, {
        "knowledge_base": "synthetic", "num_bases": 5, "sememe_normalization": "left",
        "output_embedding_dropout": 0.3})
    assert dropouts("--decoder", "mos") == (None, {
        "mixtures": 10, "latent_dropout": 0.29, "output_embedding_dropout": 0.0})
    assert dropouts() == (None, {"cutoffs": None})
    assert dropouts("--model", "sdlm", "--output-dropout", "0.1",
                    "--output-embedding-dropout", "0")[1]["output_embedding_dropout"] == 0.0
    # a configuration saved before these settings keeps the dropouts it was trained with,
    # and one saved before decoder options had their own dict keeps its decoder's
    raw = RunConfig().to_dict()
    del raw["model"]["decoder_options"]
    old = RunConfig.from_dict(raw).model
    assert (old.output_dropout, old.decoder_options) == (None, {})
    assert old.decoder_option("cutoffs") is None
    raw["model"].update(decoder="mos", mixtures=3, num_bases=7, output_embedding_dropout=0.2)
    old = RunConfig.from_dict(raw).model
    assert old.decoder_options == {"mixtures": 3, "output_embedding_dropout": 0.2}
    assert old.decoder_option("latent_dropout") == 0.0


@pytest.mark.parametrize("flags", [
    ["--decoder", "mos", "--latent-dropout", "0.5"],
    ["--model", "sdlm", "--output-embedding-dropout", "0.5", "--output-dropout", "0"],
    ["--output-dropout", "0.5"],
], ids=["mos-latent", "sdlm-output-embedding", "output"])
def test_output_side_dropout_is_live_in_training_and_off_in_evaluation(workdir, flags):
    """Every other dropout at 0: the one named changes the training loss from draw to draw
    and leaves evaluation deterministic (the MoS latent dropout was once never reached)."""
    config = config_from_args(build_parser().parse_args(
        TINY + ["--dropout", "0"] + flags + run_flags(workdir, "dropout")))
    corpus = load_corpus(config.data, cache_dir=workdir / "cache", log=lambda _: None)
    trainer = Trainer(config, corpus, workdir / "runs" / f"dropout-{flags[1]}",
                      log=lambda _: None)
    batch = next(iter(trainer.dataset("train")))

    def log_probs(training):
        return trainer.model(batch, training=training).target_log_probs.numpy()

    evaluation = log_probs(False)
    np.testing.assert_array_equal(log_probs(False), evaluation)
    trained = [log_probs(True) for _ in range(3)]
    assert not any(np.array_equal(t, evaluation) for t in trained)
    assert not np.array_equal(trained[0], trained[1])
