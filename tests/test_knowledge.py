"""Tests of the word -> senses -> sememes knowledge bases (tcnlm_tf.data.knowledge)."""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from tcnlm_tf.data import knowledge
from tcnlm_tf.data import synthetic as syn
from tcnlm_tf.errors import UserError
from tests.conftest import REPO_ROOT

# A toy HowNet.txt in the SDLM authors' format. 苹果 has three records, the last two with the
# same DEF (two English translations of one sense); 水果 has the same sememe set as 苹果's
# second sense; the record with an empty W_C and the one for 香蕉 (not in the vocabulary)
# must leave no trace.
TOY_HOWNET = """\
NO.=000001
W_C=苹果
G_C=N
E_C=
W_E=apple
G_E=N
E_E=
DEF={computer|电脑:modifier={PatternValue|样式值:CoEvent={able|能:scope={bring|携带:patient={human|人}}}}},{SpeBrand|特定牌子}

NO.=000002
W_C=苹果
G_C=N
E_C=
W_E=apple
G_E=N
E_E=
DEF={fruit|水果}

NO.=000003
W_C=苹果
G_C=N
E_C=
W_E=apples
G_E=N
E_E=
DEF={fruit|水果}

NO.=000004
W_C=水果
G_C=N
E_C=
W_E=fruit
G_E=N
E_E=
DEF={fruit|水果}

NO.=000005
W_C=
G_C=N
E_C=
W_E=pear
G_E=N
E_E=
DEF={fruit|梨子}

NO.=000006
W_C=香蕉
G_C=N
E_C=
W_E=banana
G_E=N
E_E=
DEF={fruit|水果:color={yellow|黄}}

NO.=000007
W_C=的
G_C=STRU
E_C=
W_E=of
G_E=STRU
E_E=
DEF={FuncWord|功能词}
"""
VOCAB = ["<pad>", "<unk>", "<eos>", "的", "苹果", "水果", "跑"]
# by hand: real sememes sorted by code point (人 4EBA, 功 529F, 携 643A, 样 6837, 水 6C34,
# 特 7279, 电 7535, 能 80FD), then the private ones in word-id order
TOY_SEMEMES = ["人", "功能词", "携带", "样式值", "水果", "特定牌子", "电脑", "能",
               "<private:<pad>>", "<private:<unk>>", "<private:<eos>>", "<private:跑>"]
TOY_SENSE_WORD = [0, 1, 2, 3, 4, 4, 5, 6]
TOY_PRIVATE = [True, True, True, False, False, False, False, True]
TOY_SENSES = {          # word -> sememe names of each sense (by sememe id)
    "<pad>": [["<private:<pad>>"]],
    "的": [["功能词"]],
    "苹果": [["人", "携带", "样式值", "特定牌子", "电脑", "能"], ["水果"]],
    "水果": [["水果"]],
    "跑": [["<private:跑>"]],
}


@pytest.fixture
def toy_file(tmp_path):
    path = tmp_path / "HowNet.txt"
    path.write_text(TOY_HOWNET, encoding="utf-8")
    return path


@pytest.fixture
def toy_kb(toy_file):
    return knowledge.build_knowledge_base(f"hownet:{toy_file}", VOCAB)


def assert_consistent(kb):
    """The structural rules every knowledge base obeys."""
    v, m = len(kb.words), len(kb.sense_word)
    assert kb.sense_word.dtype == kb.edge_sense.dtype == kb.edge_sememe.dtype == np.int32
    assert np.all(np.diff(kb.sense_word) >= 0)
    assert set(kb.sense_word.tolist()) == set(range(v))              # every word has a sense
    assert np.array_equal(np.unique(kb.edge_sense), np.arange(m))    # every sense a sememe
    assert len(kb.private) == m and kb.edge_sememe.max() == len(kb.sememes) - 1
    for w in range(v):
        sets = [frozenset(kb.edge_sememe[kb.edge_sense == s].tolist()) for s in kb.senses_of(w)]
        assert len(set(sets)) == len(sets)                           # one sense per set
    stats = knowledge.statistics(kb)
    assert stats["senses"] == m and stats["words"] == v
    assert stats["sememes"] + stats["private_senses"] == len(kb.sememes)


# ----------------------------------------------------------------------------- HowNet


def test_hownet_reader_follows_the_authors_reader(toy_file):
    entries = knowledge.read_hownet(toy_file)
    assert [w for w, _ in entries] == ["苹果", "苹果", "苹果", "水果", "香蕉", "的"]
    assert entries[0][1] == {"电脑", "样式值", "能", "携带", "人", "特定牌子"}
    assert entries[4][1] == {"水果", "黄"}


def test_hownet_words_senses_sememes(toy_kb, toy_file):
    assert toy_kb.words == VOCAB
    assert toy_kb.sememes == TOY_SEMEMES
    assert toy_kb.sense_word.tolist() == TOY_SENSE_WORD
    assert toy_kb.private.tolist() == TOY_PRIVATE
    assert toy_kb.source == f"hownet:{toy_file}"
    for word, senses in TOY_SENSES.items():
        assert toy_kb.word_senses(word) == senses, word
    assert toy_kb.edge_sense.tolist() == [0, 1, 2, 3, 4, 4, 4, 4, 4, 4, 5, 6, 7]
    assert toy_kb.edge_sememe.tolist() == [8, 9, 10, 1, 0, 2, 3, 5, 6, 7, 4, 4, 11]
    assert_consistent(toy_kb)


def test_hownet_gives_placeholders_and_punctuation_the_authors_senses(toy_file):
    """The SDLM authors' hownet.py maps <N>, <year>, <date>, <hour> and 14 punctuation marks
    to fixed sememes; a mark HowNet.txt also lists keeps both, equal sets merged; a
    placeholder or mark outside the vocabulary adds nothing."""
    extra = toy_file.read_text(encoding="utf-8") + (
        "\nNO.=000008\nW_C=、\nG_C=PUNC\nE_C=\nW_E=,\nG_E=PUNC\nE_E=\nDEF={punc|标点}\n"
        "\nNO.=000009\nW_C=《\nG_C=PUNC\nE_C=\nW_E=<\nG_E=PUNC\nE_E=\n"
        "DEF={punc|标点:modifier={title|书名}}\n")
    toy_file.write_text(extra, encoding="utf-8")
    words = VOCAB + ["<N>", "<year>", "<date>", "<hour>", "、", "《", "℃", "。"]
    kb = knowledge.build_knowledge_base(f"hownet:{toy_file}", words)
    assert kb.word_senses("<N>") == [["基数"]]
    assert kb.word_senses("<year>") == [["年", "时间", "特定"]]
    assert kb.word_senses("<date>") == [["时间", "月", "特定"]]
    assert kb.word_senses("<hour>") == [["时", "时间", "特定"]]
    assert kb.word_senses("、") == [["标点"]]                    # the file's equal set merged
    assert kb.word_senses("《") == [["标点"], ["书名", "标点"]]
    assert kb.word_senses("℃") == [["标点"]]
    assert kb.word_senses("。") == [["<private:。>"]]           # not a mark of the list
    assert not any(kb.private[kb.senses_of(words.index(w))].any()
                   for w in words[len(VOCAB):-1])
    assert_consistent(kb)


def test_equal_sememe_sets_merge_within_a_word_only(toy_kb):
    apple, fruit = VOCAB.index("苹果"), VOCAB.index("水果")
    assert len(toy_kb.senses_of(apple)) == 2             # three records, two sememe sets
    fruit_sense = toy_kb.senses_of(fruit)[0]
    apple_fruit_sense = toy_kb.senses_of(apple)[1]
    assert fruit_sense != apple_fruit_sense               # same set, different words
    assert toy_kb.sememes_of(fruit_sense) == toy_kb.sememes_of(apple_fruit_sense) == ["水果"]


def test_private_sense_rule(toy_kb):
    for word in ("<pad>", "<unk>", "<eos>", "跑"):
        senses = toy_kb.senses_of(VOCAB.index(word))
        assert len(senses) == 1 and toy_kb.private[senses[0]]
        assert toy_kb.sememes_of(senses[0]) == [f"<private:{word}>"]
    assert len(np.unique(toy_kb.sense_word)) == len(VOCAB)


def test_statistics_by_hand(toy_kb):
    counts = np.array([0, 5, 10, 40, 3, 2, 0])
    stats = knowledge.statistics(toy_kb, counts)
    assert stats == {
        "words": 7, "words_covered": 3, "senses": 8, "private_senses": 4, "sememes": 8,
        # distinct real sememes: 的 1, 苹果 6 + 1, 水果 1
        "experts_per_word": pytest.approx(9 / 3),
        # 9 real edges over 8 real sememes (水果 has two senses, the others one)
        "senses_per_expert": pytest.approx(9 / 8),
        "senses_per_word": pytest.approx(4 / 3),
        "sememes_per_sense": pytest.approx(9 / 4),
        # <pad>, <unk>, <eos>, 跑: (0 + 5 + 10 + 0) / 60
        "private_token_mass": pytest.approx(15 / 60),
    }
    assert "private_token_mass" not in knowledge.statistics(toy_kb)
    table = knowledge.format_statistics(stats)
    lines = table.splitlines()
    assert "paper (HowNet, People's Daily)" in lines[0]
    assert lines[6].split() == ["experts", "per", "word", "3.00", "3.4"]
    assert lines[7].split() == ["senses", "per", "expert", "1.12", "22"]
    assert lines[1].split() == ["words", "7", "–"] and lines[-1].endswith("25.00%  –")
    both = knowledge.format_statistics(stats, {**stats, "experts_per_word": 1.5},
                                       labels=["before", "after"]).splitlines()
    assert both[0].split()[:2] == ["before", "after"]
    assert both[6].split() == ["experts", "per", "word", "3.00", "1.50", "3.4"]


def test_statistics_of_nothing_covered_are_nan():
    kb = knowledge._assemble(["<pad>", "x"], {}, "synthetic")
    stats = knowledge.statistics(kb)
    assert stats["words_covered"] == 0 and stats["private_senses"] == 2
    assert math.isnan(stats["experts_per_word"]) and math.isnan(stats["senses_per_expert"])


def test_save_load_round_trip(toy_kb, tmp_path):
    path = tmp_path / "run" / "knowledge_base.npz"
    knowledge.save(toy_kb, path)
    loaded = knowledge.load(path)
    assert loaded.words == toy_kb.words and loaded.sememes == toy_kb.sememes
    assert loaded.source == toy_kb.source
    for name in ("sense_word", "edge_sense", "edge_sememe", "private"):
        a, b = getattr(loaded, name), getattr(toy_kb, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert sorted(p.name for p in path.parent.iterdir()) == ["knowledge_base.npz"]


def test_load_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        knowledge.load(tmp_path / "missing.npz")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(UserError, match="not a valid knowledge base"):
        knowledge.load(bad)


def test_gb18030_file_reads_the_same(toy_kb, tmp_path):
    path = tmp_path / "HowNet_gb.txt"
    path.write_bytes(TOY_HOWNET.encode("gb18030"))
    kb = knowledge.build_knowledge_base(f"hownet:{path}", VOCAB)
    assert kb.sememes == toy_kb.sememes and np.array_equal(kb.edge_sememe, toy_kb.edge_sememe)


@pytest.mark.parametrize("mangle, line, what", [
    (lambda t: t.replace("DEF={FuncWord|功能词}", "DEF={FuncWord}"), 62, "has no sememe"),
    (lambda t: t.replace("DEF={fruit|水果}\n\nNO.=000004", "\nNO.=000004"), 19,
     "no DEF line"),
    (lambda t: t.replace("W_C=水果\n", ""), 28, "no W_C line"),
])
def test_malformed_record_names_file_and_line(tmp_path, mangle, line, what):
    path = tmp_path / "HowNet.txt"
    path.write_text(mangle(TOY_HOWNET), encoding="utf-8")
    with pytest.raises(UserError) as err:
        knowledge.build_knowledge_base(f"hownet:{path}", VOCAB)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: malformed HowNet record") and what in message
    assert "\n" not in message


def test_missing_or_empty_hownet_file(tmp_path):
    with pytest.raises(UserError, match=f"HowNet file {tmp_path / 'nope.txt'} not found"):
        knowledge.build_knowledge_base(f"hownet:{tmp_path / 'nope.txt'}", VOCAB)
    empty = tmp_path / "empty.txt"
    empty.write_text("W_C=的\nDEF={FuncWord|功能词}\n", encoding="utf-8")
    with pytest.raises(UserError, match="no HowNet records"):
        knowledge.build_knowledge_base(f"hownet:{empty}", VOCAB)


@pytest.mark.parametrize("spec, message", [
    ("foo", "unknown --knowledge-base 'foo'; use hownet:FILE, wordnet or synthetic"),
    ("hownet", "needs the HowNet file: hownet:FILE"),
    ("synthetic", "needs the synthetic corpus"),
])
def test_bad_spec(spec, message):
    with pytest.raises(UserError) as err:
        knowledge.build_knowledge_base(spec, VOCAB)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_module_does_not_import_tensorflow():
    code = "import sys, tcnlm_tf.data.knowledge; assert 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)


# ----------------------------------------------------------------------------- WordNet


@pytest.fixture(scope="module")
def wordnet_dir():
    """WordNet is part of the project's set-up (`make install` installs Debian's
    wordnet-base): without it this test fails, saying how to install it."""
    try:
        return knowledge.find_wordnet_dir()
    except UserError as err:
        pytest.fail(str(err))


WN_VOCAB = ["<pad>", "<unk>", "<eos>", "the", "apple", "apples", "banana", "run", "dog",
            "cat", ",", "quickly"]


def test_wordnet(wordnet_dir, capsys):
    kb = knowledge.build_knowledge_base("wordnet", WN_VOCAB, min_senses=1)
    wide = knowledge.build_knowledge_base("wordnet", WN_VOCAB)   # min_senses=5
    assert capsys.readouterr() == ("", "")
    assert_consistent(kb)
    assert_consistent(wide)
    apple = kb.word_senses("apple")
    assert any("noun.food" in s and "edible_fruit.n.01" in s for s in apple)
    assert kb.word_senses("apples") == apple                      # nltk's morphology
    for word in ("the", ",", "<unk>"):
        assert kb.word_senses(word) == [[f"<private:{word}>"]]
    assert all(len(s) >= 1 for s in kb.word_senses("dog"))
    assert len(kb.senses_of(WN_VOCAB.index("dog"))) <= 5          # max_senses
    assert any(name.startswith("verb.") for name in kb.word_senses("run")[0])  # frequency order
    assert kb.word_senses("quickly") == [["adv.all"]]
    # the default filter: a sememe is an expert of >= 5 senses unless it is the
    # lexicographer file a sense fell back to
    stats = knowledge.statistics(wide)
    per_sememe = np.bincount(wide.edge_sememe, minlength=len(wide.sememes))
    for k in range(stats["sememes"]):
        assert per_sememe[k] >= 5 or wide.sememes[k] in knowledge.WORDNET_LEXNAMES
    assert any("noun.food" in s for s in wide.word_senses("apple"))


def test_wordnet_gives_stop_words_private_senses(wordnet_dir):
    """WordNet's entries for function words are spurious ("a" -> vitamin A, "in" -> inch,
    "us" -> United States, "may" -> the month): words of the stop-word list get a private
    sense, every other word the senses it had."""
    vocab = WN_VOCAB + ["a", "in", "us", "may", "May"]
    before = knowledge.build_knowledge_base("wordnet", vocab, min_senses=1)
    after = knowledge.build_knowledge_base("wordnet", vocab, min_senses=1,
                                           stopwords={"a", "in", "us", "may", "the"})
    assert any("vitamin.n.01" in s for s in before.word_senses("a"))
    assert any("month.n.01" in s or "time_period.n.01" in s for s in before.word_senses("may"))
    for word in ("a", "in", "us", "may", "May"):      # compared lower-cased
        assert before.word_senses(word) != [[f"<private:{word}>"]]
        assert after.word_senses(word) == [[f"<private:{word}>"]]
    for word in ("apple", "dog", "run", "quickly"):
        assert after.word_senses(word) == before.word_senses(word)


def test_the_run_knowledge_base_follows_the_run_stop_word_list(wordnet_dir, tmp_path):
    from types import SimpleNamespace

    from tcnlm_tf.config import RunConfig
    from tcnlm_tf.data.vocab import Vocabulary
    from tcnlm_tf.decoders.output_layers import build_run_knowledge_base

    stopwords = tmp_path / "stop.txt"
    stopwords.write_text("# mine\ndog\n")
    config = RunConfig()
    config.model.decoder, config.model.decoder_options = "sdlm", {"knowledge_base": "wordnet"}
    config.data.stopwords = str(stopwords)
    corpus = SimpleNamespace(lm_vocab=Vocabulary(WN_VOCAB, unk="<unk>"), source_dir=tmp_path)
    assert build_run_knowledge_base(config, corpus).word_senses("dog") == [["<private:dog>"]]
    kept = build_run_knowledge_base(config, corpus, stopword_rule=False)
    assert kept.word_senses("dog") != [["<private:dog>"]]


def test_wordnet_missing_dir_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv(knowledge.WORDNET_DIR_ENV, str(tmp_path))
    with pytest.raises(UserError, match="apt-get install wordnet-base"):
        knowledge.build_knowledge_base("wordnet", WN_VOCAB)


# ----------------------------------------------------------------------------- synthetic


def test_synthetic_knowledge_base(tmp_path):
    config = syn.SyntheticConfig(num_topics=3, content_vocab_size=30, train_docs=2,
                                 valid_docs=1, test_docs=1, min_sentences=1, max_sentences=2)
    syn.write_corpus(tmp_path, config)
    truth = syn.load_truth(tmp_path)
    vocab = ["<pad>", "<unk>", "<eos>"] + truth.words[::-1] + ["notaword"]
    kb = knowledge.build_knowledge_base("synthetic", vocab, synthetic_dir=tmp_path)
    assert kb.source == "synthetic"
    assert_consistent(kb)
    content = truth.words[:config.content_vocab_size]
    for word in content:
        senses = kb.word_senses(word)
        assert senses and all(len(s) == 2 and s[0] == "class:semantic"
                              and s[1].startswith("topic:") for s in senses), word
        t = truth.words.index(word)
        column = truth.topic_word[:, t]
        assert [int(s[1][len("topic:"):]) for s in senses] == \
            np.flatnonzero(column >= 0.5 * column.max()).tolist()
    the = kb.word_senses("the")
    assert the and all(len(s) == 1 and s[0].startswith("class:") and s[0] != "class:semantic"
                       for s in the)
    classes = np.flatnonzero(truth.class_word[:, truth.words.index("the")] > 0)
    assert the == [[f"class:{c}"] for c in classes]
    for word in ("<pad>", "<unk>", "<eos>", "notaword"):
        assert kb.word_senses(word) == [[f"<private:{word}>"]]
    stats = knowledge.statistics(kb)
    assert stats["words_covered"] == len(truth.words) and stats["private_senses"] == 4
    assert stats["sememes"] == config.num_topics + 1 + (config.num_classes - 1)
    assert stats["senses"] == len(kb.sense_word) >= len(vocab)
