"""Corpus reading: the TDLM format and every kind of bad line."""
from tcnlm_tf.corpus import parse_document, read_corpus_file, write_corpus_file


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
