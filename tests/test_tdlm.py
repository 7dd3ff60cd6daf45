"""TDLM (Lau et al. 2017) as a model of the project: its document context leaves the sentence
out, the two tasks alternate with their own optimisers and resume exactly, the extensions
(labels, tags, word2vec embeddings) work on the synthetic corpus, and bad side files are
one-line errors before any training."""
import json

import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.data import pipeline, synthetic
from tcnlm_tf.data.loading import encode_split, load_corpus, source_dir
from tcnlm_tf.data.vocab import UNK, Vocabulary
from tcnlm_tf.models.registry import MODELS
from tests.conftest import TINY, TINY_EPOCH, run_flags
from train.run import build_parser, config_from_args, main
from train.trainer import Trainer

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

TDLM = ["--model", "tdlm", *MODELS["tdlm"].test_flags]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("tdlm")


def trainer_for(workdir, *flags, name="t"):
    config = config_from_args(build_parser().parse_args(
        TINY + TDLM + list(flags) + run_flags(workdir, name)))
    corpus = load_corpus(config.data, cache_dir=workdir / "cache", log=lambda _: None)
    return Trainer(config, corpus, workdir / "runs" / name, log=lambda _: None)


def test_a_sentence_contributes_none_of_its_words_to_its_own_context():
    """Sentence 1 of the document uses words found nowhere else in it: its context (the
    bag of words the topic model reads) holds none of them, the other sentences' do."""
    words = ["<pad>", "alpha", "beta", "gamma", "delta", "omega", "sigma"]
    lm = Vocabulary(["<pad>", UNK, "<eos>", *words[1:]], unk=UNK)
    topic = Vocabulary(words)
    document = [["alpha", "beta"], ["omega", "sigma", "omega"], ["gamma", "delta"]]
    split = encode_split([document], lm, topic)
    examples = pipeline.sentence_examples(split, seq_len=30)
    batch = next(iter(pipeline.sentence_dataset(split, examples, 3,
                                                pipeline.ContextSpec(("bow",), 10))))
    own = {topic.index["omega"], topic.index["sigma"]}
    contexts = [set(row[row > 0].tolist()) for row in batch["bow"].numpy()]
    assert contexts[1] == {topic.index[w] for w in ("alpha", "beta", "gamma", "delta")}
    assert not contexts[1] & own
    assert own <= contexts[0] and own <= contexts[2]


def test_the_topic_vector_of_a_sentence_ignores_its_own_words(workdir):
    """Through the model: changing the words of sentence i leaves s of sentence i unchanged
    and changes s of the other sentences of its document."""
    trainer = trainer_for(workdir, name="ctx")
    model, arrays = trainer.model, trainer.corpus.splits["valid"]
    examples = pipeline.sentence_examples(arrays, 8)
    first = np.flatnonzero(examples.documents == 0)
    assert len(first) >= 3

    def topic_vectors(topic_ids):
        split = type(arrays)(**{**vars(arrays), "topic_ids": topic_ids})
        changed = pipeline.sentence_examples(split, 8)
        batch = next(iter(pipeline.sentence_dataset(split, changed, len(first),
                                                    pipeline.ContextSpec(("bow",)))))
        return model.context(batch, training=False)["topic_vector"].numpy()

    before = topic_vectors(arrays.topic_ids)
    # an example of another sentence than the document's first, with topic words
    other = next(i for i, row in enumerate(first)
                 if examples.context[row, 1] != examples.context[first[0], 1]
                 and examples.context[row, 2] > examples.context[row, 1])
    start, end = examples.context[first[other], 1:3]
    ids = np.array(arrays.topic_ids)
    ids[start:end] = ids[start:end] % (len(trainer.corpus.topic_vocab) - 1) + 1   # other words
    assert (ids[start:end] != arrays.topic_ids[start:end]).all()
    after = topic_vectors(ids)
    np.testing.assert_allclose(after[other], before[other], atol=1e-6)
    assert np.abs(after[0] - before[0]).max() > 1e-6


def test_tasks_alternate_each_with_its_own_optimiser(workdir):
    trainer = trainer_for(workdir, "--max-steps", "6", name="alt")
    assert [task.name for task in trainer.tasks] == ["topic_model"]
    datasets, order = trainer._epoch_plan(0)
    assert set(order.tolist()) == {0, 1}
    assert (order[:10] != order[0]).any()           # interleaved, not one task then the other
    lm_variables = {id(v) for v in trainer.model.trainable_variables}
    topic_variables = trainer.model.topic_model.trainable_variables
    assert {id(v) for v in topic_variables} < lm_variables   # the LM step updates all
    outside = [v for v in trainer.model.trainable_variables
               if id(v) not in {id(t) for t in topic_variables}]
    before = [v.numpy() for v in outside]
    task_batch = next(iter(datasets[1]))
    trainer._task_steps["topic_model"](task_batch)
    assert trainer.task_optimizers["topic_model"].iterations.numpy() == 1
    assert trainer.step == 0                                  # no LM step was taken
    for variable, value in zip(outside, before):              # the task touched only its own
        np.testing.assert_array_equal(variable.numpy(), value)
    assert trainer.fit() == "max_steps" and trainer.step == 6
    assert trainer.task_optimizers["topic_model"].iterations.numpy() > 1


def test_resume_restores_both_optimisers_mid_epoch(workdir):
    first = trainer_for(workdir, "--max-steps", "5", name="resume")
    assert first.fit() == "max_steps"
    weights = [v.numpy() for v in first.model.weights]
    slots = [v.numpy() for v in first.task_optimizers["topic_model"].variables]
    fresh = trainer_for(workdir, "--max-steps", "5", name="resume")
    assert fresh.resume()
    assert int(fresh.batch_in_epoch) == int(first.batch_in_epoch) > fresh.step == 5
    for variable, want in zip(fresh.model.weights, weights):
        np.testing.assert_array_equal(variable.numpy(), want, variable.path)
    for got, want in zip(fresh.task_optimizers["topic_model"].variables, slots):
        np.testing.assert_array_equal(got.numpy(), want, got.path)


def dominant_topics(workdir):
    """Each synthetic document's dominant true topic, per split (a document label)."""
    config = config_from_args(build_parser().parse_args(TINY + run_flags(workdir, "x")))
    truth = synthetic.load_truth(source_dir(config.data, workdir / "cache"))
    return {split: truth.theta[split].argmax(1) for split in truth.theta}


def write_side_files(directory, rows):
    directory.mkdir(parents=True, exist_ok=True)
    for split, lines in rows.items():
        (directory / f"{split}.txt").write_text("".join(line + "\n" for line in lines))
    return directory


def test_labels_task_and_tags_on_the_synthetic_corpus(workdir):
    topics = dominant_topics(workdir)
    labels = write_side_files(workdir / "labels", {s: [f"topic{k}" for k in t]
                                                   for s, t in topics.items()})
    tags = write_side_files(workdir / "tags", {s: [f"t{k}\tall" for k in t]
                                               for s, t in topics.items()})
    metrics = main(TINY_EPOCH + TDLM + ["--doc-labels", str(labels), "--doc-tags", str(tags)]
                   + run_flags(workdir, "ext"))
    assert "valid_labels_correct" in metrics["epochs"][-1]
    from tcnlm_tf.runs.loading import load_run
    run = load_run(workdir / "runs" / "ext")
    dominant = set(topics["train"].tolist())
    assert run.model.topic_model.num_tags == len(dominant) + 1      # t<k> and "all"
    assert run.model.topic_model.num_labels == len(dominant)
    arrays = load_corpus(run.config.data, cache_dir=workdir / "cache").splits["test"]
    # the test accuracy is the share of test documents whose label the classifier's argmax
    # names, counted here from its logits
    [labels_task] = [task for task in run.model.tasks() if task.name == "labels"]
    hits = []
    for batch in labels_task.batches("test", arrays, 3, None):
        logits = run.model.topic_model.label_logits(run.model._topic_model(batch, False))
        hits += list(np.argmax(logits, -1) == batch["label"].numpy())
    assert len(hits) == arrays.num_documents
    assert metrics["test_tasks"]["labels_correct"] == pytest.approx(np.mean(hits))
    features = run.model.document_features("test", arrays)
    assert features["tags"].shape == (arrays.num_documents, 2)
    bow = tf.zeros([arrays.num_documents, 300], tf.int32) + 1
    with_tags = run.model.context({"bow": bow, "tags": features["tags"]})["topic_vector"]
    without = run.model.context({"bow": bow, "tags": 0 * features["tags"]})["topic_vector"]
    assert np.abs(with_tags.numpy() - without.numpy()).max() > 1e-6


def test_pretrained_embeddings_initialise_both_components(workdir):
    trainer = trainer_for(workdir, name="probe")
    words = trainer.corpus.lm_vocab.words
    topic_word = trainer.corpus.topic_vocab.words[1]
    dim = 12                                             # TINY's --embedding-dim
    rng = np.random.default_rng(0)
    known = {w: rng.normal(size=dim).round(4) for w in [words[5], topic_word]}
    path = workdir / "vectors.txt"
    path.write_text(f"{len(known) + 1} {dim}\n" + "".join(
        f"{w} {' '.join(map(str, v))}\n" for w, v in known.items())
        + "notaword " + " ".join(["0.5"] * dim) + "\n")
    trainer = trainer_for(workdir, "--embeddings", str(path), name="emb")
    logged = []
    trainer.model.prepare(trainer.corpus, trainer.run_dir, logged.append)
    lm_rows = trainer.model.embedding.embeddings.numpy()
    np.testing.assert_allclose(lm_rows[5], known[words[5]], atol=1e-6)
    topic_rows = trainer.model.topic_model.convolution.embeddings.numpy()
    np.testing.assert_allclose(topic_rows[1], known[topic_word], atol=1e-6)
    assert f"2 of {len(words)} LM words found" in logged[0]


@pytest.mark.parametrize("flags,fragment", [
    (["--model", "lstm", "--num-topics", "4"], "--num-topics does not apply to --model lstm"),
    (TDLM + ["--doc-labels", "{short}"], "has 3 lines but"),
    (TDLM + ["--doc-tags", "{short}"], "--doc-tags files need one line per corpus line"),
    (TDLM + ["--doc-labels", "{missing}"], "no "),
    (TDLM + ["--embeddings", "{garbage}"], "garbage.bin"),
    (TDLM + ["--embeddings", "{wrong_dim}"], "--embedding-dim"),
])
def test_bad_side_inputs_are_one_line_errors_before_training(workdir, tmp_path, capsys,
                                                             flags, fragment):
    short = write_side_files(tmp_path / "short", {"train": ["a", "b", "c"]})
    (tmp_path / "garbage.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "wrong.txt").write_text("1 3\nthe 0.1 0.2 0.3\n")
    paths = {"short": short, "missing": tmp_path / "nowhere",
             "garbage": tmp_path / "garbage.bin", "wrong_dim": tmp_path / "wrong.txt"}
    flags = [f.format(**paths) for f in flags]
    with pytest.raises(SystemExit) as exit_info:
        main(TINY + flags + run_flags(workdir, "bad"))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err
    metrics = workdir / "runs" / "bad" / "metrics.json"
    assert not metrics.is_file() or not json.loads(metrics.read_text()).get("epochs")
