"""The Python API: ``tcnlm_tf.load`` of a run directory, an export and a preset gives the
numbers of the commands (evaluate.perplexity, evaluate.score, evaluate.topics), the
samplers keep their defining properties through the exported signatures, and a preset
loads without its run directory."""
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tcnlm_tf
from tcnlm_tf.config import RunConfig
from tcnlm_tf.data.loading import source_dir
from evaluate.perplexity import main as perplexity_main
from evaluate.score import main as score_main
from evaluate.topics import main as topics_main
from tcnlm_tf.errors import UserError
from tcnlm_tf.samplers import BeamSampler, TopKSampler, TopPSampler
from tcnlm_tf.serving.mixtures import topic_mixture
from tests.conftest import REPO_ROOT
from tests.test_cli import assert_one_line_error

#: uses the session-wide exports (tests/conftest.py): `make test` runs it
pytestmark = pytest.mark.slow

#: a sentence-mode topic model (the rest of the document as context) and a model that
#: carries its state through the text before the sentence
SCORED = ["tcnlm", "lstm-document"]


def _test_file(run_dir) -> str:
    """The test split of a run's corpus."""
    return str(source_dir(RunConfig.load(run_dir / "config.json").data) / "test.txt")


@pytest.mark.parametrize("name", SCORED)
def test_load_run_and_export_give_the_commands_numbers(exports, name):
    _, out = exports
    run_dir, saved = out[name]
    want = perplexity_main(["--run", str(run_dir)])
    served = score_main(["--saved-model", str(saved), "--text-file", want["file"]])
    from_run, from_export = tcnlm_tf.load(run_dir), tcnlm_tf.load(saved)
    assert from_run.perplexity(want["file"]) == pytest.approx(want["perplexity"], rel=1e-5)
    assert from_export.perplexity(want["file"]) == pytest.approx(served["perplexity"],
                                                                 rel=1e-5)
    assert from_run.corpus_score(want["file"])["tokens"] == want["predicted_tokens"]
    # the model directory above the versions loads its newest version
    assert tcnlm_tf.load(saved.parent).source == saved
    sentences, documents = ["w1 w2 w3", "qqq w4"], ["w5 w6\tw7", ""]
    a, b = from_run.score(sentences, documents), from_export.score(sentences, documents)
    np.testing.assert_allclose(a["token_log_probs"], b["token_log_probs"], rtol=1e-5,
                               atol=1e-6)
    assert a["tokens"].tolist() == b["tokens"].tolist()
    a, b = from_run.next_words("w1 w2", k=3), from_export.next_words("w1 w2", k=3)
    assert [w for w, _ in a] == [w for w, _ in b]
    assert [p for _, p in a] == pytest.approx([p for _, p in b], rel=1e-5)


@pytest.mark.parametrize("name", ["tcnlm", "topic_rnn"])   # topic and LM vocabulary
def test_topics_and_topic_inference_equal_the_commands(exports, name):
    _, out = exports
    run_dir, saved = out[name]
    want = topics_main(["--run", str(run_dir), "--top-n", "6"])
    model = tcnlm_tf.load(saved)
    assert model.topics(top_n=6) == want
    theta = model.infer_topics(["w1 w2\tw3", ["w4 w5", "w6"]])
    assert theta.shape == (2, model.num_topics)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, atol=1e-5)


def test_samplers_through_the_export(exports):
    """top-k 1 and a tiny top-p are greedy decoding; beam width 1 too; beam search finds a
    sentence at least as probable as greedy's; the prompt starts every sentence; run and
    export sample alike; topic, mixture and document all condition."""
    _, out = exports
    run_dir, saved = out["tcnlm"]
    model = tcnlm_tf.load(saved)
    greedy = model.generate(["w1", ""], topic=1)
    assert model.generate(["w1", ""], topic=1, sampler=TopKSampler(k=1), seed=5) == greedy
    assert model.generate(["w1", ""], topic=1, sampler=TopPSampler(p=1e-6), seed=5) == greedy
    assert model.generate(["w1", ""], topic=1, sampler=BeamSampler(num_beams=1)) == greedy
    assert greedy[0][0].split()[0] == "w1" and len(greedy) == 2
    t = topic_mixture(model.num_topics, 1)
    inputs = {"topics": [t], "prompts": ["w1"], "seed": 0}
    scored = {name: float(model.call("generate_sampled", **inputs, **s.inputs())
                          ["log_probability"][0])
              for name, s in (("greedy", TopKSampler(k=1)), ("beam", BeamSampler(4)))}
    assert scored["beam"] >= scored["greedy"] - 1e-5
    sampled = dict(sampler=TopPSampler(p=0.9, temperature=1.5), num=3, seed=11)
    from_export = model.generate("w2", mixture={0: 1, 2: 1}, **sampled)
    assert from_export == tcnlm_tf.load(run_dir).generate("w2", mixture={0: 1, 2: 1},
                                                          **sampled)
    assert len(set(from_export)) > 1                      # three draws, not one repeated
    assert model.generate("w2", mixture=[1, 0, 1, 0], **sampled) == from_export
    assert len(model.generate("", document="w1 w2\tw3", sampler="top_p", num=2)) == 2


def test_models_without_topics(exports):
    _, out = exports
    model = tcnlm_tf.load(out["lstm"][1])
    assert not model.has_topics
    sentences = model.generate(["w1 w2", "w3"], sampler=TopKSampler(k=3), num=2, seed=1)
    assert [len(s) for s in sentences] == [2, 2] and sentences[0][0].startswith("w1 w2")
    for call, text in ((lambda: model.generate(topic=0), "needs a topic model"),
                       (lambda: model.topics(), "needs a topic model"),
                       (lambda: model.generate(sampler="nucleus"), "unknown sampler"),
                       (lambda: model.call("generate_sampled", prompts=[""], seed=0,
                                           temperature=1.0, top_k=0, top_p=2.0,
                                           beam_width=0),
                        r"^generate_sampled: top_p must be in \(0, 1\] \(1: off\)$"),
                       (lambda: model.next_words("w1", k=0), r"^next_words: k must be >= 1\.$"),
                       (lambda: model.save_preset("x"), "exported SavedModel")):
        with pytest.raises(UserError, match=text):
            call()


@pytest.mark.parametrize("name", ["lda_lstm", "sdlm"])
def test_a_preset_loads_without_its_run(exports, tmp_path, name):
    """A preset of a copy of the run, moved elsewhere after the copy is deleted, scores
    as the run does: the LDA+LSTM's lda/ and the SDLM's knowledge base travel in assets/
    (a TCNLM's preset: tests/test_own_corpus.py)."""
    _, out = exports
    run_dir = shutil.copytree(out[name][0], tmp_path / "run")
    text = _test_file(run_dir)
    want = tcnlm_tf.load(run_dir).perplexity(text)
    tcnlm_tf.load(run_dir).save_preset(tmp_path / "preset")
    shutil.rmtree(run_dir)
    moved = shutil.move(tmp_path / "preset", tmp_path / "elsewhere")
    preset = tcnlm_tf.load(moved)
    assert preset.perplexity(text) == pytest.approx(want, rel=1e-6)
    assert sorted(p.name for p in moved.iterdir()) == ["assets", "config.json",
                                                        "metadata.json", "model.weights.h5"]
    again = preset.save_preset(tmp_path / "again")      # a preset of a preset
    assert tcnlm_tf.load(again).perplexity(text) == pytest.approx(want, rel=1e-6)


def test_preset_command_and_its_errors(exports, tmp_path):
    _, out = exports
    command = [sys.executable, "-m", "train.preset", "--run", str(out["lstm"][0])]
    done = subprocess.run(command + ["--output", str(tmp_path / "p")], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "p" / "model.weights.h5").is_file()
    again = subprocess.run(command + ["--output", str(tmp_path / "p")], cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=300)
    assert_one_line_error(again, "already exists")
    with pytest.raises(UserError, match="not a run directory"):
        tcnlm_tf.load(tmp_path)
