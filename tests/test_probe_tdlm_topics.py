"""benchmarks.probe_tdlm_topics on a tiny TDLM trained under --context preceding: its two
gradient parts (examples with an empty context, the others) add up to the whole gradient,
its attention summary and NPMI split are those of the run's attention, its counts of empty
contexts under each protocol are those of the documents' own words, and a run of another
model is a one-line error."""
import json

import numpy as np
import pytest
import tensorflow as tf

from benchmarks.probe_tdlm_topics import (attention_concentration, empty_contexts,
                                          gradient_parts, main, shared_groups)
from evaluate.common import read_documents, split_file
from tcnlm_tf.data import pipeline
from tcnlm_tf.metrics.evaluation import document_topics
from tcnlm_tf.models.registry import MODELS
from tcnlm_tf.runs.loading import encode_documents, load_run
from tests.conftest import run_flags
from tests.test_evaluate import TINY
from train.run import main as train

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow


def test_shared_groups_count_topics_alike_to_enough_others():
    top = [(1, 2, 3), (1, 2, 4), (1, 2, 5), (7, 8, 9)]
    np.testing.assert_array_equal(shared_groups(top, 2, 2), [True, True, True, False])
    np.testing.assert_array_equal(shared_groups(top, 3, 1), [False] * 4)


def test_attention_concentration_counts_the_topics_the_documents_use():
    # 4 topics; documents put 0.9 on topic 0 or 2, topic 3 gets 0.001, topic 1 the rest
    attention = np.array([[0.9, 0.099, 0.0, 0.001], [0.0, 0.099, 0.9, 0.001]])
    found = attention_concentration(attention)
    assert found["topics_for_share"] == 3  # 0.45 + 0.45 + 0.099 = 0.999 >= 0.99
    assert found["unused"] == 1  # topic 3: 0.001 < 1 % of 1/4 = 0.0025
    assert found["document_max"] == pytest.approx(0.9)
    assert found["used"] == [0, 1, 2]
    assert attention_concentration(np.full((3, 4), 0.25)) == {
        "topics_for_share": 4, "share": 0.99, "used": [0, 1, 2, 3], "unused": 0,
        "document_max": 0.25}


@pytest.fixture(scope="module")
def preceding_tdlm(tmp_path_factory):
    """A tiny TDLM run trained one epoch under --context preceding (its directory), shared by
    the tests that read a run's weights, vocabularies and configuration."""
    workdir = tmp_path_factory.mktemp("probe")
    train(TINY + ["--model", "tdlm", *MODELS["tdlm"].test_flags, "--context", "preceding",
                  "--epochs", "1", *run_flags(workdir, "tdlm")])
    return workdir / "runs" / "tdlm"


def test_the_probe_splits_the_gradient_by_empty_context(preceding_tdlm, capsys):
    run_dir = preceding_tdlm
    run = load_run(run_dir)
    documents = read_documents(split_file(run, "train"))
    arrays = encode_documents(run, documents)
    empty, other, counts = gradient_parts(run, arrays, 2)
    assert counts[0] > 0 and counts[1] > 0 and not np.allclose(empty, 0)
    variable = run.model.topic_model.attention.topic_outputs
    dataset = pipeline.model_dataset(run.model, run.config, arrays, "train", shuffle_seed=0)
    whole = np.zeros(variable.shape)
    for batch in dataset.take(2):
        with tf.GradientTape() as tape:
            loss = run.model.loss_terms(batch)["nll_sum"]
        whole += tf.convert_to_tensor(tape.gradient(loss, variable)).numpy()
    np.testing.assert_allclose(empty + other, whole, rtol=1e-4, atol=1e-6)
    per_topic = [0.1, 0.2, 0.3, 0.4]   # a compare-written coherence.json, one NPMI per topic
    (run_dir / "coherence.json").write_text(json.dumps({"per_topic": per_topic}))
    try:
        result = main(["--run", str(run_dir), "--batches", "2", "--list"])
    finally:
        (run_dir / "coherence.json").unlink()
    assert result["examples"] == {"empty": counts[0], "other": counts[1]}
    assert result["topics"] == 4
    concentration = attention_concentration(document_topics(run, documents))
    assert result["attention"] == concentration
    used = concentration["used"]
    topic_model = run.model.topic_model
    top = np.argsort(-topic_model.topic_word().numpy(), axis=1)[:, :10]
    bias_top = np.argsort(-topic_model.word_output.bias.numpy())[:10]
    assert result["in_bias_top"]["used"] == pytest.approx(
        np.mean([len(set(top[k]) & set(bias_top)) for k in used]))
    assert result["npmi_used"] == pytest.approx(np.mean([per_topic[k] for k in used]))
    if len(used) < 4:
        assert result["npmi_others"] == pytest.approx(
            np.mean([v for k, v in enumerate(per_topic) if k not in used]))
    assert result["empty_in_split"] == empty_contexts(run, arrays)
    out = capsys.readouterr().out
    assert "share of the gradient on B_k from empty contexts" in out
    listed = [line for line in out.splitlines() if line.startswith("| ")
              and line.split(" | ")[0][2:].isdigit()]
    assert sorted(int(line.split(" | ")[0][2:]) for line in listed) == [0, 1, 2, 3]


def test_empty_contexts_are_counted_from_the_documents_words(preceding_tdlm):
    """Each example's context, counted from its document's sentences and the topic
    vocabulary: the sentences before its own (preceding) or all the others (rest), whatever
    protocol the run trained under."""
    run = load_run(preceding_tdlm)
    documents = read_documents(split_file(run, "train"))
    documents[0] = [["zzz-not-a-topic-word"]] + documents[0]   # an empty first sentence
    documents.append([["zzz-not-a-topic-word"]])                 # a document with no topic word
    arrays = encode_documents(run, documents)
    examples = pipeline.sentence_examples(arrays, run.config.data.seq_len)
    topic_words = [[sum(word in run.topic_vocab.index for word in sentence)
                    for sentence in document] for document in documents]
    first_sentence = np.cumsum([0] + [len(document) for document in documents])
    expected = {"rest": 0, "preceding": 0}
    for document, sentence in zip(examples.documents, examples.sentences):
        words = topic_words[document]
        own = sentence - first_sentence[document]
        expected["preceding"] += sum(words[:own]) == 0
        expected["rest"] += sum(words) - words[own] == 0
    counts = empty_contexts(run, arrays)
    assert counts == {protocol: (expected[protocol], len(examples)) for protocol in expected}
    assert counts["rest"][0] >= 1 and counts["preceding"][0] > counts["rest"][0]


def test_a_run_of_another_model_is_a_one_line_error(tmp_path, capsys):
    train(TINY + ["--model", "lstm", "--max-steps", "1", *run_flags(tmp_path, "lstm")])
    with pytest.raises(SystemExit) as exit_info:
        main(["--run", str(tmp_path / "runs" / "lstm")])
    assert exit_info.value.code == 2
    assert "the probe reads TDLM's attention" in capsys.readouterr().err
