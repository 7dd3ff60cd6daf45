"""Raw text to the TDLM corpus format: tcnlm_tf.data.prepare and the ``python -m train.prepare``
CLI."""

from __future__ import annotations

import codecs
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from nltk.tokenize.punkt import PunktSentenceTokenizer

from tcnlm_tf.data.prepare import (assign_splits, parse_fractions, prepare_corpus,
                                   read_raw_documents, tokenize_document, tokenize_sentence,
                                   train_sentence_splitter)
from tcnlm_tf.errors import UserError
from train.prepare import main

REPO_ROOT = Path(__file__).resolve().parent.parent

# Enough "Mr." and "U.S." followed by capitalised and lower-case words for Punkt to learn
# them as abbreviations, with varied sentence endings so nothing else looks like one.
RAW_DOCUMENTS = [
    "Mr. Smith moved to the U.S. last spring. He bought a small farm near the river. "
    "The farm didn't have water, Mr. Smith said.",
    "The U.S. government raised taxes again. Mr. Brown opposed the plan from the start. "
    "Nobody in the U.S. Senate asked him why.",
    "Mr. Jones visited the U.S. embassy on Tuesday. Officials there were polite but busy. "
    "He left without an answer.",
    "Exports from the U.S. fell sharply. Mr. Lee blamed the weather and the harbor strike. "
    "Farmers blamed everyone else.",
    "Mr. Clark isn't sure about the U.S. market. His company sells bicycles in Europe. "
    "Sales grew quickly last year.",
    "A storm hit the coast overnight. Mr. Smith lost part of his roof. "
    "Neighbours in the U.S. town helped him repair it.",
]


def _parse_tdlm(path: Path) -> list[list[list[str]]]:
    """Parse a TDLM file strictly: documents of TAB-separated sentences of single-spaced tokens."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n") and "\n\n" not in text and "\r" not in text
    documents = []
    for line in text.rstrip("\n").split("\n"):
        sentences = line.split("\t")
        for sentence in sentences:
            tokens = sentence.split(" ")
            assert sentence and all(tokens), f"empty sentence or double space in {line!r}"
            assert sentence == sentence.lower()
        documents.append([sentence.split(" ") for sentence in sentences])
    return documents


def _write_docs(directory: Path, documents: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for index, text in enumerate(documents):
        (directory / f"doc{index:02d}.txt").write_text(text, encoding="utf-8")


def _one_per_line(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "docs.txt"
    # Pre-split by a TAB: such tiny repetitive text would teach Punkt that "here." is an
    # abbreviation.
    path.write_text(
        "".join(f"Document number {i} is here.\tIt ends now.\n" for i in range(count)),
        encoding="utf-8",
    )
    return path


def test_trained_splitter_learns_corpus_abbreviations():
    splitter = train_sentence_splitter(RAW_DOCUMENTS)
    text = "Mr. Smith doesn't live in the U.S. anymore. He moved to Canada."
    assert tokenize_document(text, splitter) == [
        ["mr.", "smith", "does", "n't", "live", "in", "the", "u.s.", "anymore", "."],
        ["he", "moved", "to", "canada", "."],
    ]
    # Without training on the corpus, Punkt splits after the abbreviations.
    assert len(PunktSentenceTokenizer().tokenize(text)) > 2


def test_tokenize_sentence_is_treebank_style_and_lower_case():
    assert tokenize_sentence("Don't stop, Mr. Smith; \"They're\" HERE!") == [
        "do",
        "n't",
        "stop",
        ",",
        "mr.",
        "smith",
        ";",
        "``",
        "they",
        "'re",
        "''",
        "here",
        "!",
    ]
    assert tokenize_sentence("wide\u3000gap\u00a0here") == ["wide", "gap", "here"]


def test_tabs_and_blank_lines_always_end_sentences():
    splitter = train_sentence_splitter(RAW_DOCUMENTS)
    sentences = tokenize_document("A heading\n\nfirst part\tsecond part", splitter)
    assert sentences == [["a", "heading"], ["first", "part"], ["second", "part"]]


def test_sentences_without_tokens_are_dropped_and_counted():
    class FixedSplitter:
        def tokenize(self, text):
            return ["Hi there.", " \u3000 "]

    counts: Counter[str] = Counter()
    assert tokenize_document("ignored", FixedSplitter(), counts) == [["hi", "there", "."]]
    assert counts["empty_sentences"] == 1


def test_directory_mode_writes_tdlm_format(tmp_path):
    _write_docs(tmp_path / "raw" / "b", RAW_DOCUMENTS[3:])
    _write_docs(tmp_path / "raw" / "a", RAW_DOCUMENTS[:3])
    (tmp_path / "raw" / "notes.md").write_text("Not a document.", encoding="utf-8")
    logged: list[str] = []
    summary = prepare_corpus(tmp_path / "raw", tmp_path / "out", split=None, log=logged.append)
    assert summary.files == 6 and summary.outputs[0].path == tmp_path / "out" / "all.txt"
    documents = _parse_tdlm(tmp_path / "out" / "all.txt")
    assert len(documents) == 6 and summary.outputs[0].documents == 6
    assert documents[0] == tokenize_document(
        RAW_DOCUMENTS[0], train_sentence_splitter(RAW_DOCUMENTS)
    )
    assert documents[0][0] == ["mr.", "smith", "moved", "to", "the", "u.s.", "last", "spring", "."]
    assert documents[0][2][:4] == ["the", "farm", "did", "n't"]
    assert [len(doc) for doc in documents] == [3] * 6
    assert summary.outputs[0].sentences == 18
    assert summary.outputs[0].tokens == sum(len(s) for doc in documents for s in doc)
    assert any("training sentence splitter" in line for line in logged)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["all.txt"]  # no temp files left


def test_one_per_line_mode_skips_and_counts_blank_lines(tmp_path):
    raw = tmp_path / "docs.txt"
    text = "\r\n".join(RAW_DOCUMENTS[:3]) + "\n\n   \n" + "\n".join(RAW_DOCUMENTS[3:]) + "\n"
    raw.write_bytes(text.replace("harbor strike", "harbor\x0cstrike").encode("utf-8"))
    summary = prepare_corpus(raw, tmp_path / "out", split=None, log=None)
    assert summary.empty_documents == 2 and summary.documents_read == 6
    documents = _parse_tdlm(tmp_path / "out" / "all.txt")
    assert len(documents) == 6
    assert documents[3][0][:3] == ["exports", "from", "the"]
    assert documents[3][1][-3:] == ["harbor", "strike", "."]  # a form feed does not end a line


def test_split_fractions_partition_documents_deterministically(tmp_path):
    raw = _one_per_line(tmp_path, 20)

    def run(seed: int, name: str) -> list[list[str]]:
        prepare_corpus(raw, tmp_path / name, split=(0.6, 0.2, 0.2), seed=seed, log=None)
        return [
            (tmp_path / name / f"{split}.txt").read_text().splitlines()
            for split in ("train", "valid", "test")
        ]

    first, again, other = run(0, "a"), run(0, "b"), run(1, "c")
    assert [len(lines) for lines in first] == [12, 4, 4]
    assert sorted(sum(first, [])) == sorted(
        f"document number {i} is here .\tit ends now ." for i in range(20)
    )
    assert first == again
    assert first != other


def test_assign_splits_keeps_every_split_non_empty():
    train, valid, test = assign_splits(3, (0.8, 0.1, 0.1), seed=0)
    assert sorted(train + valid + test) == [0, 1, 2] and len(valid) == len(test) == 1
    with pytest.raises(UserError, match="--no-split"):
        assign_splits(2, (0.8, 0.1, 0.1), seed=0)


@pytest.mark.parametrize("text", ["0.8,0.1", "0.8,0.3,0.1", "1,0,0", "a,b,c", "0.9,-0.1,0.2"])
def test_bad_split_fractions_are_user_errors(text):
    with pytest.raises(UserError, match="split"):
        parse_fractions(text)


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    _write_docs(tmp_path / "raw", RAW_DOCUMENTS[:3])
    (tmp_path / "raw" / "bad.txt").write_bytes(
        b"Caf\xe9 prices rose. Mr. Smith paid \xff\xfe anyway."
    )
    summary = prepare_corpus(tmp_path / "raw", tmp_path / "out", split=None, log=None)
    assert summary.undecodable == 1 and summary.documents_read == 4
    assert "caf\ufffd" in (tmp_path / "out" / "all.txt").read_text(encoding="utf-8")

    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"Good line here.\nBad \xff line.\nAnother \xc3 bad one.\nFine again.\n")
    assert read_raw_documents(lines).undecodable == 2


@pytest.mark.parametrize(
    "encode",
    [
        lambda text: codecs.BOM_UTF8 + text.encode("utf-8"),
        lambda text: text.replace("\n", "\r").encode("utf-8"),
        lambda text: text.encode("utf-16"),
    ],
    ids=["UTF-8 mark", "CR line ends", "UTF-16 with its mark"],
)
def test_input_saved_in_other_forms_prepares_the_same_corpus(tmp_path, encode):
    """Input saved in other forms prepares the same corpus with --encoding utf-8 (the
    default): a CR-only file is not one document, a UTF-16 file does not turn into
    one-letter tokens, and a UTF-8 mark is dropped by the tokenizer."""
    text = "\n".join(RAW_DOCUMENTS) + "\n"
    (tmp_path / "plain.txt").write_bytes(text.encode("utf-8"))
    (tmp_path / "saved.txt").write_bytes(encode(text))
    plain = prepare_corpus(tmp_path / "plain.txt", tmp_path / "plain", split=None, log=None)
    saved = prepare_corpus(tmp_path / "saved.txt", tmp_path / "saved", split=None, log=None)
    assert saved.undecodable == 0 and saved.documents_read == plain.documents_read == 6
    assert _parse_tdlm(tmp_path / "saved" / "all.txt") == _parse_tdlm(
        tmp_path / "plain" / "all.txt"
    )


def test_empty_files_are_skipped_and_counted(tmp_path):
    _write_docs(tmp_path / "raw", RAW_DOCUMENTS[:3])
    (tmp_path / "raw" / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "raw" / "blank.txt").write_text(" \n\t\n", encoding="utf-8")
    summary = prepare_corpus(tmp_path / "raw", tmp_path / "out", split=None, log=None)
    assert summary.empty_documents == 2 and summary.outputs[0].documents == 3


def test_long_documents_are_truncated_and_counted(tmp_path):
    _write_docs(tmp_path / "raw", RAW_DOCUMENTS[:2])
    summary = prepare_corpus(
        tmp_path / "raw", tmp_path / "out", split=None, max_doc_tokens=12, log=None
    )
    assert summary.truncated_documents == 2
    documents = _parse_tdlm(tmp_path / "out" / "all.txt")
    assert [sum(map(len, doc)) for doc in documents] == [12, 12]
    assert documents[0][1] == ["he", "bought", "a"]


def test_output_inside_input_directory_is_not_read_back(tmp_path):
    _write_docs(tmp_path / "raw", RAW_DOCUMENTS)
    prepare_corpus(tmp_path / "raw", tmp_path / "raw" / "corpus", split=None, log=None)
    summary = prepare_corpus(
        tmp_path / "raw", tmp_path / "raw" / "corpus", split=None, force=True, log=None
    )
    assert summary.files == 6 and summary.outputs[0].documents == 6


def _run_main_expecting_user_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err_lines = capsys.readouterr().err.splitlines()
    assert len(err_lines) == 1 and err_lines[0].startswith("error: ")
    return err_lines[0]


def test_missing_input_exits_2_with_one_line(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    line = _run_main_expecting_user_error(
        capsys, ["--input", str(missing), "--output", str(tmp_path / "out")]
    )
    assert str(missing) in line
    assert not (tmp_path / "out").exists()


def test_input_without_usable_documents_exits_2(tmp_path, capsys):
    raw = tmp_path / "blank.txt"
    raw.write_text("\n  \n\n", encoding="utf-8")
    line = _run_main_expecting_user_error(
        capsys, ["--input", str(raw), "--output", str(tmp_path / "out")]
    )
    assert "no usable documents" in line


def test_existing_output_needs_force(tmp_path, capsys):
    raw = _one_per_line(tmp_path, 10)
    argv = [
        "--input",
        str(raw),
        "--output",
        str(tmp_path / "out"),
        "--no-split",
        "--output-name",
        "train.txt",
    ]
    summary = main(argv)
    assert summary.outputs[0].documents == 10
    assert "train.txt: 10 documents, 20 sentences" in capsys.readouterr().out
    raw.write_text("Only one document now.\n", encoding="utf-8")
    line = _run_main_expecting_user_error(capsys, argv)
    assert "--force" in line and "train.txt" in line
    assert len(_parse_tdlm(tmp_path / "out" / "train.txt")) == 10
    main([*argv, "--force"])
    assert _parse_tdlm(tmp_path / "out" / "train.txt") == [
        [["only", "one", "document", "now", "."]]
    ]


def test_cli_rejects_bad_flags(tmp_path, capsys):
    raw = _one_per_line(tmp_path, 10)
    base = ["--input", str(raw), "--output", str(tmp_path / "out")]
    assert "sum to 1" in _run_main_expecting_user_error(capsys, [*base, "--split", "0.5,0.5,0.5"])
    assert "--no-split" in _run_main_expecting_user_error(capsys, [*base, "--output-name", "x.txt"])
    with pytest.raises(SystemExit) as exit_info:  # argparse's error for the flag
        main([*base, "--max-doc-tokens", "0"])
    assert exit_info.value.code == 2 and "argument --max-doc-tokens" in capsys.readouterr().err
    assert "--encoding" in _run_main_expecting_user_error(
        capsys, [*base, "--encoding", "no-such-codec"]
    )
    assert not (tmp_path / "out").exists()


def test_cli_help_runs_as_module():
    result = subprocess.run(
        [sys.executable, "-m", "train.prepare", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0
    assert "separated by a TAB" in result.stdout and "--no-split" in result.stdout
