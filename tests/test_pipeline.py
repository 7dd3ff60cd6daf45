"""Examples and batches: every target predicted exactly once, the document-minus-sentence
context, and document lanes that rebuild each document's token stream."""
import numpy as np
import pytest

from tcnlm_tf.data import pipeline
from tcnlm_tf.data.loading import encode_split
from tcnlm_tf.data.vocab import Vocabulary, LM_SPECIALS, TOPIC_SPECIALS, UNK

WORDS = [f"w{i}" for i in range(10)]
LM = Vocabulary(list(LM_SPECIALS) + WORDS, unk=UNK)
TOPIC = Vocabulary(list(TOPIC_SPECIALS) + ["w1", "w2", "w3"])
DOCS = [
    [["w1", "w4"], ["w2", "w5", "w6", "w7", "w8", "w9", "w0"], ["w3"]],
    [["w5", "w1", "zzz"]],
    [["w2"], ["w3", "w3"]],
]
SPLIT = encode_split(DOCS, LM, TOPIC)
EOS = pipeline.EOS_ID


def ids(words):
    return [LM.id(w) for w in words]


def whole(layout) -> dict[str, np.ndarray]:
    """Every batch of a document or stream layout, stacked: {name: [K, lanes, ...]}."""
    batches = [layout.batch(k) for k in range(layout.num_batches)]
    return {name: np.stack([batch[name] for batch in batches]) for name in batches[0]}


def document_lanes(*args, **kwargs) -> dict[str, np.ndarray]:
    return whole(pipeline.DocumentLanes(*args, **kwargs))


def stream_lanes(*args, **kwargs) -> dict[str, np.ndarray]:
    return whole(pipeline.StreamLanes(*args, **kwargs))


def test_encode_split_offsets_and_unknown_words():
    assert SPLIT.num_documents == 3 and SPLIT.num_sentences == 6
    fourth = SPLIT.lm_ids[SPLIT.sent_offsets[3]:SPLIT.sent_offsets[4]]
    assert list(fourth) == ids(["w5", "w1"]) + [1]
    assert SPLIT.num_predicted_tokens() == 16 + 6


def test_sentence_examples_cut_long_sentences_and_predict_each_target_once():
    examples = pipeline.sentence_examples(SPLIT, seq_len=3)
    # sentence 2 has 7 words -> 8 targets -> 3 sequences of at most 3
    assert len(examples) == 1 + 3 + 1 + 2 + 1 + 1
    assert (examples.targets != 0).sum() == SPLIT.num_predicted_tokens()
    long = ids(["w2", "w5", "w6", "w7", "w8", "w9", "w0"])
    stream = [EOS] + long + [EOS]
    np.testing.assert_array_equal(examples.inputs[1:4].ravel()[:8], stream[:8])
    np.testing.assert_array_equal(examples.targets[1:4].ravel()[:8], stream[1:9])
    np.testing.assert_array_equal(examples.targets[3], [stream[7], stream[8], 0])


def test_bag_of_words_is_document_minus_sentence_capped():
    examples = pipeline.sentence_examples(SPLIT, seq_len=30)
    ds = pipeline.sentence_dataset(SPLIT, examples, batch_size=10,
                                   context=pipeline.ContextSpec(("bow",), max_bow=2))
    batch = next(iter(ds))
    bow = batch["bow"].numpy()
    t = TOPIC.id
    # doc 0: topic words per sentence [w1], [w2], [w3]
    np.testing.assert_array_equal(bow[0], [t("w2"), t("w3")])   # minus sentence 0
    np.testing.assert_array_equal(bow[1], [t("w1"), t("w3")])   # minus sentence 1
    np.testing.assert_array_equal(bow[2], [t("w1"), t("w2")])   # minus sentence 2
    np.testing.assert_array_equal(bow[3], [0, 0])               # one-sentence document
    np.testing.assert_array_equal(bow[4], [t("w3"), t("w3")])   # doc 2 minus [w2]
    np.testing.assert_array_equal(bow[5], [t("w2"), 0])         # doc 2 minus [w3 w3]
    np.testing.assert_array_equal(batch["weights"].numpy().sum(), SPLIT.num_predicted_tokens())


def test_preceding_protocol_keeps_only_the_sentences_before():
    examples = pipeline.sentence_examples(SPLIT, seq_len=30)
    ds = pipeline.sentence_dataset(
        SPLIT, examples, batch_size=10,
        context=pipeline.ContextSpec(("bow",), max_bow=2, protocol="preceding"))
    bow = next(iter(ds))["bow"].numpy()
    t = TOPIC.id
    np.testing.assert_array_equal(bow, [[0, 0], [t("w1"), 0], [t("w1"), t("w2")],   # doc 0
                                        [0, 0],                                     # doc 1
                                        [0, 0], [t("w2"), 0]])                      # doc 2


def test_context_weight_counts_each_sentence_or_document_once():
    examples = pipeline.sentence_examples(SPLIT, seq_len=3)   # sentence 1 -> 3 sequences
    for weighting, units, expected in (
            ("sentence", SPLIT.num_sentences, [1, 1 / 3, 1 / 3, 1 / 3, 1, 1 / 2, 1 / 2, 1, 1]),
            ("document", SPLIT.num_documents, [1 / 5] * 5 + [1 / 2] * 4)):
        ds = pipeline.sentence_dataset(SPLIT, examples, batch_size=20,
                                       context=pipeline.ContextSpec(
                                           ("context_weight",),
                                           options={"weighting": weighting}))
        weight = next(iter(ds))["context_weight"].numpy()
        np.testing.assert_allclose(weight, expected, rtol=1e-6)
        np.testing.assert_allclose(weight.sum(), units, rtol=1e-6)


def test_shuffle_is_a_permutation_fixed_by_seed():
    examples = pipeline.sentence_examples(SPLIT, seq_len=3)
    def rows(seed):
        return np.concatenate([b["inputs"].numpy() for b in
                               pipeline.sentence_dataset(SPLIT, examples, 4, shuffle_seed=seed)])
    a, b, c = rows(1), rows(1), rows(2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert sorted(map(tuple, a)) == sorted(map(tuple, examples.inputs))


def test_document_lanes_rebuild_each_document_stream():
    lanes = document_lanes(SPLIT, seq_len=4, lanes=2)
    inputs, targets, reset = lanes["inputs"], lanes["targets"], lanes["reset"]
    assert (targets != 0).sum() == SPLIT.num_predicted_tokens()
    streams = []
    for lane in range(2):
        for k in range(inputs.shape[0]):
            if reset[k, lane] == 1 and targets[k, lane].any():
                streams.append([])
            if targets[k, lane].any():
                n = (targets[k, lane] != 0).sum()
                if not streams[-1]:
                    streams[-1].append(inputs[k, lane, 0])
                streams[-1].extend(targets[k, lane, :n])
    expected = []
    for doc in DOCS:
        stream = [EOS]
        for sentence in doc:
            stream += [LM.id(w) for w in sentence] + [EOS]
        expected.append(stream)
    assert sorted(map(list, map(lambda s: [int(x) for x in s], streams))) == sorted(expected)


def test_balanced_lanes_share_one_long_document_evenly():
    """One long document among short ones: the exact layout leaves it alone in one lane for
    most batches; the balanced (training) layout cuts the document-ordered windows into
    equal contiguous runs, resetting at every document start and every lane start."""
    long_doc = [[f"w{i % 10}" for i in range(9)] for _ in range(8)]   # 80 targets
    docs = [long_doc] + DOCS
    split = encode_split(docs, LM, TOPIC)
    exact = document_lanes(split, seq_len=4, lanes=3)
    balanced = document_lanes(split, seq_len=4, lanes=3, balanced=True)
    windows = [(-(-(split.sent_offsets[split.doc_offsets[d + 1]]
                    - split.sent_offsets[split.doc_offsets[d]]
                    + split.doc_offsets[d + 1] - split.doc_offsets[d]) // 4))
               for d in range(len(docs))]            # ceil(targets / L) per document
    assert exact["inputs"].shape[0] == windows[0] == 20
    per_lane = -(-sum(windows) // 3)
    assert balanced["inputs"].shape[0] == per_lane < windows[0]
    # reading lane 0, then lane 1, then lane 2 gives the windows in document order
    order = np.concatenate([balanced["targets"][:, lane] for lane in range(3)])
    order = order[order.any(axis=1)]
    in_documents = np.concatenate([exact["targets"][:windows[0], 0]] + [
        document_lanes(encode_split([d], LM, TOPIC), 4, 1)["targets"][:, 0]
        for d in DOCS])
    np.testing.assert_array_equal(order, in_documents)
    # resets: every lane's first window, and each document's first window
    starts = np.cumsum([0] + windows[:-1])
    expected_reset = np.zeros(3 * per_lane)
    expected_reset[starts] = 1
    expected_reset[::per_lane] = 1
    expected_reset[sum(windows):] = 1                # empty slots after the last window
    got_reset = np.concatenate([balanced["reset"][:, lane] for lane in range(3)])
    np.testing.assert_array_equal(got_reset, expected_reset)


def test_stream_lanes_cut_the_whole_split_into_contiguous_lanes():
    stream = [EOS]
    for document in DOCS:
        for sentence in document:
            stream += ids(sentence) + [EOS]
    lanes = stream_lanes(SPLIT, seq_len=3, lanes=4)
    inputs, targets, reset = lanes["inputs"], lanes["targets"], lanes["reset"]
    assert inputs.shape == targets.shape == (2, 4, 3) and reset.shape == (2, 4)
    np.testing.assert_array_equal(reset, [[1, 1, 1, 1], [0, 0, 0, 0]])
    # lane by lane, the batches continue each other and the lanes continue each other

    def by_lane(a):
        return a.transpose(1, 0, 2).reshape(4, -1)

    x, y = by_lane(inputs), by_lane(targets)
    real = y != 0
    assert real.sum() == SPLIT.num_predicted_tokens() == len(stream) - 1
    np.testing.assert_array_equal(y[real], stream[1:])
    np.testing.assert_array_equal(x[real], stream[:-1])
    # equal lanes of ceil(22 / 4) = 6 targets; the last lane has the 4 left
    assert list(real.sum(1)) == [6, 6, 6, 4]


def authors_tokens(path):
    """The SDLM authors' LM/data.py: each line's ``line.split()``, nothing appended."""
    return [w for line in path.read_text(encoding="utf-8").splitlines() for w in line.split()]


def test_stream_without_line_ends_is_the_sdlm_authors_token_stream(tmp_path):
    from tcnlm_tf.config import DataConfig
    from tcnlm_tf.data.loading import load_corpus

    lines = {"train": ["朋友 电话 里 说 ， 送 给 你 。", "新华社 北京 <date> 电 （ <N> ） 。",
                       "来到 <unk> ， 有的 说 ： “ 我们 ！ ” 。"],
             "valid": ["朋友 说 ， 你 。", "北京 <date> 电 。"],
             "test": ["新华社 说 ： 我们 。"]}
    for split, text in lines.items():
        (tmp_path / "peoples_daily").mkdir(exist_ok=True)
        (tmp_path / "peoples_daily" / f"{split}.txt").write_text(
            "\n".join(text) + "\n", encoding="utf-8")
    corpus = load_corpus(DataConfig(dataset="peoples_daily", data_dir=str(tmp_path),
                                    min_freq=1, topic_min_docs=1), cache_dir=tmp_path / "c")
    for split in lines:
        expected = authors_tokens(tmp_path / "peoples_daily" / f"{split}.txt")
        arrays = corpus.splits[split]
        assert arrays.num_predicted_tokens("none") == len(expected)
        assert arrays.num_predicted_tokens("eos") == len(expected) + len(lines[split])
        for line_end, count in (("none", len(expected)),
                                ("eos", len(expected) + len(lines[split]))):
            lanes = stream_lanes(arrays, seq_len=4, lanes=2, line_end=line_end)
            targets = lanes["targets"].transpose(1, 0, 2).reshape(-1)
            real = targets[targets != 0]
            assert len(real) == count
            if line_end == "none":
                # exactly the authors' tokens (vocabulary words; their <unk> is ours)
                assert [corpus.lm_vocab.words[i] for i in real] == expected
                assert EOS not in real
            else:
                assert (real == EOS).sum() == len(lines[split])


def test_line_end_none_is_refused_outside_stream_mode():
    from tcnlm_tf.config import RunConfig
    from tcnlm_tf.errors import UserError

    config = RunConfig()
    config.data.line_end = "none"
    with pytest.raises(UserError, match="only applies to --mode stream"):
        config.validate()
    config.model.mode = "stream"
    config.validate()


@pytest.mark.parametrize("mode, line_end", [("sentence", "eos"), ("document", "eos"),
                                            ("stream", "eos"), ("stream", "none")])
def test_each_target_is_owned_by_the_document_it_comes_from(mode, line_end):
    """``with_documents``: every target's ``document`` is the document whose token it is
    (-1 exactly at padding), so per-document sums add up to each document's own targets."""
    dataset = pipeline.make_dataset(SPLIT, seq_len=3, batch_size=2, mode=mode,
                                    line_end=line_end, with_documents=True)
    owners, targets = [], []
    for batch in dataset:
        owners.append(batch["document"].numpy().ravel())
        targets.append(batch["targets"].numpy().ravel())
    owners, targets = np.concatenate(owners), np.concatenate(targets)
    np.testing.assert_array_equal(owners < 0, targets == 0)
    words = [sum(len(s) for s in doc) for doc in DOCS]
    ends = [len(doc) if line_end == "eos" else 0 for doc in DOCS]
    expected = np.array(words) + np.array(ends)
    np.testing.assert_array_equal(np.bincount(owners[owners >= 0], minlength=3), expected)
    for document, doc in enumerate(DOCS):      # and they are that document's words
        own = targets[owners == document]
        assert sorted(own[own != EOS]) == sorted(ids([w for s in doc for w in s]))
    assert "document" not in next(iter(pipeline.make_dataset(
        SPLIT, seq_len=3, batch_size=2, mode=mode, line_end=line_end)))


@pytest.mark.parametrize("seed", [None, 3])
def test_sentence_lanes_keep_the_pieces_of_a_sentence_in_one_lane_in_order(seed):
    """``--long-sentences carry``: every example in exactly one slot, the pieces of each
    sentence in consecutive batches of one lane, ``reset`` 1 exactly at a sentence's first
    piece and at empty slots; shuffling moves whole sentences."""
    examples = pipeline.sentence_examples(SPLIT, seq_len=3)
    layout = pipeline.sentence_lanes(examples, lanes=2, shuffle_seed=seed)
    index, reset = layout["index"], layout["reset"]
    empty = index == len(examples)
    assert sorted(index[~empty]) == list(range(len(examples)))
    np.testing.assert_array_equal(reset[empty], 1.0)
    for lane in range(2):
        column = [i for i in index[:, lane] if i < len(examples)]
        for before, after in zip(column, column[1:]):
            same = examples.sentences[before] == examples.sentences[after]
            assert not same or after == before + 1    # pieces in order, none in between
        starts = [k for k, i in enumerate(index[:, lane]) if i < len(examples)
                  and (i == 0 or examples.sentences[i - 1] != examples.sentences[i])]
        assert [k for k in range(len(index)) if reset[k, lane] and not empty[k, lane]] == starts
    dataset = pipeline.make_dataset(SPLIT, seq_len=3, batch_size=2, mode="sentence",
                                    shuffle_seed=seed, long_sentences="carry")
    batches = list(dataset)
    assert len(batches) == len(index)
    targets = np.concatenate([b["targets"].numpy().ravel() for b in batches])
    assert (targets != 0).sum() == SPLIT.num_predicted_tokens()
    np.testing.assert_array_equal(np.stack([b["reset"].numpy() for b in batches]), reset)
