"""Batches built one at a time from a split's arrays (tcnlm_tf.data.examples) equal those of
plain whole-split references written from the specification, on random corpora, for
splits held in memory and for prepared corpora read as memory maps of many shards."""
import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.config import DataConfig
from tcnlm_tf.data import examples as ex
from tcnlm_tf.data import pipeline
from tcnlm_tf.data.corpus import read_corpus_file, write_corpus_file
from tcnlm_tf.data.loading import encode_split, load_corpus
from tcnlm_tf.data.sharded_array import ShardedArray

EOS, PAD = ex.EOS_ID, ex.PAD_ID


def random_documents(rng, count, vocabulary=30):
    return [[[f"w{rng.integers(vocabulary)}" for _ in range(rng.integers(1, 12))]
             for _ in range(rng.integers(1, 6))] for _ in range(count)]


@pytest.fixture(scope="module", params=[0, 1])
def splits(request, tmp_path_factory):
    """(in-memory split, the same split prepared in shards of 7 words) of a random corpus."""
    rng = np.random.default_rng(request.param)
    root = tmp_path_factory.mktemp("corpus")
    for name in ("train", "valid", "test"):
        write_corpus_file(root / "random" / f"{name}.txt", random_documents(rng, 9))
    corpus = load_corpus(DataConfig(dataset="random", data_dir=str(root), min_freq=1,
                                    topic_min_docs=1, topic_top_fraction=0.0),
                         cache_dir=root / "cache", log=lambda line: None, shard_words=7)
    documents, stats = read_corpus_file(root / "random" / "train.txt")
    memory = encode_split(documents, corpus.lm_vocab, corpus.topic_vocab, stats.lines)
    sharded = corpus.splits["train"]
    assert len(sharded.lm_ids.pieces) > 3            # really in several shards
    return memory, sharded


def test_the_shards_read_as_the_split_in_memory(splits):
    memory, sharded = splits
    for field in vars(memory):
        if field == "lm_counts":          # stored by the preparation; none in memory
            assert memory.lm_counts is None
            np.testing.assert_array_equal(sharded.lm_counts, np.bincount(memory.lm_ids))
            continue
        assert isinstance(getattr(sharded, field), ShardedArray)
        np.testing.assert_array_equal(np.asarray(getattr(sharded, field)),
                                      getattr(memory, field), err_msg=field)


def reference_sentence_examples(split, length):
    """Every sentence as <eos> w1 .. wn <eos>, cut into sequences of at most L targets."""
    rows = []
    for s in range(split.num_sentences):
        words = list(split.lm_ids[split.sent_offsets[s]:split.sent_offsets[s + 1]])
        tokens = [EOS] + words + [EOS]
        for k in range(-(-(len(tokens) - 1) // length)):
            piece = tokens[k * length:(k + 1) * length + 1]
            x, y = np.zeros(length, np.int32), np.zeros(length, np.int32)
            x[:len(piece) - 1], y[:len(piece) - 1] = piece[:-1], piece[1:]
            d = int(np.searchsorted(split.doc_offsets, s, "right") - 1)
            topic, docs = split.topic_offsets, split.doc_offsets
            rows.append((x, y, (topic[docs[d]], topic[s], topic[s + 1], topic[docs[d + 1]]),
                         d, s))
    return rows


@pytest.mark.parametrize("length", [1, 3, 30])
def test_sentence_examples_equal_the_reference(splits, length):
    for split in splits:
        built = ex.sentence_examples(split, length)
        rows = reference_sentence_examples(splits[0], length)
        assert len(built) == len(rows)
        order = np.random.default_rng(length).permutation(len(rows))
        taken = built.take(order)
        for i, j in enumerate(order):
            x, y, context, d, s = rows[j]
            np.testing.assert_array_equal(taken["inputs"][i], x)
            np.testing.assert_array_equal(taken["targets"][i], y)
            assert tuple(taken["context"][i]) == context
            assert (taken["documents"][i], taken["sentences"][i]) == (d, s)


def reference_document_lanes(split, length, lanes, order, balanced):
    """Documents (in ``order``) as <eos> s1 <eos> s2 <eos> .., cut into windows and laid in
    lanes: whole documents to the shortest lane, or the windows cut into equal runs."""
    documents = []
    for d in order:
        stream = [EOS]
        for s in range(split.doc_offsets[d], split.doc_offsets[d + 1]):
            stream += list(split.lm_ids[split.sent_offsets[s]:split.sent_offsets[s + 1]])
            stream += [EOS]
        windows = []
        for k in range(-(-(len(stream) - 1) // length)):
            piece = stream[k * length:(k + 1) * length + 1]
            x, y = np.zeros(length, np.int32), np.zeros(length, np.int32)
            x[:len(piece) - 1], y[:len(piece) - 1] = piece[:-1], piece[1:]
            windows.append((x, y, float(k == 0), d))
        documents.append(windows)
    if balanced:
        every = [w for windows in documents for w in windows]
        per_lane = max(1, -(-len(every) // lanes))
        lane_windows = [every[i * per_lane:(i + 1) * per_lane] for i in range(lanes)]
        lane_windows = [[(w[0][0], w[0][1], 1.0, w[0][3])] + w[1:] if w else w
                        for w in lane_windows]
    else:
        lane_windows = [[] for _ in range(lanes)]
        for windows in documents:
            min(lane_windows, key=len).extend(windows)
    batches = max(len(w) for w in lane_windows)
    out = {"inputs": np.zeros((batches, lanes, length), np.int32),
           "targets": np.zeros((batches, lanes, length), np.int32),
           "reset": np.ones((batches, lanes), np.float32),
           "document": np.full((batches, lanes, length), -1, np.int32)}
    for lane, windows in enumerate(lane_windows):
        for k, (x, y, r, d) in enumerate(windows):
            out["inputs"][k, lane], out["targets"][k, lane], out["reset"][k, lane] = x, y, r
            out["document"][k, lane] = np.where(y != PAD, d, -1)
    return out


def stacked(layout):
    batches = [layout.batch(k) for k in range(layout.num_batches)]
    return {name: np.stack([b[name] for b in batches]) for name in batches[0]}


@pytest.mark.parametrize("length,lanes", [(1, 1), (4, 3), (7, 5)])
@pytest.mark.parametrize("balanced", [False, True])
def test_document_lanes_equal_the_reference(splits, length, lanes, balanced):
    order = np.random.default_rng(lanes).permutation(splits[0].num_documents)
    want = reference_document_lanes(splits[0], length, lanes, order, balanced)
    for split in splits:
        got = stacked(ex.DocumentLanes(split, length, lanes, order, balanced))
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("line_end", ["eos", "none"])
@pytest.mark.parametrize("length,lanes", [(1, 2), (5, 3)])
def test_stream_lanes_equal_the_reference(splits, line_end, length, lanes):
    memory = splits[0]
    stream, owner = [EOS], []
    for d in range(memory.num_documents):
        for s in range(memory.doc_offsets[d], memory.doc_offsets[d + 1]):
            words = list(memory.lm_ids[memory.sent_offsets[s]:memory.sent_offsets[s + 1]])
            stream += words + ([EOS] if line_end == "eos" else [])
            owner += [d] * (len(words) + (line_end == "eos"))
    targets = len(stream) - 1
    per_lane = -(-targets // lanes)
    for split in splits:
        got = stacked(ex.StreamLanes(split, length, lanes, line_end))
        for lane in range(lanes):
            start, end = lane * per_lane, min((lane + 1) * per_lane, targets)
            flat = {name: got[name][:, lane].ravel() for name in ("inputs", "targets",
                                                                  "document")}
            np.testing.assert_array_equal(flat["inputs"][:end - start], stream[start:end])
            np.testing.assert_array_equal(flat["targets"][:end - start],
                                          stream[start + 1:end + 1])
            np.testing.assert_array_equal(flat["document"][:end - start], owner[start:end])
            assert not flat["targets"][end - start:].any()


@pytest.mark.parametrize("protocol", ["rest", "preceding", "shuffled"])
@pytest.mark.parametrize("carry", [False, True])
def test_sentence_batches_equal_the_whole_split_builders(splits, protocol, carry):
    """Each batch's context fields, made from the text of its own documents, equal the
    fields made from the whole split's arrays as tensors."""
    memory = splits[0]
    spec = pipeline.ContextSpec(("bow", "preceding", "context_weight"), max_bow=9,
                                options={"sentences": 2, "words": 3,
                                         "weighting": "document"}, protocol=protocol)
    rows = reference_sentence_examples(memory, 4)
    all_rows = pipeline.protocol_context(memory, ex.sentence_examples(memory, 4), protocol)
    ids = tf.concat([tf.constant(memory.topic_ids, tf.int32), tf.zeros([1], tf.int32)], 0)
    per_document = np.bincount([r[3] for r in rows])
    for split in splits:
        examples = ex.sentence_examples(split, 4)
        dataset = pipeline.sentence_dataset(split, examples, 5, spec, shuffle_seed=3,
                                            with_documents=True,
                                            long_sentences="carry" if carry else "reset")
        if carry:
            layout = ex.sentence_lanes(examples, 5, 3)
            slots = [row for row in layout["index"]]
        else:
            order = np.random.default_rng(3).permutation(len(examples))
            slots = [order[k:k + 5] for k in range(0, len(order), 5)]
        batches = list(dataset)
        assert len(batches) == len(slots)
        for batch, index in zip(batches, slots):
            real = index < len(rows)
            safe = np.where(real, index, 0)
            source = pipeline.ContextSource(
                tf.constant(np.where(real[:, None], all_rows[safe], 0)), ids,
                tf.constant(np.where(real[:, None], np.stack(
                    [[memory.doc_offsets[rows[i][3]], rows[i][4]] for i in safe]), 0)),
                tf.constant(memory.topic_offsets),
                tf.constant(np.where(real, 1.0 / per_document[[rows[i][3] for i in safe]],
                                     0.0).astype(np.float32)))
            want = pipeline.context_fields(spec, source)
            for name, value in want.items():
                np.testing.assert_array_equal(batch[name].numpy(), value.numpy(),
                                              err_msg=name)
            np.testing.assert_array_equal(
                batch["targets"].numpy(),
                np.where(real[:, None], np.stack([rows[i][1] for i in safe]), 0))
            owner = np.array([rows[i][3] for i in safe])
            np.testing.assert_array_equal(
                batch["document"].numpy(),
                np.where(batch["targets"].numpy() != PAD, owner[:, None], -1))


@pytest.mark.parametrize("mode", ["sentence", "carry", "document", "stream"])
@pytest.mark.parametrize("total,local", [(2, 1), (3, 1), (4, 2)])
def test_each_input_pipeline_builds_its_replicas_rows_and_no_more(splits, mode, total, local):
    """Under a share, each input pipeline's batches are its replicas' slices of the global
    batches (as replica_slice cuts them), and the pipelines together read every target of
    the epoch exactly once."""
    split = splits[1]
    spec = pipeline.ContextSpec(("bow", "preceding"), max_bow=9,
                                options={"sentences": 2, "words": 3})

    def dataset(share):
        return pipeline.make_dataset(
            split, 4, 5, "sentence" if mode in ("sentence", "carry") else mode, spec,
            shuffle_seed=None if mode == "stream" else 2, with_documents=True,
            long_sentences="carry" if mode == "carry" else "reset", share=share)

    whole = list(dataset(None))
    read = 0.0
    for pipe in range(total // local):
        mine = list(dataset(pipeline.Share(pipe * local, local, total)))
        assert len(mine) == len(whole)
        for batch, parts in zip(whole, mine):
            assert len(parts) == local
            n = int(batch["targets"].shape[0])
            each = -(-n // total)
            for r, part in zip(range(pipe * local, (pipe + 1) * local), parts):
                for name, value in batch.items():
                    np.testing.assert_array_equal(part[name].numpy(),
                                                  value.numpy()[r * each:(r + 1) * each],
                                                  err_msg=name)
                read += float(part["weights"].numpy().sum())
    assert read == sum(float(b["weights"].numpy().sum()) for b in whole) \
        == split.num_predicted_tokens()
