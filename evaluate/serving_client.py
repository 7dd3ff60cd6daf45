"""A small client for a model exported by ``python -m train.export`` and served by TF Serving.

It speaks TF Serving's REST API (port 8501): ``POST /v1/models/<name>[/versions/<v>]:predict``
with a JSON body in the columnar ("inputs") format, which the export's scalar inputs (``k``,
``seed``, ``temperature``) need::

    {"signature_name": "score", "inputs": {"sentences": ["the dow fell"], "documents": [""]}}

and an answer ``{"outputs": {name: value, ...}}`` (or ``{"outputs": value}`` when the signature
has one output), or ``{"error": message}``. Only the standard library is used, so the client
runs anywhere::

    from evaluate.serving_client import ServingClient
    client = ServingClient("http://localhost:8501", "synthetic-tcnlm")
    client.score(["his zanovi could"])["perplexity"]
    client.next_words(["his"], k=5)
    client.infer_topics(["his zanovi could\\tan tazuru"])
    client.generate(topic=3, num_topics=50, seed=1, temperature=0.75)

The methods (which signature, which inputs) are :class:`evaluate.serving_signatures
.SignatureClient`'s, shared with the gRPC client :class:`evaluate.grpc_client
.GrpcServingClient` (port 8500), which answers them the same way.

From the shell: ``python -m evaluate.serving_client --model synthetic-tcnlm score "his zanovi"``
(``--grpc localhost:8500``: through the gRPC client).
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

from evaluate.serving_signatures import ServingError, SignatureClient, refused
from tcnlm_tf.arguments import finite_float, integer
from tcnlm_tf.errors import exit_on_user_error

#: output names of signatures that have only one (TF Serving then drops the name)
SINGLE_OUTPUT = {"infer_topics": "topics"}


def predict_url(base_url: str, model: str, version: int | None = None) -> str:
    """``<base>/v1/models/<model>[/versions/<version>]:predict``."""
    url = f"{base_url.rstrip('/')}/v1/models/{model}"
    if version is not None:
        url += f"/versions/{int(version)}"
    return url + ":predict"


def build_request(signature: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of a predict call in the columnar format (lists and scalars as given)."""
    return {"signature_name": signature, "inputs": inputs}


def parse_response(signature: str, body: dict[str, Any]) -> dict[str, Any]:
    """``{output name: value}`` from a predict answer; raises :class:`ServingError` on
    ``{"error": ...}``."""
    if "error" in body:
        raise refused(signature, str(body["error"]))
    if "outputs" not in body:
        raise ServingError(f"unexpected answer to {signature}: no 'outputs' in {list(body)}")
    outputs = body["outputs"]
    if not isinstance(outputs, dict):
        name = SINGLE_OUTPUT.get(signature)
        if name is None:
            raise ServingError(f"{signature} answered one unnamed output; expected a dict")
        outputs = {name: outputs}
    return outputs


class ServingClient(SignatureClient):
    """Calls the export's signatures on a TF Serving REST endpoint (port 8501); the methods
    are :class:`~evaluate.serving_signatures.SignatureClient`'s."""

    def __init__(self, base_url: str, model: str, version: int | None = None,
                 timeout: float = 60.0):
        self.url = predict_url(base_url, model, version)
        self.timeout = timeout

    def predict(self, signature: str, inputs: dict[str, Any]) -> dict[str, Any]:
        """POST ``inputs`` to ``signature`` in the columnar format; its outputs by name
        (:func:`parse_response`)."""
        data = json.dumps(build_request(signature, inputs)).encode()
        request = urllib.request.Request(self.url, data=data,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as err:      # TF Serving sends {"error": ...} with 4xx
            try:
                body = json.loads(err.read())
            except ValueError:
                raise ServingError(f"{self.url}: HTTP {err.code} {err.reason}") from None
        except (urllib.error.URLError, OSError) as err:
            raise ServingError(f"cannot reach TF Serving at {self.url} ({err}); is the "
                               "container running with -p 8501:8501?") from None
        return parse_response(signature, body)


def host_port(text: str) -> str:
    """A gRPC target ``HOST:PORT`` with a port from 1 to 65,535 (``--grpc``)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65_535:
        raise argparse.ArgumentTypeError(
            f"expected HOST:PORT with a port from 1 to 65,535, got {text!r}")
    return text


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m evaluate.serving_client", allow_abbrev=False,
                                description="Call a TF Serving model exported by train.export "
                                            "and print the JSON answer.")
    server = p.add_mutually_exclusive_group()
    server.add_argument("--url", default="http://localhost:8501", help="REST base URL")
    server.add_argument("--grpc", metavar="HOST:PORT", type=host_port,
                        help="call TF Serving's gRPC API at HOST:PORT (the server's --port, "
                             "8500 in the container) instead of the REST --url")
    p.add_argument("--model", required=True, help="model name (the saved_models/<name>)")
    p.add_argument("--version", type=integer(1), help="model version (default: the latest)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("score", help="log-likelihood and perplexity of sentences")
    s.add_argument("sentences", nargs="+")
    s.add_argument("--document", help="context document for every sentence")
    n = sub.add_parser("next-words", help="the k most probable next words")
    n.add_argument("context", nargs="+")
    n.add_argument("-k", type=integer(1), default=10)
    t = sub.add_parser("topics", help="topic proportions of documents")
    t.add_argument("documents", nargs="+")
    g = sub.add_parser("generate", help="a sentence for a topic (topic models) or not")
    g.add_argument("--topic", type=integer(0))
    g.add_argument("--num-topics", type=integer(1))
    g.add_argument("--num-sentences", type=integer(1))
    g.add_argument("--seed", type=integer(0), default=0)
    g.add_argument("--temperature", type=finite_float, default=0.75)
    args = p.parse_args(argv)
    if args.grpc is not None:
        from evaluate.grpc_client import GrpcServingClient   # grpc and TensorFlow: only here
        client = GrpcServingClient(args.grpc, args.model, args.version)
    else:
        client = ServingClient(args.url, args.model, args.version)
    if args.command == "score":
        documents = None if args.document is None else [args.document] * len(args.sentences)
        result = client.score(args.sentences, documents)
    elif args.command == "next-words":
        result = client.next_words(args.context, k=args.k)
    elif args.command == "topics":
        result = client.infer_topics(args.documents)
    else:
        result = client.generate(topic=args.topic, num_topics=args.num_topics,
                                 num_sentences=args.num_sentences, seed=args.seed,
                                 temperature=args.temperature)
    json.dump(result, sys.stdout, indent=1)
    print()
    return result


if __name__ == "__main__":
    main()
