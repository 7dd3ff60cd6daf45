"""Tests of the synthetic HMM-LDA corpus and its exact oracle (tcnlm_tf.data.synthetic)."""
from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from tcnlm_tf.data import synthetic as syn
from tcnlm_tf.errors import UserError
from tests.conftest import REPO_ROOT

TINY = syn.SyntheticConfig(num_topics=3, content_vocab_size=30, train_docs=20, valid_docs=5,
                           test_docs=5, min_sentences=2, max_sentences=4)
MEDIUM = syn.SyntheticConfig(train_docs=200, valid_docs=20, test_docs=20)


@pytest.fixture(scope="module")
def tiny():
    return syn.generate(TINY)


@pytest.fixture(scope="module")
def medium():
    return syn.generate(MEDIUM)


def sentences_of(documents):
    return [s for doc in documents for s in doc]


def brute_force_log_prob(truth, theta, sentence):
    """log p(sentence, END) by summing over every class path (no forward algorithm)."""
    index = {w: i for i, w in enumerate(truth.words)}
    ids = [index[w] for w in sentence]
    emissions = truth.class_word.copy()
    emissions[0] = theta @ truth.topic_word
    num_classes = len(truth.start)
    capped = len(ids) == truth.config.max_sentence_length
    total = 0.0
    for path in itertools.product(range(num_classes), repeat=len(ids)):
        p = truth.start[path[0]] * emissions[path[0], ids[0]]
        for prev, cur, w in zip(path, path[1:], ids[1:]):
            p *= truth.transition[prev, cur] * emissions[cur, w]
        total += p * (1.0 if capped else truth.transition[path[-1], num_classes])
    return math.log(total)


# ----------------------------------------------------------------------------- generator


def test_module_is_pure_numpy():
    code = "import sys, tcnlm_tf.data.synthetic; assert 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)


def test_same_config_same_corpus_and_truth():
    a_corpus, a_truth = syn.generate(TINY)
    b_corpus, b_truth = syn.generate(TINY)
    assert a_corpus == b_corpus
    assert a_truth.words == b_truth.words
    for name in ("topic_word", "class_word", "start", "transition"):
        np.testing.assert_array_equal(getattr(a_truth, name), getattr(b_truth, name))
    for split in syn.SPLITS:
        np.testing.assert_array_equal(a_truth.theta[split], b_truth.theta[split])


def test_different_seed_different_corpus(tiny):
    corpus, truth = syn.generate(dataclasses.replace(TINY, seed=1))
    assert corpus["train"] != tiny[0]["train"]
    assert truth.words != tiny[1].words


def test_split_sizes_and_sentence_counts(tiny):
    corpus, truth = tiny
    for split, n in (("train", 20), ("valid", 5), ("test", 5)):
        assert len(corpus[split]) == n
        assert truth.theta[split].shape == (n, TINY.num_topics)
        assert all(2 <= len(doc) <= 4 for doc in corpus[split])


def test_truth_shapes_and_simplex(tiny):
    _, truth = tiny
    v, k, c = len(truth.words), TINY.num_topics, TINY.num_classes
    assert truth.topic_word.shape == (k, v) and truth.class_word.shape == (c, v)
    assert truth.start.shape == (c,) and truth.transition.shape == (c, c + 1)
    np.testing.assert_allclose(truth.topic_word.sum(1), 1.0)
    np.testing.assert_allclose(truth.class_word[1:].sum(1), 1.0)
    np.testing.assert_allclose(truth.transition.sum(1), 1.0)
    np.testing.assert_allclose(truth.start.sum(), 1.0)
    assert not truth.class_word[0].any()
    assert not truth.topic_word[:, TINY.content_vocab_size:].any()
    for split in syn.SPLITS:
        np.testing.assert_allclose(truth.theta[split].sum(1), 1.0)


def test_vocabulary_content_and_function_words(medium):
    _, truth = medium
    stopwords = syn.load_stopwords()
    content = truth.words[: MEDIUM.content_vocab_size]
    function = truth.words[MEDIUM.content_vocab_size:]
    assert len(set(truth.words)) == len(truth.words)
    assert all(w.isalpha() and w.islower() for w in content)
    assert not stopwords & set(content)
    assert function and set(function) <= stopwords
    assert (np.count_nonzero(truth.class_word[1:], axis=0) >= 2).any(), "no ambiguous word"


def test_word_statistics_in_intended_ranges(medium):
    corpus, truth = medium
    content = set(truth.words[: MEDIUM.content_vocab_size])
    sentences = sentences_of(corpus["train"])
    words = [w for s in sentences for w in s]
    assert 10 <= len(words) / len(sentences) <= 20
    assert 0.40 <= sum(w in content for w in words) / len(words) <= 0.50
    assert max(map(len, sentences)) <= MEDIUM.max_sentence_length


def test_generator_follows_its_transition_matrix(medium):
    corpus, truth = medium
    c = MEDIUM.num_classes
    sentences = sentences_of(corpus["train"])
    expected_classes = truth.start @ np.linalg.inv(np.eye(c) - truth.transition[:, :c])
    mean_length = np.mean([len(s) for s in sentences])
    assert abs(mean_length - expected_classes.sum()) < 1.0
    content = set(truth.words[: MEDIUM.content_vocab_size])
    first_is_content = np.mean([s[0] in content for s in sentences])
    assert abs(first_is_content - truth.start[0]) < 0.04


def test_length_cap_is_applied():
    corpus, _ = syn.generate(dataclasses.replace(TINY, max_sentence_length=4))
    lengths = [len(s) for split in syn.SPLITS for s in sentences_of(corpus[split])]
    assert max(lengths) == 4 and min(lengths) >= 1


def test_invalid_config_is_a_user_error():
    with pytest.raises(UserError):
        syn.SyntheticConfig(num_classes=1)
    with pytest.raises(UserError):
        syn.SyntheticConfig(min_sentences=5, max_sentences=4)
    with pytest.raises(UserError):
        syn.SyntheticConfig.from_dict({"seed": 1, "bogus": 2})


def test_config_dict_round_trip():
    config = dataclasses.replace(TINY, seed=7, doc_topic_alpha=0.05)
    assert syn.SyntheticConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


# ----------------------------------------------------------------------------- oracle


def test_forward_algorithm_matches_brute_force(tiny):
    corpus, truth = tiny
    short = [(i, s) for i, doc in enumerate(corpus["test"]) for s in doc if len(s) <= 5][:6]
    assert len(short) >= 3
    for doc, sentence in short:
        theta = truth.theta["test"][doc]
        assert syn.sentence_log_prob(truth, theta, sentence) == pytest.approx(
            brute_force_log_prob(truth, theta, sentence), rel=1e-10)


def test_forward_algorithm_matches_brute_force_at_the_cap():
    corpus, truth = syn.generate(dataclasses.replace(TINY, max_sentence_length=4))
    capped = [(i, s) for i, doc in enumerate(corpus["train"]) for s in doc if len(s) == 4][:3]
    assert capped
    for doc, sentence in capped:
        theta = truth.theta["train"][doc]
        assert syn.sentence_log_prob(truth, theta, sentence) == pytest.approx(
            brute_force_log_prob(truth, theta, sentence), rel=1e-10)
    with pytest.raises(UserError):
        syn.sentence_log_prob(truth, truth.theta["train"][0], capped[0][1] + capped[0][1][:1])


def test_step_distributions_sum_to_one_and_score_the_sentence(tiny):
    corpus, truth = tiny
    theta = truth.theta["valid"][0]
    index = {w: i for i, w in enumerate(truth.words)}
    for sentence in corpus["valid"][0]:
        steps = syn.step_distributions(truth, theta, sentence)
        assert steps.shape == (len(sentence) + 1, len(truth.words) + 1)
        np.testing.assert_allclose(steps.sum(1), 1.0, rtol=1e-12)
        assert steps[0, -1] == 0.0
        picked = [steps[t, index[w]] for t, w in enumerate(sentence)] + [steps[-1, -1]]
        assert np.log(picked).sum() == pytest.approx(syn.sentence_log_prob(truth, theta, sentence))


def test_step_distribution_at_the_cap_is_end():
    corpus, truth = syn.generate(dataclasses.replace(TINY, max_sentence_length=4))
    sentence = next(s for s in sentences_of(corpus["train"]) if len(s) == 4)
    steps = syn.step_distributions(truth, truth.theta["train"][0], sentence)
    assert steps[-1, -1] == 1.0 and not steps[-1, :-1].any()


def test_token_of_pools_probability_of_merged_words(tiny):
    corpus, truth = tiny
    documents = corpus["test"]
    rare = set(truth.words[::3])
    to_unk = lambda w: "<unk>" if w in rare else w  # noqa: E731
    nll, count = syn.oracle_log_probs(truth, "test", documents)
    merged_nll, merged_count = syn.oracle_log_probs(truth, "test", documents, to_unk)
    identity_nll, _ = syn.oracle_log_probs(truth, "test", documents, lambda w: w)
    assert merged_count == count
    assert merged_nll < nll
    assert identity_nll == pytest.approx(nll, rel=1e-12)


def test_token_of_is_the_sum_over_each_token_group(tiny):
    corpus, truth = tiny
    groups = {w: f"g{i % 4}" for i, w in enumerate(truth.words)}
    members = collections.defaultdict(list)
    for i, w in enumerate(truth.words):
        members[groups[w]].append(i)
    theta = truth.theta["test"][1]
    sentence = corpus["test"][1][0]
    steps = syn.step_distributions(truth, theta, sentence)
    expected = sum(math.log(steps[t, members[groups[w]]].sum()) for t, w in enumerate(sentence))
    expected += math.log(steps[-1, -1])
    assert syn.sentence_log_prob(truth, theta, sentence, groups.get) == pytest.approx(expected)


def test_oracle_counts_words_plus_one_eos_per_sentence(tiny):
    corpus, truth = tiny
    sentences = sentences_of(corpus["valid"])
    nll, count = syn.oracle_log_probs(truth, "valid", corpus["valid"])
    assert count == sum(len(s) for s in sentences) + len(sentences)
    per_sentence = [syn.sentence_log_prob(truth, truth.theta["valid"][i], s)
                    for i, doc in enumerate(corpus["valid"]) for s in doc]
    assert nll == pytest.approx(-sum(per_sentence))
    assert syn.oracle_perplexity(truth, "valid", corpus["valid"]) == pytest.approx(
        math.exp(nll / count))


def test_oracle_uses_each_documents_own_theta(medium):
    corpus, truth = medium
    nll, _ = syn.oracle_log_probs(truth, "test", corpus["test"])
    shifted = dataclasses.replace(truth, theta={"test": np.roll(truth.theta["test"], 1, axis=0)})
    shifted_nll, _ = syn.oracle_log_probs(shifted, "test", corpus["test"])
    assert shifted_nll > 1.1 * nll


def test_oracle_beats_a_unigram_model(medium):
    corpus, truth = medium
    counts = collections.Counter(w for s in sentences_of(corpus["train"]) for w in s + ["<eos>"])
    total = sum(counts.values()) + len(truth.words) + 1
    test_tokens = [w for s in sentences_of(corpus["test"]) for w in s + ["<eos>"]]
    unigram = math.exp(-np.mean([math.log((counts[w] + 1) / total) for w in test_tokens]))
    oracle = syn.oracle_perplexity(truth, "test", corpus["test"])
    assert oracle < 0.6 * unigram


def test_oracle_rejects_unknown_words_and_too_many_documents(tiny):
    corpus, truth = tiny
    with pytest.raises(UserError):
        syn.oracle_log_probs(truth, "test", [[["zzzzzz"]]])
    with pytest.raises(UserError):
        syn.oracle_log_probs(truth, "test", corpus["train"])


# ----------------------------------------------------------------------------- files


def read_tdlm(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    return [[sentence.split(" ") for sentence in line.split("\t")] for line in lines]


def mtimes(directory):
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir()}


def test_write_corpus_round_trip(tmp_path, tiny):
    corpus, truth = tiny
    out = syn.write_corpus(tmp_path / "synth", TINY)
    assert sorted(p.name for p in out.iterdir()) == [
        "test.txt", "train.txt", "truth.npz", "valid.txt"]
    for split in syn.SPLITS:
        assert read_tdlm(out / f"{split}.txt") == corpus[split]
    loaded = syn.load_truth(out)
    assert loaded.config == TINY and loaded.words == truth.words
    for name in ("topic_word", "class_word", "start", "transition"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(truth, name))
    for split in syn.SPLITS:
        np.testing.assert_array_equal(loaded.theta[split], truth.theta[split])


def test_write_corpus_second_call_is_a_no_op(tmp_path):
    out = syn.write_corpus(tmp_path, TINY)
    before = mtimes(out)
    syn.write_corpus(tmp_path, TINY)
    assert mtimes(out) == before


def test_write_corpus_rewrites_for_a_different_config(tmp_path):
    syn.write_corpus(tmp_path, TINY)
    old_train = (tmp_path / "train.txt").read_text()
    other = dataclasses.replace(TINY, seed=3)
    syn.write_corpus(tmp_path, other)
    assert syn.load_truth(tmp_path).config == other
    assert (tmp_path / "train.txt").read_text() != old_train
    assert read_tdlm(tmp_path / "train.txt") == syn.generate(other)[0]["train"]


def test_write_corpus_completes_an_incomplete_directory(tmp_path):
    syn.write_corpus(tmp_path, TINY)
    (tmp_path / "valid.txt").unlink()
    syn.write_corpus(tmp_path, TINY)
    assert read_tdlm(tmp_path / "valid.txt") == syn.generate(TINY)[0]["valid"]
    truth_bytes = (tmp_path / "truth.npz").read_bytes()
    for broken in (b"not a zip", truth_bytes[: len(truth_bytes) // 2]):
        (tmp_path / "truth.npz").write_bytes(broken)
        syn.write_corpus(tmp_path, TINY)
    assert syn.load_truth(tmp_path).config == TINY
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "test.txt", "train.txt", "truth.npz", "valid.txt"]


def test_load_truth_without_corpus_is_a_user_error(tmp_path):
    with pytest.raises(UserError):
        syn.load_truth(tmp_path)


def test_interrupted_rewrite_never_looks_complete(tmp_path, monkeypatch):
    syn.write_corpus(tmp_path, TINY)
    real_write, calls = syn.write_corpus_file, []

    def crash_on_second_file(path, documents):
        calls.append(1)
        if len(calls) == 2:
            # die half-way through the file, as an interrupted write would
            syn.atomic_write(path, lambda f: (f.write(b"partial"),
                                              (_ for _ in ()).throw(KeyboardInterrupt)))
        return real_write(path, documents)

    monkeypatch.setattr(syn, "write_corpus_file", crash_on_second_file)
    with pytest.raises(KeyboardInterrupt):
        syn.write_corpus(tmp_path, dataclasses.replace(TINY, seed=5))
    monkeypatch.undo()
    assert not (tmp_path / "truth.npz").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    syn.write_corpus(tmp_path, TINY)
    assert read_tdlm(tmp_path / "train.txt") == syn.generate(TINY)[0]["train"]
