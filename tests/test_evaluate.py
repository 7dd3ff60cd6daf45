"""The evaluate commands on a tiny instance of every topic model (TCNLM, the naive MoE,
TDLM, ...: the registry's models with topics) trained on a small synthetic corpus."""
import json

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

from tcnlm_tf.data.corpus import write_corpus_file
from tcnlm_tf.models.registry import MODELS
from tests.conftest import TOPIC_MODELS
from train.run import main as train

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

TINY = ["--synthetic", "train_docs=120", "--synthetic", "valid_docs=12", "--synthetic",
        "test_docs=12", "--synthetic", "num_topics=4", "--synthetic", "content_vocab_size=120",
        "--hidden-size", "32", "--embedding-dim", "16", "--batch-size", "32", "--epochs", "2",
        "--learning-rate", "0.005"]
#: what each model logs to TensorBoard besides the LM loss
MODEL_TAGS = {"tcnlm": {"train/ntm_reconstruction", "train/ntm_kl", "train/ntm_diversity"},
              "moe": {"train/ntm_reconstruction", "train/ntm_kl", "train/ntm_diversity"},
              "tdlm": {"train/topic_model_loss"},
              "lda_lstm": set(),   # the LDA is fitted before training: no loss term of its own
              "topic_rnn": {"train/topic_rnn_kl", "train/stop_word_nll"}}


@pytest.fixture(scope="module", params=TOPIC_MODELS)
def tcnlm_run(request, tmp_path_factory):
    """A tiny trained run of each topic model: (run directory, metrics, root, model name)."""
    name = request.param
    root = tmp_path_factory.mktemp(f"evaluate-{name}")
    metrics = train(TINY + ["--model", name, *MODELS[name].test_flags, "--log-every", "5",
                            "--runs-dir", str(root / "runs"), "--cache-dir", str(root / "cache"),
                            "--run-name", "tc"])
    return root / "runs" / "tc", metrics, root, name


def run_args(tcnlm_run, *args):
    return ["--run", str(tcnlm_run[0]), *args]


def tensorboard_tags(run_dir, kind):
    acc = event_accumulator.EventAccumulator(str(run_dir / "tensorboard"),
                                             size_guidance={event_accumulator.TENSORS: 0,
                                                            event_accumulator.IMAGES: 0})
    acc.Reload()
    return acc, set(acc.Tags()[kind])


def test_tensorboard_has_each_loss_term_separately(tcnlm_run):
    _, tags = tensorboard_tags(tcnlm_run[0], "tensors")
    assert {"train/loss", "train/perplexity", "valid/perplexity"} | MODEL_TAGS[
        tcnlm_run[3]] <= tags


def test_perplexity_on_own_test_split_and_on_any_file(tcnlm_run, tmp_path):
    from evaluate.perplexity import main
    run_dir, metrics, _, _ = tcnlm_run
    own = main(run_args(tcnlm_run))
    assert own["perplexity"] == pytest.approx(metrics["test_perplexity"], rel=1e-4)
    text = tmp_path / "other.txt"
    source = json.loads((run_dir / "config.json").read_text())
    documents = [[["the", "zzzz", "of"], ["a", "b"]]]
    write_corpus_file(text, documents)
    other = main(run_args(tcnlm_run, "--text-file", str(text)))
    assert other["predicted_tokens"] == 5 + 2 and np.isfinite(other["perplexity"])
    assert source["model"]["model"] == tcnlm_run[3]


def test_ablated_topics_are_scored_differently(tcnlm_run):
    """evaluate.perplexity --topics shuffled|uniform conditions the LM on another document's
    or on uniform topics: the same tokens, another perplexity."""
    from evaluate.perplexity import main

    own = main(run_args(tcnlm_run))
    for source in ("shuffled", "uniform"):
        ablated = main(run_args(tcnlm_run, "--topics", source))
        assert ablated["predicted_tokens"] == own["predicted_tokens"]
        assert np.isfinite(ablated["perplexity"]) and ablated["topics"] == source
        # exact inequality: scoring is deterministic, and after 2 tiny epochs some models'
        # topic vectors (TDLM's with dropout on its word embeddings) still differ little
        # between documents, so another document's topics move the perplexity only slightly
        assert ablated["perplexity"] != own["perplexity"], source


def test_a_rest_run_scored_on_the_preceding_text_only(tcnlm_run, tmp_path, capsys):
    """evaluate.perplexity --context preceding scores a run trained under rest with only the
    sentences before each one (Zheng, Vafa and Blei's evaluation). With a sentence s of the
    test split, the document [s, s] costs NLL(s | s) twice under rest, and NLL(s | nothing)
    + NLL(s | s) under preceding, and the document [s] costs NLL(s | nothing) under both:
    so preceding([s, s]) = rest([s, s]) / 2 + rest([s])."""
    from evaluate.common import read_documents, split_file
    from evaluate.perplexity import main
    from tcnlm_tf.runs.loading import load_run

    sentence = next(s for d in read_documents(split_file(load_run(tcnlm_run[0]), "test"))
                    for s in d if 3 <= len(s) <= 12)
    twice, once = tmp_path / "twice.txt", tmp_path / "once.txt"
    write_corpus_file(twice, [[sentence, sentence]])
    write_corpus_file(once, [[sentence]])
    rest_twice = main(run_args(tcnlm_run, "--text-file", str(twice)))
    rest_once = main(run_args(tcnlm_run, "--text-file", str(once)))
    causal = main(run_args(tcnlm_run, "--text-file", str(twice), "--context", "preceding"))
    assert causal["context"] == "preceding" and rest_twice["context"] is None
    assert causal["predicted_tokens"] == rest_twice["predicted_tokens"]
    assert causal["nll"] == pytest.approx(rest_twice["nll"] / 2 + rest_once["nll"], rel=1e-5)
    assert causal["nll"] != rest_twice["nll"]                      # the context counts
    with pytest.raises(SystemExit) as exit_info:
        main(run_args(tcnlm_run, "--topics", "shuffled", "--context", "preceding"))
    assert exit_info.value.code == 2
    assert "shuffled topics read the whole of another document" in capsys.readouterr().err


def test_topics_written_and_in_tensorboard(tcnlm_run):
    """The trainer's table of the topics after each epoch, then evaluate.topics': topics.txt,
    one more table (of its --top-n words) and, with --projector, every word-embedding table
    of the model and its topics for the projector, each with one label per row."""
    from google.protobuf import text_format
    from tensorboard.plugins.projector import ProjectorConfig

    from evaluate.topics import main
    from tcnlm_tf.metrics.topic_words import markdown_table
    run_dir, metrics = tcnlm_run[:2]
    acc, _ = tensorboard_tags(run_dir, "tensors")
    trained = acc.Tensors("topics/top_words")
    assert [event.step for event in trained] == [epoch["step"] for epoch in metrics["epochs"]]
    topics = main(run_args(tcnlm_run, "--top-n", "6", "--projector"))
    assert len(topics) == 4 and all(len(t) == 6 and not {"<pad>", "<eos>", "<unk>"} & set(t)
                                    for t in topics)
    lines = (run_dir / "topics.txt").read_text().splitlines()
    assert lines[0] == "topic 0: " + " ".join(topics[0])
    acc, _ = tensorboard_tags(run_dir, "tensors")
    tables = [event.tensor_proto.string_val[0].decode()
              for event in acc.Tensors("topics/top_words")]
    assert len(tables) == len(trained) + 1 and tables[-1] == markdown_table(topics)
    board = run_dir / "tensorboard"
    config = text_format.Parse((board / "projector_config.pbtxt").read_text(),
                               ProjectorConfig())
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(board)))
    labels = {}
    for embedding in config.embeddings:
        labels[embedding.tensor_name.split("/")[0]] = (
            board / embedding.metadata_path).read_text().splitlines()
        rows = reader.get_variable_to_shape_map()[embedding.tensor_name][0]
        assert len(labels[embedding.tensor_name.split("/")[0]]) == rows
    assert labels["embedding_embeddings"] == (run_dir / "lm_vocab.txt").read_text().splitlines()
    assert labels["topic_word"] == lines


def test_coherence_summary(tcnlm_run):
    from evaluate.coherence import coherence, main
    from evaluate.common import read_documents, split_file
    from tcnlm_tf.runs.loading import load_run
    result = main(run_args(tcnlm_run, "--window", "10"))
    assert set(result["per_n"]) == {5, 10, 15, 20}
    assert result["mean"] == pytest.approx(np.mean(list(result["per_n"].values())))
    assert json.loads((tcnlm_run[0] / "coherence.json").read_text())["window"] == 10
    # the run's own topics, counted in windows of 10 over its training split
    run = load_run(tcnlm_run[0])
    reference = read_documents(split_file(run, "train"))
    expected = {window: coherence(run, reference, window) for window in (10, 0)}
    assert result["per_n"] == pytest.approx(expected[10]["per_n"])
    assert expected[0]["mean"] != pytest.approx(expected[10]["mean"])   # the window counts
    # the file names its convention and keeps the words it scored, so a record can be
    # scored again without the run
    saved = json.loads((tcnlm_run[0] / "coherence.json").read_text())
    assert saved["convention"] == "toolkit" and saved["top_words"] == expected[10]["top_words"]
    assert [len(topic) for topic in saved["top_words"]] == [25] * 4
    # beside it, the topics' diversity at 10 and 25 top words, from the same words
    from tcnlm_tf.metrics.coherence import topic_diversity
    assert saved["diversity"] == {str(n): pytest.approx(topic_diversity(saved["top_words"], n))
                                  for n in (10, 25)}
    limit = main(run_args(tcnlm_run, "--window", "10", "--convention", "limit"))
    assert limit["convention"] == "limit"
    assert limit["per_n"] == pytest.approx(coherence(run, reference, 10, "limit")["per_n"])
    assert limit["mean"] != pytest.approx(result["mean"])


def test_infer_numbers_picture_and_tensorboard_image(tcnlm_run):
    from evaluate.infer import main
    result = main(run_args(tcnlm_run, "--document", "1"))
    assert len(result["topics"]) == 4 and sum(result["topics"]) == pytest.approx(1.0, abs=1e-5)
    png = (tcnlm_run[0] / "topics_doc1.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    _, tags = tensorboard_tags(tcnlm_run[0], "tensors")
    assert "topics/document_1" in tags


def test_infer_rejects_a_document_out_of_range(tcnlm_run, capsys):
    from evaluate.infer import main
    with pytest.raises(SystemExit) as exit_info:
        main(run_args(tcnlm_run, "--document", "999"))
    assert exit_info.value.code == 2 and "out of range" in capsys.readouterr().err


def test_generate_for_a_topic_and_a_mixture(tcnlm_run):
    from evaluate.generate import main
    vocab = set((tcnlm_run[0] / "lm_vocab.txt").read_text().split())
    one = main(run_args(tcnlm_run, "--topic", "2", "--num", "2", "--seed", "1"))
    mixed = main(run_args(tcnlm_run, "--mixture", "0:0.5,3:0.5", "--greedy", "--num", "1"))
    for sentence in one + mixed:
        words = sentence.split()
        assert len(words) <= 40 and set(words) <= vocab and "<eos>" not in words
    assert one == main(run_args(tcnlm_run, "--topic", "2", "--num", "2", "--seed", "1"))


def test_generate_continues_a_prompt_with_each_sampler(tcnlm_run):
    """--prompt starts every sentence; top-k 1 and a tiny top-p sample what greedy decoding
    takes; a beam search answers as many sentences as asked."""
    from evaluate.generate import main
    common = ["--topic", "1", "--prompt", "w1 w2", "--num", "2"]
    greedy = main(run_args(tcnlm_run, *common, "--greedy"))
    assert all(s.split()[:2] == ["w1", "w2"] for s in greedy)
    assert main(run_args(tcnlm_run, *common, "--top-k", "1", "--seed", "3")) == greedy
    assert main(run_args(tcnlm_run, *common, "--top-p", "1e-6", "--seed", "3")) == greedy
    beams = main(run_args(tcnlm_run, *common, "--beams", "3"))
    assert len(beams) == 2 and beams[0].startswith("w1 w2")


def test_generation_without_unk(tcnlm_run):
    """With <unk> made by far the most likely word, greedy decoding emits only <unk>, and
    with allow_unk=False sampling emits words but no <unk>."""
    from tcnlm_tf.data.pipeline import UNK_ID
    from tcnlm_tf.metrics.evaluation import generate, topic_vector
    from tcnlm_tf.runs.loading import load_run
    run = load_run(tcnlm_run[0])
    bias = run.model.softmax.head_bias
    bias.assign(tf.tensor_scatter_nd_update(bias, [[UNK_ID]], [50.0]))
    t = topic_vector(4, topic=1)
    with_unk = generate(run, t, num=2, greedy=True, max_words=5)
    # sampled, so that an <eos> first (an empty sentence) cannot hide every word
    without = generate(run, t, num=4, temperature=1.0, max_words=5, allow_unk=False)
    assert with_unk == [["<unk>"] * 5] * 2
    assert any(without) and not any("<unk>" in words for words in without)


@pytest.mark.parametrize("args,fragment", [(["--topic", "9"], "out of range"),
                                           (["--mixture", "1:x"], "TOPIC:WEIGHT"),
                                           ([], "--topic I")])
def test_generate_rejects_bad_topics(tcnlm_run, capsys, args, fragment):
    from evaluate.generate import main
    with pytest.raises(SystemExit):
        main(run_args(tcnlm_run, *args))
    assert fragment in capsys.readouterr().err


def test_topics_export_reads_back_as_octis_reads_it(tcnlm_run, tmp_path, capsys):
    """--export writes OCTIS's model output: loaded as its load_model_output does, the
    matrices are the model's beta and its theta of the training and test documents, and its
    vocabulary file turns each topic-word row back into the topic's top words."""
    from evaluate.common import read_documents, split_file
    from evaluate.topics import main, topic_words
    from tcnlm_tf.metrics.evaluation import document_topics
    from tcnlm_tf.runs.loading import load_run

    path = tmp_path / "octis" / "model_output.npz"
    topics = main(run_args(tcnlm_run, "--export", str(path)))
    output = dict(np.load(path, allow_pickle=True))
    run = load_run(tcnlm_run[0])
    beta, words = topic_words(run)
    assert set(output) == {"topics", "topic-word-matrix", "topic-document-matrix",
                           "test-topic-document-matrix"}
    assert output["topics"].tolist() == topics
    np.testing.assert_allclose(output["topic-word-matrix"], beta)
    for key, split in (("topic-document-matrix", "train"), ("test-topic-document-matrix", "test")):
        documents = read_documents(split_file(run, split))
        assert output[key].shape == (len(topics), len(documents))
        np.testing.assert_allclose(output[key], document_topics(run, documents).T, atol=1e-6)
    index2vocab = json.loads((tmp_path / "octis" / "model_output.vocabulary.json").read_text())
    for topic, row in zip(topics, output["topic-word-matrix"]):
        ranked = [index2vocab[str(i)] for i in np.argsort(row)[::-1]]
        assert [w for w in ranked if not w.startswith("<")][:len(topic)] == topic
    with pytest.raises(SystemExit):
        main(run_args(tcnlm_run, "--export", str(tmp_path / "output.txt")))
    assert "an .npz file" in capsys.readouterr().err


def test_topics_rejects_a_non_positive_top_n(tcnlm_run, capsys):
    from evaluate.topics import main
    with pytest.raises(SystemExit) as stop:
        main(run_args(tcnlm_run, "--top-n", "0"))
    assert stop.value.code == 2
    assert "argument --top-n: expected an integer from 1" in capsys.readouterr().err


def test_topic_vector_conditions_generation(tcnlm_run):
    """Different one-hot topics change the next-word distribution (t enters the LM)."""
    from tcnlm_tf.metrics.evaluation import topic_vector
    from tcnlm_tf.runs.loading import load_run
    run = load_run(tcnlm_run[0])
    inputs = tf.constant([[2, 5, 7]])
    dists = []
    for k in range(2):
        context = run.model.topic_context(tf.constant(topic_vector(4, topic=k)[None]))
        hidden, _ = run.model.encode(inputs, context)
        dists.append(run.model.log_probs(hidden, context).numpy())
    assert np.abs(dists[0] - dists[1]).max() > 1e-4
    np.testing.assert_allclose(np.exp(dists[0]).sum(-1), 1.0, atol=1e-4)


def test_recovery_reports_a_matched_cosine(tcnlm_run):
    from evaluate.recovery import main
    from evaluate.topics import topic_words
    from tcnlm_tf.data import synthetic
    from tcnlm_tf.data.loading import source_dir
    from tcnlm_tf.metrics.recovery import topic_recovery
    from tcnlm_tf.runs.loading import load_run
    result = main(run_args(tcnlm_run))
    assert result["num_true"] == 4 and result["num_learned"] == 4
    assert len(result["matched"]) == 4
    run = load_run(tcnlm_run[0])
    truth = synthetic.load_truth(source_dir(run.config.data))
    expected = topic_recovery(truth.topic_word, truth.words, *topic_words(run))
    assert result["mean_matched_cosine"] == pytest.approx(expected["mean_matched_cosine"])
    assert 0.0 < result["mean_matched_cosine"] < 1.0


def test_commands_refuse_a_plain_lstm_run(tmp_path, capsys):
    from evaluate.topics import main
    train(TINY + ["--epochs", "1", "--runs-dir", str(tmp_path / "runs"), "--cache-dir",
                  str(tmp_path / "cache"), "--run-name", "plain"])
    with pytest.raises(SystemExit):
        main(["--run", str(tmp_path / "runs" / "plain")])
    assert "needs a topic model" in capsys.readouterr().err
