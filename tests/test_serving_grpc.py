"""evaluate.grpc_client and the exports' TF Serving warm-up requests: the gRPC client,
against a local stand-in for TF Serving's gRPC PredictionService (tests/grpc_stub.py),
answers every method as the REST client does against the REST stand-in
(tests/serving_stub.py), both running the same real exports; every export's
``assets.extra/tf_serving_warmup_requests`` holds one PredictLog per signature with its
inputs, and the served exports' requests are answered; refused, unsendable and unanswered
requests are ServingErrors."""
import json
import threading
from http.server import HTTPServer

import pytest

from evaluate.grpc_client import GrpcServingClient, predict_request
from evaluate.serving_client import ServingClient, ServingError, main
from evaluate.serving_signatures import refused
from tcnlm_tf.data.vocab import LM_SPECIALS
from tcnlm_tf.errors import UserError
from tcnlm_tf.serving.warmup import WARMUP_FILE, sample_text, write_warmup_requests
from tests.serving_stub import PredictHandler

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

#: the exports both stand-ins serve: a topic model and one without topics
SERVED = ("tcnlm", "lstm")


@pytest.fixture(scope="module")
def servers(exports):
    """Both stand-ins serving :data:`SERVED`: ``(REST base URL, gRPC HOST:PORT, {name:
    loaded SavedModel})``."""
    import tensorflow as tf

    from tests.grpc_stub import serve

    _, out = exports
    models = {name: tf.saved_model.load(str(out[name][1])) for name in SERVED}
    httpd = HTTPServer(("127.0.0.1", 0), type("Handler", (PredictHandler,), {"models": models}))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    target, grpc_server = serve(models)
    yield f"http://127.0.0.1:{httpd.server_address[1]}", target, models
    httpd.shutdown()
    grpc_server.stop(None)


@pytest.fixture
def clients(servers):
    """``name -> (REST client, gRPC client)`` of a served model; closes the gRPC ones."""
    url, target, _ = servers
    opened = []

    def both(name: str) -> tuple[ServingClient, GrpcServingClient]:
        opened.append(GrpcServingClient(target, name))
        return ServingClient(url, name), opened[-1]

    yield both
    for client in opened:
        client.close()


def _outputs(models, name: str, signature: str) -> set[str]:
    return set(models[name].signatures[signature].structured_outputs)


def test_grpc_client_answers_as_the_rest_client(servers, clients):
    """Every method, on a topic model and on one without topics: the same outputs, with the
    same values, from both clients, and exactly the signature's outputs."""
    _, _, models = servers
    calls = {"tcnlm": [
        ("serving_default", "score", (["w1 w2", "qqq"],), {}),
        ("score", "score", (["w1 w2", "qqq"], ["w3 w4\tw5", ""]), {}),
        ("next_words", "next_words", (["w1", "w2 w3"],), {"k": 3}),
        ("infer_topics", "infer_topics", (["w1 w2\tw3", ""],), {}),
        ("generate", "generate", (), {"topic": 1, "num_topics": 4, "seed": 3}),
        ("generate", "generate", ([[0.5, 0.5, 0, 0]] * 2,), {"temperature": 0}),
        ("generate_from_document", "generate_from_document", (["w1 w2", ""],), {"seed": 1}),
    ], "lstm": [
        ("serving_default", "score", (["w1 w2"],), {}),
        ("score", "score", (["w1 w2"], ["w3"]), {}),
        ("next_words", "next_words", ([""],), {"k": 2}),
        ("generate", "generate", (), {"num_sentences": 2, "seed": 1}),
    ]}
    for name, made in calls.items():
        rest, grpc = clients(name)
        for signature, method, args, kwargs in made:
            expected = getattr(rest, method)(*args, **kwargs)
            assert getattr(grpc, method)(*args, **kwargs) == expected, (name, signature)
            assert set(expected) == _outputs(models, name, signature), (name, signature)
    rest, grpc = clients("tcnlm")
    scored = grpc.score(["w1 w2", "qqq"], ["w3 w4\tw5", ""])
    assert scored["num_tokens"] == [3, 2] and scored["tokens"][1] == ["<unk>", "<eos>", ""]
    assert len(grpc.generate(topics=[[0.5, 0.5, 0, 0]] * 2)["sentences"]) == 2


def test_sampled_generation_through_both_clients(servers, clients):
    """``prompts``, ``top_k``, ``top_p`` (and ``beam_width``) call the generate_sampled
    signatures: the same answers from both clients, each sentence starting with its
    prompt."""
    _, _, models = servers
    rest, _ = clients("tcnlm")
    words = rest.next_words([""], k=3)["words"][0]      # real words of the vocabulary
    prompts = [words[0], f"{words[1]} {words[2]}"]
    calls = {"tcnlm": [
        ("generate_sampled", "generate", prompts,
         {"topic": 2, "num_topics": 4, "seed": 1, "prompts": prompts, "top_k": 5}),
        ("generate_sampled", "generate", [""],
         {"topics": [[0.25] * 4], "seed": 2, "temperature": 1.0, "top_p": 0.9}),
        ("generate_sampled_from_document", "generate_from_document", prompts,
         {"documents": [" ".join(words)] * 2, "seed": 1, "prompts": prompts, "beam_width": 2}),
    ], "lstm": [
        ("generate_sampled", "generate", prompts,
         {"prompts": prompts, "seed": 1, "top_p": 0.5}),
        ("generate_sampled", "generate", ["", ""], {"num_sentences": 2, "seed": 1, "top_k": 3}),
    ]}
    for name, made in calls.items():
        rest, grpc = clients(name)
        for signature, method, starts, kwargs in made:
            expected = getattr(rest, method)(**kwargs)
            assert getattr(grpc, method)(**kwargs) == expected, (name, kwargs)
            assert set(expected) == _outputs(models, name, signature), (name, signature)
            assert len(expected["sentences"]) == len(starts), (name, kwargs)
            for prompt, sentence in zip(starts, expected["sentences"]):
                assert sentence.split()[:len(prompt.split())] == prompt.split(), sentence


def _signature_defs(version_dir):
    """The export's signatures as TF Serving reads them: name -> SignatureDef."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel.FromString((version_dir / "saved_model.pb").read_bytes())
    return {name: definition for name, definition in saved.meta_graphs[0].signature_def.items()
            if not name.startswith("__")}


def _warmup_logs(version_dir) -> list:
    """The export's warm-up file read back: its PredictionLog records, in order."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = version_dir / WARMUP_FILE
    return [prediction_log_pb2.PredictionLog.FromString(record.numpy())
            for record in tf.data.TFRecordDataset(str(path))]


def test_every_export_has_one_warmup_request_per_signature(exports, servers):
    """Each export's warm-up file parses as PredictLogs of requests for that model, exactly
    one per signature of the export, each with exactly the signature's inputs in their
    dtypes and shapes (T columns of ``topics``); the requests of the served exports, sent
    to the gRPC stand-in as they are, are answered with the signature's outputs."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    _, out = exports
    _, target, models = servers
    for name, (_, version_dir) in out.items():
        defs = _signature_defs(version_dir)
        logs = _warmup_logs(version_dir)
        assert [log.WhichOneof("log_type") for log in logs] == ["predict_log"] * len(logs)
        requests = [log.predict_log.request for log in logs]
        assert sorted(r.model_spec.signature_name for r in requests) == sorted(defs), name
        for request in requests:
            assert request.model_spec.name == name
            inputs = defs[request.model_spec.signature_name].inputs
            assert set(request.inputs) == set(inputs), (name, request.model_spec)
            for key, proto in request.inputs.items():
                assert proto.dtype == inputs[key].dtype, (name, key)
                shape = [d.size for d in proto.tensor_shape.dim]
                wanted = [d.size for d in inputs[key].tensor_shape.dim]
                assert len(shape) == len(wanted) and all(
                    w in (-1, s) for s, w in zip(shape, wanted)), (name, key, shape, wanted)
    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        for name in SERVED:
            for log in _warmup_logs(out[name][1]):
                request = log.predict_log.request
                response = stub.Predict(request, timeout=60)
                assert set(response.outputs) == _outputs(
                    models, name, request.model_spec.signature_name), request.model_spec


def test_warmup_text_and_an_input_without_a_sample_value(tmp_path):
    """The sample text is the run's first non-special words; a signature with an input the
    sample table does not know fails the export, naming both."""
    import tensorflow as tf

    assert sample_text(["<pad>", "<unk>", "<eos>", "a", "<eos>", "b", "c", "d", "e"],
                       LM_SPECIALS) == "a b c d"
    odd = tf.function(lambda mystery: mystery,
                      input_signature=[tf.TensorSpec([], tf.int32, name="mystery")])
    with pytest.raises(ValueError, match="signature 'odd' has an input 'mystery'"):
        write_warmup_requests(tmp_path, "m", {"odd": odd}, "a b")


def test_grpc_errors_are_serving_errors(servers, clients):
    """A refused request (a bad value, a missing input, an unknown model, values that make
    no tensor) and an unreachable server are ServingErrors, a refusal worded as the REST
    client's and on one line (the server's message cut at its first line)."""
    rest, grpc = clients("lstm")
    with pytest.raises(ServingError) as from_rest:
        rest.next_words(["a"], k=0)
    with pytest.raises(ServingError, match="refused the next_words request: .") as from_grpc:
        grpc.next_words(["a"], k=0)
    assert str(from_grpc.value) == str(from_rest.value)
    with pytest.raises(ServingError, match="refused the next_words request: inputs"):
        grpc.predict("next_words", {"context": ["a"]})
    _, unknown = clients("no-such-model")
    with pytest.raises(ServingError, match="refused the serving_default request"):
        unknown.score(["a"])
    with pytest.raises(ServingError, match="cannot send the generate request: "):
        grpc.predict("generate", {"topics": [[1.0], [0.5, 0.5]], "seed": 0,
                                  "temperature": 0.0})
    with pytest.raises(UserError, match="2 prompts for 1 sentences"):
        grpc.generate(topics=[[1.0, 0, 0, 0]], prompts=["a", "b"])
    with pytest.raises(UserError, match="generate needs"):
        grpc.generate(seed=1)
    with pytest.raises(ServingError, match="cannot reach TF Serving's gRPC API at 127.0.0.1:9"):
        GrpcServingClient("127.0.0.1:9", "m", timeout=5).score(["a"])
    assert str(refused("score", "bad input\n\tat node x")) == (
        "TF Serving refused the score request: bad input")


def test_request_dtypes_and_version():
    """Each input goes as its signature's dtype (TF Serving refuses another); a version
    picks that version."""
    import tensorflow as tf

    request = predict_request("m", "generate_sampled", {
        "topics": [[1, 0]], "prompts": ["a"], "seed": 1, "temperature": 1, "top_k": 0,
        "top_p": 1, "beam_width": 0}, version=3)
    assert request.model_spec.version.value == 3
    assert {k: tf.dtypes.as_dtype(v.dtype) for k, v in request.inputs.items()} == {
        "topics": tf.float32, "prompts": tf.string, "seed": tf.int64, "temperature": tf.float32,
        "top_k": tf.int32, "top_p": tf.float32, "beam_width": tf.int32}
    assert not predict_request("m", "score", {"sentences": []}).model_spec.HasField("version")


def test_cli_over_grpc(servers, capsys):
    """``--grpc HOST:PORT`` prints what ``--url`` prints; a malformed target, or both
    options, is argparse's one-line error."""
    url, target, _ = servers
    over_grpc = main(["--grpc", target, "--model", "tcnlm", "topics", "w1 w2"])
    assert json.loads(capsys.readouterr().out) == over_grpc
    assert over_grpc == main(["--url", url, "--model", "tcnlm", "topics", "w1 w2"])
    assert len(over_grpc["topics"][0]) == 4
    for argv, message in ((["--grpc", "localhost"], "expected HOST:PORT"),
                          (["--grpc", "h:1", "--url", url], "not allowed with")):
        with pytest.raises(SystemExit) as stopped:
            main(argv + ["--model", "tcnlm", "topics", "w1"])
        assert stopped.value.code == 2 and message in capsys.readouterr().err
