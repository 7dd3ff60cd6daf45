"""SavedModel export: TF Serving's version layout, string signatures that agree with the
training-time evaluation, and a clean TensorFlow-only process that loads each export and
reproduces the in-memory model's outputs."""
import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tcnlm_tf.metrics.evaluation import corpus_nll, generate
from tcnlm_tf.models.base import has_topics
from tests.conftest import EXPORT_MODELS, REPO_ROOT, TOPIC_MODELS
from tests.test_cli import assert_one_line_error
from tcnlm_tf.runs.loading import load_run
from tcnlm_tf.serving.module import ServingModule
from evaluate.common import read_documents, split_file
from evaluate.score import main as score_main
from tcnlm_tf.data.pipeline import PAD_ID
from tcnlm_tf.metrics.perplexity import perplexity
from train.export import main as export_main

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

PY_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}

#: run by a fresh interpreter in isolated mode (-I: no cwd, no PYTHONPATH on sys.path)
CLEAN_LOADER = """
import importlib.util, json, sys
import numpy as np
import tensorflow as tf
assert importlib.util.find_spec("tcnlm_tf") is None, "the project must not be importable"
calls = json.load(open(sys.argv[1]))
results = {}
for name, spec in calls.items():
    model = tf.saved_model.load(spec["path"])
    for i, (signature, inputs) in enumerate(spec["calls"]):
        args = {k: tf.constant(v, dtype=tf.as_dtype(d)) for k, (v, d) in inputs.items()}
        for key, value in model.signatures[signature](**args).items():
            results[f"{name}/{i}/{signature}/{key}"] = value.numpy()
np.savez(sys.argv[2], **results)
"""


#: the exports whose generate_sampled signatures the clean process runs (the samplers are
#: the shared generator's, the same code for every model; eagerly, each call takes seconds)
SAMPLED = ("tcnlm",)


def calls_for(run, documents, temperature):
    """Signature calls (name, {input: (value, dtype)}) covering every signature (the
    ``generate_sampled`` ones for :data:`SAMPLED` runs), generating at ``temperature``
    (0.0: the argmax; above 0: sampled)."""
    sentences = [" ".join(s) for d in documents for s in d][:6] + ["qqqzz unknown words", ""]
    context = ["\t".join(" ".join(s) for s in d) for d in documents]
    docs = (context * 3)[:len(sentences)]
    calls = [
        ("score", {"sentences": (sentences, "string"), "documents": (docs, "string")}),
        ("serving_default", {"sentences": (sentences, "string")}),
        ("next_words", {"context": ([s.rsplit(" ", 1)[0] for s in sentences], "string"),
                        "documents": (docs, "string"), "k": (5, "int32")}),
        ("next_words", {"context": ([s.rsplit(" ", 1)[0] for s in sentences], "string"),
                        "documents": (docs, "string"), "k": (10 ** 6, "int32")}),   # all
    ]
    t = (temperature, "float32")
    prompts = [sentences[0].rsplit(" ", 1)[0], "", "qqqzz"]
    samplers = [{"prompts": (prompts, "string"), "seed": (7, "int64"), "temperature": t,
                 "top_k": (3, "int32"), "top_p": (0.9, "float32"), "beam_width": (0, "int32")},
                {"prompts": (prompts, "string"), "seed": (7, "int64"), "temperature": t,
                 "top_k": (0, "int32"), "top_p": (1.0, "float32"), "beam_width": (3, "int32")}]
    if run.directory.name not in SAMPLED:
        samplers = []
    if not has_topics(run.model):
        calls += [("generate", {"num_sentences": (3, "int32"), "seed": (7, "int64"),
                                "temperature": t})]
        calls += [("generate_sampled", sampler) for sampler in samplers]
    else:
        T = run.model.num_topics
        mixture = np.full((1, T), 1.0 / T).tolist()
        one_hot = np.eye(T)[:2].tolist()
        calls += [("infer_topics", {"documents": (context, "string")}),
                  ("generate", {"topics": (one_hot + mixture, "float32"), "seed": (7, "int64"),
                                "temperature": t}),
                  ("generate_from_document", {"documents": (context, "string"),
                                              "seed": (3, "int64"), "temperature": t}),
                  ("topic_words", {"top_n": (5, "int32")})]
        calls += [("generate_sampled", {"topics": (one_hot + mixture, "float32"), **sampler})
                  for sampler in samplers]
        calls += [("generate_sampled_from_document",
                   {"documents": ((context * 3)[:3], "string"), **sampler})
                  for sampler in samplers]
    return calls


def in_memory(module, signature, inputs):
    """The signature's outputs computed eagerly by the in-memory module (its tf.function's
    Python function: no trace, so 2-3x quicker here, and a path independent of the graph
    that the export saved)."""
    fn = {"serving_default": module.score_sentences}.get(signature) or getattr(module, signature)
    args = {k: tf.constant(v, dtype=tf.as_dtype(d)) for k, (v, d) in inputs.items()}
    return {k: v.numpy() for k, v in fn.python_function(**args).items()}


def test_versions_increment(exports, tmp_path, monkeypatch, capsys):
    """Versions count up from 1 over folders of ASCII digits (a folder ``²`` is no
    version); what a killed export left (``<v>.partial``) is removed by the next one, a
    failed export leaves none, and a version past TF Serving's int64 is one line."""
    root, out = exports
    run_dir, first = out["lstm"]
    assert first == root / "saved_models" / "lstm" / "1"
    model_dir = tmp_path / "lstm"
    (model_dir / "²").mkdir(parents=True)
    (model_dir / "1.partial" / "variables").mkdir(parents=True)
    (model_dir / "1.partial" / "variables" / "stale.data").write_text("old")
    for version in ("1", "2"):
        path = export_main(["--run", str(run_dir), "--output-dir", str(tmp_path)])
        assert path == model_dir / version
    assert "removing " in capsys.readouterr().out
    assert sorted(p.name for p in model_dir.iterdir()) == ["1", "2", "²"]
    assert not (model_dir / "1" / "variables" / "stale.data").exists()

    import tcnlm_tf.serving.warmup as warmup

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(warmup, "write_warmup_requests", full_disk)
    with pytest.raises(SystemExit):
        export_main(["--run", str(run_dir), "--output-dir", str(tmp_path)])
    assert "No space left on device" in capsys.readouterr().err
    assert sorted(p.name for p in model_dir.iterdir()) == ["1", "2", "²"]
    monkeypatch.undo()
    (model_dir / "99999999999999999999").mkdir()
    with pytest.raises(SystemExit):
        export_main(["--run", str(run_dir), "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a version number TF Serving cannot read" in err


def test_no_python_ops_and_no_custom_gradients_in_the_graphs(exports):
    """Every export's graphs run without Python, and keep none of the custom gradients
    (the LSTM recurrence's, the sememe decoder's) that serving never computes."""
    _, out = exports
    for name, (_, path) in out.items():
        proto = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
        graph = proto.meta_graphs[0].graph_def
        ops = {n.op for n in graph.node}
        for function in graph.library.function:
            ops |= {n.op for n in function.node_def}
        assert "StatefulPartitionedCall" in ops or "PartitionedCall" in ops   # parsed
        assert not ops & PY_OPS, (name, ops & PY_OPS)
        assert not graph.library.registered_gradients, name


def test_signatures_that_differ_in_their_inputs_share_one_trace(exports, monkeypatch):
    """``serving_default`` and ``score`` trace the scoring graph once between them, and a
    topic model's topics and documents signatures trace each generation loop once between
    them (these traces are most of an export's time); run eagerly, as the in-memory side of
    these tests runs them, ``serving_default`` traces nothing."""
    calls = Counter()

    def counted(name):
        method = getattr(ServingModule, name)

        def call(self, *args):
            calls[name] += 1
            return method(self, *args)
        return call

    for name in ("_score", "_generate", "_generate_sampled"):
        monkeypatch.setattr(ServingModule, name, counted(name))
    module = ServingModule(load_run(exports[1]["tcnlm"][0]))
    in_memory(module, "serving_default", {"sentences": (["a b"], "string")})
    assert calls == {"_score": 1} and module.score.experimental_get_tracing_count() == 0
    for function in module.signatures().values():
        function.get_concrete_function()
    assert calls == {"_score": 2, "_generate": 1, "_generate_sampled": 1}


#: the exports the clean process loads: every model, the LSTM in each of its modes (the
#: other models' other modes export the same signatures over the same layers)
CLEAN_PROCESS_MODELS = [name for name in EXPORT_MODELS
                        if name not in ("sdlm-document", "sdlm-stream", "tcnlm-preceding")]


def test_clean_process_reproduces_the_in_memory_model(exports, tmp_path):
    """Every signature of every model type (:data:`CLEAN_PROCESS_MODELS`), loaded by
    TensorFlow alone in a process that cannot import the project, gives the in-memory
    model's outputs (<= 1e-5), and next_words over the whole vocabulary sums to 1.
    Generation is checked greedy in every other model and sampled in the rest (the choice
    is one ``tf.where`` in the shared generator, the same for every model), both with and
    without topics."""
    _, out = exports
    spec, expected, generated, modules = {}, {}, set(), {}
    for index, name in enumerate(CLEAN_PROCESS_MODELS):
        run_dir, path = out[name]
        run = load_run(run_dir)
        module = modules[name] = ServingModule(run)
        temperature = (0.8, 0.0)[index % 2]
        generated.add((has_topics(run.model), temperature))
        calls = calls_for(run, read_documents(split_file(run, "test"))[:3], temperature)
        spec[name] = {"path": str(path), "calls": calls}
        for i, (signature, inputs) in enumerate(calls):
            for key, value in in_memory(module, signature, inputs).items():
                expected[f"{name}/{i}/{signature}/{key}"] = value
    assert generated == {(False, 0.8), (False, 0.0), (True, 0.8), (True, 0.0)}
    (tmp_path / "calls.json").write_text(json.dumps(spec))
    (tmp_path / "loader.py").write_text(CLEAN_LOADER)
    result = subprocess.run([sys.executable, "-I", str(tmp_path / "loader.py"),
                             str(tmp_path / "calls.json"), str(tmp_path / "out.npz")],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = dict(np.load(tmp_path / "out.npz", allow_pickle=True))
    assert set(loaded) == set(expected)
    for key, want in expected.items():
        got = loaded[key]
        if want.dtype.kind in "OSU":
            np.testing.assert_array_equal(got.astype(str), want.astype(str), err_msg=key)
        else:
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=0, err_msg=key)
    for name, module in modules.items():
        # next_words over every word but <pad>, in the clean process, is the model's whole
        # distribution (which sums to 1) without its <pad> probability
        every = loaded[f"{name}/3/next_words/probabilities"]
        assert every.shape[1] == module.vocab_size - 1
        call = spec[name]["calls"][3][1]
        inputs = {k: tf.constant(v, tf.as_dtype(d)) for k, (v, d) in call.items() if k != "k"}
        whole = np.exp(module.next_word_log_probs(**inputs).numpy())
        np.testing.assert_allclose(whole.sum(-1), 1.0, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(every.sum(-1), 1.0 - whole[:, PAD_ID], atol=1e-5,
                                   err_msg=name)
    # the signatures did distinguish their inputs
    assert loaded["tcnlm/0/score/token_log_probs"].shape[0] == 8
    assert not np.allclose(loaded["tcnlm/4/infer_topics/topics"][0],
                           loaded["tcnlm/4/infer_topics/topics"][1])


@pytest.mark.parametrize("name", list(EXPORT_MODELS))
def test_score_cli_agrees_with_the_training_evaluation(exports, name, tmp_path):
    """evaluate.score sends each sentence of a file to the export's score signature with the
    context the pipeline builds in training (topic models: the rest of the document, or the
    sentences before with --context preceding; document and stream mode: the sentences
    before); its perplexity equals corpus_nll's (windows of --seq-len 8, carried document
    state, <unk> and all; with --line-end none no <eos> is read or predicted)."""
    _, out = exports
    run_dir, saved = out[name]
    run = load_run(run_dir)
    documents = read_documents(split_file(run, "test"))[:4]
    assert max(len(s) for d in documents for s in d) > 8     # some sentences span windows
    text = tmp_path / "docs.txt"
    text.write_text("".join("\t".join(" ".join(s) for s in d) + "\n" for d in documents))
    result = score_main(["--saved-model", str(saved), "--text-file", str(text),
                         "--batch-size", "5", "--output", str(tmp_path / "score.json")])
    if run.config.model.mode == "stream":
        # a stream runs on from one document into the next; the export scores each
        # document's sentences after <eos> and that document's text alone: one lane each
        nll, tokens = map(sum, zip(*(corpus_nll(run, [d], batch_size=1) for d in documents)))
    else:
        nll, tokens = corpus_nll(run, documents)
    assert result["tokens"] == tokens
    assert result["perplexity"] == pytest.approx(perplexity(nll, tokens), rel=1e-5)
    assert json.loads((tmp_path / "score.json").read_text())["tokens"] == tokens


def test_export_says_which_context_protocol_it_was_trained_with(exports):
    """evaluate.score sends a --context preceding export only the sentences before."""
    _, out = exports
    kinds = {name: tf.saved_model.load(str(out[name][1])).context_kind.numpy().decode()
             for name in ("tcnlm", "tcnlm-preceding")}
    assert kinds == {"tcnlm": "bag-of-words", "tcnlm-preceding": "preceding-bag-of-words"}


@pytest.mark.parametrize("name", TOPIC_MODELS)
def test_greedy_generation_matches_evaluate_generate(exports, name):
    _, out = exports
    run = load_run(out[name][0])
    module = ServingModule(run)
    topics = np.eye(run.model.num_topics, dtype=np.float32)[:2]
    served = module.generate(tf.constant(topics), tf.constant(0, tf.int64), tf.constant(0.0))
    for row, t in enumerate(topics):
        [words] = generate(run, t, num=1, greedy=True, allow_unk=False)
        assert served["sentences"][row].numpy().decode() == " ".join(words)
        assert int(served["num_tokens"][row]) == len(words)


def test_score_of_a_directory_that_is_no_export_is_a_one_line_error(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("a b\n")
    result = subprocess.run([sys.executable, "-m", "evaluate.score", "--saved-model",
                             str(tmp_path), "--text-file", str(text)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert_one_line_error(result, "not a SavedModel version directory")


def test_export_of_a_missing_run_is_a_one_line_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "train.export", "--run",
                             str(tmp_path / "nope")], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=120)
    assert_one_line_error(result, "not found", "--run runs/<name>")


def test_exported_signatures_reject_invalid_inputs(exports):
    """generate's topics must be distributions and next_words' k positive: each otherwise
    fails in the graph with an InvalidArgument error saying what is wrong."""
    _, out = exports
    loaded = tf.saved_model.load(str(out["tcnlm"][1]))
    num_topics = loaded.signatures["generate"].structured_input_signature[1]["topics"].shape[1]
    seed, temperature = tf.constant(0, tf.int64), tf.constant(0.0)
    good = np.eye(num_topics, dtype=np.float32)[:1]
    loaded.signatures["generate"](topics=tf.constant(good), seed=seed, temperature=temperature)
    negative = good.copy()
    negative[0, :2] = [1.5, -0.5]
    for bad, text in ((negative, "non-negative"), (good * 2, "sum to 1")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=text):
            loaded.signatures["generate"](topics=tf.constant(bad), seed=seed,
                                          temperature=temperature)
    next_words = loaded.signatures["next_words"]
    context, documents = tf.constant(["a"]), tf.constant([""])
    with pytest.raises(tf.errors.InvalidArgumentError, match="k must be >= 1"):
        next_words(context=context, documents=documents, k=tf.constant(0))
    words = load_run(out["tcnlm"][0]).lm_vocab.words
    every = next_words(context=context, documents=documents, k=tf.constant(10 ** 6))
    assert sorted(w.decode() for w in every["words"].numpy()[0]) == sorted(words[1:])  # no <pad>
    assert np.all(np.diff(every["probabilities"].numpy()[0]) <= 0)


@pytest.mark.parametrize("name", ["lstm", "tcnlm"])
def test_signatures_check_batch_agreement_and_serve_an_empty_batch(exports, name):
    """score and next_words refuse a documents list of another length than their first
    input (it was broadcast, or failed in a reshape), naming both; every signature answers
    an empty batch with empty outputs; generate names a non-finite temperature and a bad
    number of sentences."""
    _, out = exports
    signatures = tf.saved_model.load(str(out[name][1])).signatures
    empty = tf.constant([], tf.string)
    for sentences, documents in ((["a b", "c"], [""]), (["a b"], ["", ""])):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="score: sentences and documents must have the same length"):
            signatures["score"](sentences=tf.constant(sentences),
                                documents=tf.constant(documents))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="next_words: context and documents must have the same length"):
        signatures["next_words"](context=tf.constant(["a", "b"]), documents=tf.constant([""]),
                                 k=tf.constant(3))
    scored = signatures["score"](sentences=empty, documents=empty)
    assert scored["perplexity"].shape == [0] and scored["token_log_probs"].shape[0] == 0
    # a literal <pad> is scored as <unk>, as in training, not dropped as padding
    scored = signatures["score"](sentences=tf.constant(["a <pad> b"]),
                                 documents=tf.constant([""]))
    tokens = [t.decode() for t in scored["tokens"].numpy()[0]]
    assert int(scored["num_tokens"][0]) == 4 and tokens[1] == "<unk>" and "<pad>" not in tokens
    assert signatures["next_words"](context=empty, documents=empty,
                                    k=tf.constant(3))["words"].shape == [0, 3]
    seed = tf.constant(0, tf.int64)
    if name == "tcnlm":
        num_topics = signatures["generate"].structured_input_signature[1]["topics"].shape[1]
        one = {"topics": tf.one_hot([0], num_topics)}
        assert signatures["generate"](topics=tf.zeros([0, num_topics]), seed=seed,
                                      temperature=tf.constant(1.0))["sentences"].shape == [0]
        assert signatures["infer_topics"](documents=empty)["topics"].shape == [0, num_topics]
        conditions = {"topics": tf.zeros([0, num_topics])}
    else:
        one = {"num_sentences": tf.constant(1)}
        assert signatures["generate"](num_sentences=tf.constant(0), seed=seed,
                                      temperature=tf.constant(1.0))["sentences"].shape == [0]
        for bad, text in ((-1, "num_sentences must be >= 0"), (2 ** 31 - 1, "at most")):
            with pytest.raises(tf.errors.InvalidArgumentError, match=text):
                signatures["generate"](num_sentences=tf.constant(bad), seed=seed,
                                       temperature=tf.constant(1.0))
        conditions = {}
    for width in (0, 3):                  # sampling and beam search, on an empty batch
        assert signatures["generate_sampled"](
            **conditions, prompts=empty, seed=seed, temperature=tf.constant(1.0),
            top_k=tf.constant(0), top_p=tf.constant(1.0),
            beam_width=tf.constant(width))["sentences"].shape == [0]
    for temperature in (float("nan"), float("inf")):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="generate: temperature must be a finite number"):
            signatures["generate"](**one, seed=seed, temperature=tf.constant(temperature))


@pytest.mark.parametrize("name", ["lstm", "tcnlm"])
def test_signatures_serve_over_long_and_non_utf8_inputs(exports, name):
    """Unusual serving inputs: a 20,000-word sentence is scored whole
    (sentences are never cut to the training --seq-len), and bytes that are not UTF-8 are
    words like any other, unknown to the vocabulary: <unk>, counted and scored."""
    _, out = exports
    signatures = tf.saved_model.load(str(out[name][1])).signatures
    long = " ".join(f"w{i % 50}" for i in range(20_000))
    not_utf8 = b"caf\xe9 \xff\xfe the \xc3"
    for document in ("", long, not_utf8):
        scored = signatures["score"](sentences=tf.constant([long, not_utf8]),
                                     documents=tf.constant([document, document]))
        assert scored["num_tokens"].numpy().tolist() == [20_001, 5]
        assert np.all(np.isfinite(scored["perplexity"].numpy()))
        tokens = [t.decode() for t in scored["tokens"].numpy()[1][:5]]
        assert tokens == ["<unk>", "<unk>", "the", "<unk>", "<eos>"]
        words = signatures["next_words"](context=tf.constant([long, not_utf8]),
                                         documents=tf.constant([document, document]),
                                         k=tf.constant(3))["words"]
        assert words.shape == [2, 3]
    if name == "tcnlm":
        topics = signatures["infer_topics"](documents=tf.constant([long, not_utf8]))["topics"]
        np.testing.assert_allclose(topics.numpy().sum(axis=1), 1.0, rtol=1e-5)
