"""Vocabularies built as in the papers (LM: frequency threshold; topic: stop words,
most frequent 0.1 %, document frequency)."""
import collections

from tcnlm_tf.data.vocab import (EOS, PAD, UNK, Vocabulary, build_lm_vocab, build_topic_vocab,
                                 load_stopwords, word_counts)


def test_lm_vocab_threshold_order_and_specials():
    counts = collections.Counter({"the": 50, "cat": 12, "dog": 12, "rare": 9, "mat": 30})
    vocab = build_lm_vocab(counts, min_freq=10)
    assert vocab.words == [PAD, UNK, EOS, "the", "mat", "cat", "dog"]
    assert vocab.id("rare") == vocab.id(UNK) == 1
    assert vocab.id("cat") == 5


def test_topic_vocab_filters():
    documents = ([[["the", "goal", "match", "common", "$", "1990", "u.s.", "'s", "n't",
                    "\u2019re", "'90s", "o'clock"]]] * 6
                 + [[["vote", "party", "common", "common"]]] * 3)
    counts, doc_counts = word_counts(documents)
    assert doc_counts["common"] == 9 and counts["common"] == 12
    lm = build_lm_vocab(counts, min_freq=1)
    # 1000 extra rare words so the 0.1 % most frequent word types is exactly one word.
    for i in range(1000):
        counts[f"x{i}"] = 1
    lm = build_lm_vocab(counts, min_freq=1)
    topic = build_topic_vocab(lm, counts, doc_counts, frozenset({"the"}), min_docs=4,
                              top_fraction=0.001)
    assert "the" not in topic             # stop word
    assert "common" not in topic          # the most frequent type
    assert "vote" not in topic            # only 3 documents
    assert "$" not in topic and "1990" not in topic   # no letter
    assert not {"'s", "n't", "\u2019re"} & set(topic.words)  # clitics
    assert topic.words == [PAD, "'90s", "goal", "match", "o'clock", "u.s."]
    assert topic.id("vote") is None


def test_default_stopwords_cover_function_words():
    stop = load_stopwords()
    assert {"the", "of", "and", "a", "in"} <= stop
    assert "election" not in stop


def test_save_load_round_trip(tmp_path):
    vocab = Vocabulary([PAD, UNK, EOS, "a", "b"], unk=UNK)
    vocab.save(tmp_path / "v.txt")
    loaded = Vocabulary.load(tmp_path / "v.txt", unk=UNK)
    assert loaded.words == vocab.words and loaded.id("zzz") == 1
