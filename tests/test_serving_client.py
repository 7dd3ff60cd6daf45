"""evaluate.serving_client: TF Serving REST requests and answers, unit by unit and against
a local stand-in for TF Serving's REST predict endpoint that runs the real exports; and
the serving documentation (docs/serving.md) checked against what ``saved_model_cli`` prints."""
import json
import re
import subprocess
import sys
import threading
from http.server import HTTPServer

import numpy as np
import pytest

from evaluate.serving_client import (ServingClient, ServingError, build_request,
                                     parse_response, predict_url)
from tcnlm_tf.errors import UserError
from tcnlm_tf.serving.mixtures import topic_mixture
from tests.conftest import REPO_ROOT
from tests.serving_stub import PredictHandler

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow


def test_predict_url_and_request_body():
    assert predict_url("http://h:8501/", "m") == "http://h:8501/v1/models/m:predict"
    assert predict_url("http://h:8501", "m", 3) == "http://h:8501/v1/models/m/versions/3:predict"
    assert build_request("next_words", {"context": ["a b"], "documents": [""], "k": 5}) == {
        "signature_name": "next_words",
        "inputs": {"context": ["a b"], "documents": [""], "k": 5}}


def test_parse_named_single_and_error_answers():
    assert parse_response("score", {"outputs": {"perplexity": [3.0]}}) == {"perplexity": [3.0]}
    assert parse_response("infer_topics", {"outputs": [[0.5, 0.5]]}) == {"topics": [[0.5, 0.5]]}
    with pytest.raises(ServingError, match="refused the score request: bad input"):
        parse_response("score", {"error": "bad input"})
    with pytest.raises(ServingError, match="no 'outputs'"):
        parse_response("score", {"predictions": []})
    with pytest.raises(ServingError, match="one unnamed output"):
        parse_response("score", {"outputs": [1.0]})


def test_topic_mixture():
    assert topic_mixture(4, topic=2) == [0.0, 0.0, 1.0, 0.0]
    assert topic_mixture(3, mixture={0: 1.0, 2: 3.0}) == [0.25, 0.0, 0.75]
    for bad in ({5: 1.0}, {0: -1.0}, {}):
        with pytest.raises(UserError, match="give a topic"):
            topic_mixture(3, mixture=bad)


@pytest.fixture(scope="module")
def server(exports):
    import tensorflow as tf

    _, out = exports
    PredictHandler.models = {name: tf.saved_model.load(str(path))
                             for name, (_, path) in out.items()}
    httpd = HTTPServer(("127.0.0.1", 0), PredictHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", PredictHandler.models
    httpd.shutdown()


def test_client_against_the_exports(server):
    url, models = server
    tcnlm = ServingClient(url, "tcnlm")
    scored = tcnlm.score(["w1 w2", "qqq"], ["w3 w4\tw5", ""])
    assert scored["num_tokens"] == [3, 2] and len(scored["perplexity"]) == 2
    assert scored["tokens"][1] == ["<unk>", "<eos>", ""]
    assert len(tcnlm.score(["w1 w2"])["log_likelihood"]) == 1     # serving_default
    words = tcnlm.next_words(["w1"], k=3)
    assert len(words["words"][0]) == 3 and words["probabilities"][0] == sorted(
        words["probabilities"][0], reverse=True)
    topics = np.array(tcnlm.infer_topics(["w1 w2\tw3", ""])["topics"])
    assert topics.shape == (2, 4) and np.allclose(topics.sum(axis=1), 1, atol=1e-5)
    a = tcnlm.generate(topic=1, num_topics=4, seed=3)
    assert a == tcnlm.generate(topic=1, num_topics=4, seed=3)       # seeded
    assert len(tcnlm.generate(topics=[[0.5, 0.5, 0, 0]] * 2, temperature=0)["sentences"]) == 2
    assert len(tcnlm.generate_from_document(["w1 w2"], seed=1)["sentences"]) == 1
    assert len(ServingClient(url, "lstm").generate(num_sentences=2, seed=1)["sentences"]) == 2


def test_client_reports_serving_errors(server):
    url, _ = server
    with pytest.raises(ServingError, match="refused the next_words request"):
        ServingClient(url, "lstm").predict("next_words", {"context": ["a"]})
    with pytest.raises(ServingError, match="cannot reach TF Serving"):
        ServingClient("http://127.0.0.1:9", "m", timeout=5).score(["a"])


def test_cli_prints_the_answer(server):
    url, _ = server
    result = subprocess.run([sys.executable, "-m", "evaluate.serving_client", "--url", url,
                             "--model", "tcnlm", "topics", "w1 w2"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["topics"][0]) == 4


# ----------------------------------------------------------------- the serving docs
def _serving_docs() -> str:
    return (REPO_ROOT / "docs" / "serving.md").read_text(encoding="utf-8")


def _signature_defs(text: str, num_topics: int) -> dict:
    """``saved_model_cli show --all`` text -> {signature: {(in/out, name): (dtype, shape)}},
    the topic count written as T."""
    defs: dict = {}
    current = None
    for block in re.split(r"(?=signature_def\[')", text):
        name = re.match(r"signature_def\['([^']+)'\]", block)
        if not name or name.group(1).startswith("__"):
            continue
        current = defs.setdefault(name.group(1), {})
        for kind, key, dtype, shape in re.findall(
                r"(input|output)s\['([^']+)'\] tensor_info:\s+dtype: (\w+)\s+shape: (\S+)",
                block):
            shape = re.sub(rf"\b{num_topics}\b", "T", shape)
            current[(kind, key)] = (dtype, shape)
    return defs


def test_serving_docs_match_saved_model_cli(exports):
    """docs/serving.md's saved_model_cli listing has the signatures, names, dtypes and shapes
    that saved_model_cli prints for a TCNLM export, and every curl example names a real
    signature with exactly its inputs; every signature has a curl example."""
    _, out = exports
    cli = REPO_ROOT / ".venv" / "bin" / "saved_model_cli"
    command = [str(cli)] if cli.exists() else [sys.executable, "-m",
                                               "tensorflow.python.tools.saved_model_cli"]
    shown = subprocess.run(command + ["show", "--all", "--dir", str(out["tcnlm"][1])],
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    actual = _signature_defs(shown.stdout, num_topics=4)
    section = _serving_docs()
    listing = re.search(r"<!-- saved-model-cli -->\s*```\w*\n(.*?)```", section, re.S)
    assert listing, "docs/serving.md lost its saved_model_cli listing"
    documented = _signature_defs(listing.group(1), num_topics=50)
    assert documented == actual
    examples = re.findall(r"-d '(\{.*?\})'", section, re.S)
    used = set()
    for example in examples:
        body = json.loads(example)
        signature = body["signature_name"]
        assert signature in actual, signature
        inputs = {key for kind, key in actual[signature] if kind == "input"}
        assert set(body["inputs"]) == inputs, signature
        used.add(signature)
    assert used == set(actual)
