"""An epoch's example order: numpy's permutation for small splits (unchanged, so their
numbers stay to the bit), a keyed permutation computed per batch for large ones, each a
shuffle of every example exactly once; and a resumed epoch that builds none of the batches
before its checkpoint."""
import numpy as np
import pytest

from tcnlm_tf.data import permutation
from tcnlm_tf.data.permutation import KeyedPermutation, shuffled_order


def random_split(seed: int, documents: int):
    """A random corpus's split held in memory (the vocabulary is every word)."""
    import collections

    from tcnlm_tf.data.loading import encode_split
    from tcnlm_tf.data.vocab import build_lm_vocab
    from tests.test_examples import random_documents

    docs = random_documents(np.random.default_rng(seed), documents)
    vocab = build_lm_vocab(collections.Counter(w for d in docs for s in d for w in s), 1)
    return encode_split(docs, vocab, vocab)


@pytest.mark.parametrize("n", [1, 2, 3, 1000, 65_537, 1_000_003])
def test_a_keyed_permutation_visits_every_example_once(n):
    order = KeyedPermutation(n, seed=7)
    whole = order[0:n]
    assert len(order) == n and whole.dtype == np.int64
    np.testing.assert_array_equal(np.sort(whole), np.arange(n))


def test_its_slices_are_the_slices_of_the_whole():
    n = 54_321
    order = KeyedPermutation(n, seed=3)
    whole = order[:]
    for start in (0, 1, 64, 5_000, n - 10):
        np.testing.assert_array_equal(order[start:start + 64], whole[start:start + 64])
    with pytest.raises(TypeError):
        order[5]


def test_it_is_a_fair_shuffle():
    """Position and example are uncorrelated, no example keeps its place more often than
    chance, every seed gives its own order and the same seed the same one."""
    n = 200_000
    order = KeyedPermutation(n, seed=0)[:]
    positions = np.arange(n)
    assert abs(np.corrcoef(positions, order)[0, 1]) < 0.01
    assert (order == positions).sum() < 10                 # about one expected
    # each tenth of the positions draws its examples from every tenth of the range
    tenth = np.bincount(order[: n // 10] * 10 // n, minlength=10)
    assert tenth.min() > 0.9 * n / 100 and tenth.max() < 1.1 * n / 100
    np.testing.assert_array_equal(KeyedPermutation(n, 0)[:100], order[:100])
    assert (KeyedPermutation(n, 1)[:1000] != order[:1000]).mean() > 0.99


def test_small_splits_keep_numpys_permutation_and_large_ones_hold_no_array(monkeypatch):
    np.testing.assert_array_equal(shuffled_order(1000, 5, np.int32),
                                  np.random.default_rng(5).permutation(1000))
    assert shuffled_order(1000, 5, np.int32).dtype == np.int32
    monkeypatch.setattr(permutation, "EXPLICIT_LIMIT", 999)
    order = shuffled_order(1000, 5)
    assert isinstance(order, KeyedPermutation)
    assert not [v for v in vars(order).values() if isinstance(v, np.ndarray) and v.size > 8]


def test_sentence_batches_of_a_large_split_hold_every_example_once(monkeypatch):
    """Above the limit, an epoch of batches is still every example once, in another
    order than the first."""
    from tcnlm_tf.data import pipeline

    split = random_split(0, 40)
    examples = pipeline.sentence_examples(split, 4)
    monkeypatch.setattr(permutation, "EXPLICIT_LIMIT", 10)
    assert len(examples) > 10
    batches = list(pipeline.sentence_dataset(split, examples, 3, shuffle_seed=1))
    seen = np.concatenate([b["inputs"].numpy() for b in batches])
    reference = examples.take(np.arange(len(examples)))["inputs"]
    assert len(seen) == len(reference)
    assert sorted(map(tuple, seen)) == sorted(map(tuple, reference))
    assert not np.array_equal(seen, reference)


def test_a_share_that_starts_later_builds_only_the_batches_from_there(monkeypatch):
    """A resumed epoch's dataset begins at its checkpointed batch: the same batches as the
    whole epoch's from there on, and none of those before it built at all."""
    from tcnlm_tf.data import examples as ex
    from tcnlm_tf.data import pipeline

    split = random_split(1, 30)
    examples = pipeline.sentence_examples(split, 4)

    def batches(start):
        share = pipeline.Share(start=start)
        return [p[0]["inputs"].numpy() for p in pipeline.sentence_dataset(
            split, examples, 3, shuffle_seed=4, share=share)]

    whole = batches(0)
    built = []
    take = ex.SentenceExamples.take
    monkeypatch.setattr(ex.SentenceExamples, "take",
                        lambda self, index: built.append(len(index)) or take(self, index))
    later = batches(5)
    assert len(later) == len(whole) - 5 and len(built) == len(later)
    for a, b in zip(later, whole[5:]):
        np.testing.assert_array_equal(a, b)
