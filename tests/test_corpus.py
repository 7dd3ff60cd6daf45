"""Corpus reading: the TDLM format, every kind of bad line, and the encodings and line ends
files are saved with."""
import codecs

import pytest

from tcnlm_tf.data.corpus import parse_document, read_corpus_file, write_corpus_file
from tcnlm_tf.data.vocab import Vocabulary, load_stopwords
from tcnlm_tf.errors import UserError


def test_parse_document_splits_sentences_on_tabs_and_tokens_on_spaces():
    assert parse_document("a b\tc  d e\t\tf\n") == [["a", "b"], ["c", "d", "e"], ["f"]]


def test_reader_skips_and_counts_bad_lines(tmp_path):
    path = tmp_path / "train.txt"
    lines = [
        b"the cat sat\tit was happy\n",          # 1 good
        b"\n",                                   # 2 empty line
        b"\t \t\n",                              # 3 empty document (tabs, no token)
        b"caf\xe9 \xff bad bytes\n",             # 4 undecodable
        b"one two\t\tthree\n",                   # 5 good, one empty sentence
        b" ".join([b"w"] * 50) + b"\n",          # 6 over-long (limit 20)
        b"last doc",                             # 7 good, no trailing newline
    ]
    path.write_bytes(b"".join(lines))
    documents, stats = read_corpus_file(path, max_doc_tokens=20)
    assert documents == [[["the", "cat", "sat"], ["it", "was", "happy"]],
                         [["one", "two"], ["three"]], [["last", "doc"]]]
    assert (stats.documents, stats.sentences, stats.tokens) == (3, 5, 11)
    assert (stats.empty_lines, stats.undecodable_lines, stats.overlong_documents,
            stats.empty_sentences) == (2, 1, 1, 1)
    problems = stats.problems(path)
    assert any("empty lines (first at line 2)" in p for p in problems)
    assert any("undecodable lines (first at line 4)" in p for p in problems)
    assert any("overlong documents (first at line 6)" in p for p in problems)
    assert all(str(path) in p for p in problems)


def test_write_then_read_round_trip(tmp_path):
    documents = [[["a", "b"], ["c"]], [["d", "e", "f"]]]
    write_corpus_file(tmp_path / "x.txt", documents)
    assert (tmp_path / "x.txt").read_text() == "a b\tc\nd e f\n"
    assert read_corpus_file(tmp_path / "x.txt")[0] == documents


#: one small corpus in the encodings and line-end conventions editors save
TEXT = "the cat sat\tit ran away\na dog barked\tthen it slept\n"
DOCUMENTS = [[["the", "cat", "sat"], ["it", "ran", "away"]],
             [["a", "dog", "barked"], ["then", "it", "slept"]]]
SAVED_AS = {
    "UTF-8 with a byte-order mark": codecs.BOM_UTF8 + TEXT.encode(),
    "CRLF line ends": TEXT.replace("\n", "\r\n").encode(),
    "classic Mac OS CR line ends": TEXT.replace("\n", "\r").encode(),
    "UTF-16 with its mark (an editor's 'Unicode')": TEXT.encode("utf-16"),
    "UTF-16 big-endian with its mark": codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"),
    "UTF-32 with its mark": TEXT.encode("utf-32"),
}


@pytest.mark.parametrize("kind", list(SAVED_AS))
def test_every_saved_form_reads_as_the_same_documents(tmp_path, kind):
    """Every form an editor saves reads the same: a UTF-8 mark is not glued to the first
    word (which would make it a word of its own in every vocabulary), a CR-only file is not
    one document, and a UTF-16 file's lines are not skipped."""
    path = tmp_path / "train.txt"
    path.write_bytes(SAVED_AS[kind])
    documents, stats = read_corpus_file(path)
    assert documents == DOCUMENTS and stats.problems(path) == []
    assert stats.lines == [1, 2]


def test_a_broken_utf16_file_is_a_one_line_error(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes(TEXT.encode("utf-16") + b"\x00\xd8")     # a lone high surrogate
    with pytest.raises(UserError, match="UTF-16 byte-order mark but is not UTF-16 text"):
        read_corpus_file(path)


@pytest.mark.parametrize("data", [codecs.BOM_UTF8 + b"the\ncat\n", "the\ncat\n".encode("utf-16"),
                                  b"the\rcat\r"], ids=["UTF-8 mark", "UTF-16", "CR"])
def test_stopword_lists_and_vocabularies_read_every_saved_form(tmp_path, data):
    """A marked stop-word list lost its first word (``\\ufeffthe`` is no stop word)."""
    path = tmp_path / "words.txt"
    path.write_bytes(data)
    assert {"the", "cat"} <= load_stopwords(path)
    assert Vocabulary.load(path, unk=None).words[:2] == ["the", "cat"]
