"""Corpus location, the prepared-corpus cache (reused, rebuilt on file or setting changes)
and the shared APNEWS sample."""
import pytest

from tcnlm_tf.config import DataConfig
from tcnlm_tf.data.loading import load_corpus
from tcnlm_tf.errors import UserError


def write_corpus(root, name="apnews", extra=""):
    doc = "the vote was held\tthe party won the vote\n"
    other = "a goal in the match\tthe team won the match\n"
    for split in ("train", "valid", "test"):
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / f"{split}.txt").write_text(doc * 6 + other * 6 + extra)


def config(root, **kwargs):
    settings = {"min_freq": 2, "topic_min_docs": 2, **kwargs}
    return DataConfig(dataset="apnews", data_dir=str(root), **settings)


def test_cache_is_reused_and_rebuilt_when_files_or_settings_change(tmp_path):
    write_corpus(tmp_path / "data")
    logs = []
    first = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache", log=logs.append)
    assert any("preparing" in line for line in logs)
    assert (first.cache_path / "manifest.json").is_file()
    logs.clear()
    again = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache", log=logs.append)
    assert not any("preparing" in line for line in logs)
    assert again.cache_path == first.cache_path
    assert again.lm_vocab.words == first.lm_vocab.words
    for split in ("train", "valid", "test"):
        assert (again.splits[split].lm_ids == first.splits[split].lm_ids).all()

    changed_setting = load_corpus(config(tmp_path / "data", min_freq=3),
                                  cache_dir=tmp_path / "cache", log=logs.append)
    assert changed_setting.cache_path != first.cache_path

    write_corpus(tmp_path / "data", extra="a new document\n")
    logs.clear()
    changed_file = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache",
                               log=logs.append)
    assert any("preparing" in line for line in logs)
    assert changed_file.cache_path != first.cache_path
    assert changed_file.splits["train"].num_documents == first.splits["train"].num_documents + 1


def test_skipped_lines_are_logged_with_file_and_line(tmp_path):
    write_corpus(tmp_path / "data", extra="\n\xff\n")
    logs = []
    load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache", log=logs.append)
    assert any("train.txt: skipped 1 empty lines (first at line 13)" in line for line in logs)


def test_missing_corpus_names_path_format_and_source(tmp_path):
    with pytest.raises(UserError) as err:
        load_corpus(DataConfig(dataset="bnc", data_dir=str(tmp_path)), cache_dir=tmp_path)
    message = str(err.value)
    assert str(tmp_path / "bnc" / "train.txt") in message
    assert "one document per line" in message and "github.com/jhlau" in message
    assert "\n" not in message


def test_shared_apnews_sample_loads(shared_data_dir, tmp_path):
    corpus = load_corpus(DataConfig(dataset="apnews", data_dir=str(shared_data_dir)),
                         cache_dir=tmp_path)
    assert [corpus.splits[s].num_documents for s in ("train", "valid", "test")] == [1700, 150, 150]
    assert corpus.lm_vocab.words[:3] == ["<pad>", "<unk>", "<eos>"]
    assert "the" in corpus.lm_vocab and "the" not in corpus.topic_vocab


def _prepare(args):
    """In a worker process: wait for the others, then prepare the same corpus into the same
    cache from scratch, as concurrent compare rows do."""
    barrier, cache_dir = args
    from tcnlm_tf.config import DataConfig as Config
    from tcnlm_tf.data.loading import load_corpus as load

    barrier.wait()
    config = Config(dataset="synthetic", topic_min_docs=2,
                    synthetic={"train_docs": 40, "valid_docs": 5, "test_docs": 5, "seed": 9})
    return len(load(config, cache_dir=cache_dir, log=lambda _: None).lm_vocab)


def test_concurrent_preparation_of_one_corpus(tmp_path):
    """Three processes building the same cache at the same moment all succeed (they once
    shared one temporary HDF5 file, and HDF5's lock failed the others), and none leaves a
    temporary directory behind."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    for attempt in range(2):
        cache_dir = tmp_path / f"cache{attempt}"
        with context.Manager() as manager, context.Pool(3) as pool:
            barrier = manager.Barrier(3)
            sizes = pool.map(_prepare, [(barrier, cache_dir)] * 3)
        assert len(set(sizes)) == 1
        prepared = list((cache_dir / "prepared").iterdir())
        assert len(prepared) == 1 and (prepared[0] / "manifest.json").is_file(), prepared


def test_a_literal_pad_in_the_text_is_unk_and_still_counted(tmp_path):
    """<pad> written in the text is <unk>: keeping <pad>'s id, which marks padding, would
    make the token vanish from every loss and perplexity count. A literal <unk> stays <unk>
    and <eos> stays <eos>."""
    from tcnlm_tf.data.loading import encode_split
    from tcnlm_tf.data.vocab import EOS, PAD, UNK

    write_corpus(tmp_path / "data")
    corpus = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache")
    vocab = corpus.lm_vocab
    arrays = encode_split([[["the", PAD, "vote", UNK, EOS]]], vocab, corpus.topic_vocab)
    assert arrays.lm_ids.tolist() == [vocab.index["the"], vocab.unk_id, vocab.index["vote"],
                                      vocab.unk_id, vocab.index[EOS]]
    assert 0 not in arrays.lm_ids.tolist()          # no token looks like padding


def test_reserved_words_written_in_the_text_are_reported(tmp_path, capsys):
    """A corpus whose sentences already end in a literal <eos> gets a second <eos> after
    each, scoring every end twice, so it must not pass in silence. The reading is kept
    (PTB-style files write <unk>), and each kind is reported once per file, in training and
    in the evaluators' --text-file."""
    from evaluate.common import read_documents
    from tcnlm_tf.data.vocab import EOS, UNK

    write_corpus(tmp_path / "data", extra=f"a vote {EOS}\tthe {UNK} won {EOS}\n")
    logs = []
    load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache", log=logs.append)
    train = tmp_path / "data" / "apnews" / "train.txt"
    assert f"{train}: 2 literal {EOS} (first at line 13), read as the end-of-sentence " \
           "symbol; every sentence also gets its own <eos>" in "\n".join(logs)
    assert f"{train}: 1 literal {UNK} (first at line 13), read as the unknown word" \
           in "\n".join(logs)
    read_documents(train)
    assert f"2 literal {EOS} (first at line 13)" in capsys.readouterr().out


def test_a_stopword_list_that_is_not_there_is_an_error_even_with_a_cached_corpus(tmp_path):
    """A mistyped --stopwords path is an error: it must not give the cache key of no list,
    under which a corpus cached with the default list would be used in silence."""
    write_corpus(tmp_path / "data")
    load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache", log=lambda _: None)
    with pytest.raises(UserError, match="stop-word list not found: .*typo.txt"):
        load_corpus(config(tmp_path / "data", stopwords=str(tmp_path / "typo.txt")),
                    cache_dir=tmp_path / "cache", log=lambda _: None)
