"""A gRPC client for a model exported by ``python -m train.export`` and served by TF Serving.

It calls TF Serving's gRPC API (port 8500), ``tensorflow.serving.PredictionService/Predict``
with a ``PredictRequest`` of TensorProtos, and has the REST client's methods with the same
answers (:class:`evaluate.serving_signatures.SignatureClient`: lists of numbers and decoded
strings), so either can take the other's place::

    from evaluate.grpc_client import GrpcServingClient
    client = GrpcServingClient("localhost:8500", "synthetic-tcnlm")
    client.score(["his zanovi could"])["perplexity"]
    client.generate(topic=3, num_topics=50, seed=1, prompts=["his"], top_p=0.9)

It needs ``grpcio``, ``tensorflow-serving-api`` and TensorFlow (which builds and reads the
TensorProtos), where the REST client needs only the standard library. From the shell:
``python -m evaluate.serving_client --grpc localhost:8500 --model synthetic-tcnlm ...``.
"""
from __future__ import annotations

from typing import Any

import grpc
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from evaluate.serving_signatures import ServingError, SignatureClient, refused

#: the dtype of each input of the export's signatures (:mod:`tcnlm_tf.serving.module`), by
#: name: TF Serving refuses a TensorProto of another dtype than its input's (an input not
#: named here is sent with the dtype TensorFlow infers from its value)
INPUT_DTYPES = {"sentences": tf.string, "documents": tf.string, "context": tf.string,
                "prompts": tf.string, "topics": tf.float32, "k": tf.int32, "seed": tf.int64,
                "temperature": tf.float32, "num_sentences": tf.int32, "top_k": tf.int32,
                "top_p": tf.float32, "beam_width": tf.int32, "top_n": tf.int32}
#: the status codes of a server that did not answer (not running, or not in time)
UNREACHED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def predict_request(model: str, signature: str, inputs: dict[str, Any],
                    version: int | None = None) -> predict_pb2.PredictRequest:
    """The ``PredictRequest`` of ``signature`` of ``model`` (``version``: that version, else
    the latest): each of ``inputs`` (name -> list or scalar) as a TensorProto of its
    :data:`INPUT_DTYPES` dtype and the value's shape."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = int(version)
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value, dtype=INPUT_DTYPES.get(name)))
    return request


def _decoded(value: Any) -> Any:
    """``value`` (a nested list or a scalar) with every ``bytes`` decoded as UTF-8."""
    if isinstance(value, list):
        return [_decoded(item) for item in value]
    return value.decode() if isinstance(value, bytes) else value


def response_outputs(response: predict_pb2.PredictResponse) -> dict[str, Any]:
    """``{output name: value}`` of a ``PredictResponse``: each TensorProto as a nested
    Python list of its shape (a scalar for shape []), strings decoded, as the REST API's
    JSON answer gives them."""
    return {name: _decoded(tf.make_ndarray(proto).tolist())
            for name, proto in response.outputs.items()}


class GrpcServingClient(SignatureClient):
    """Calls the export's signatures through TF Serving's gRPC API at ``target``
    (``HOST:PORT``); the methods are :class:`~evaluate.serving_signatures.SignatureClient`'s.
    :meth:`close` closes the channel."""

    def __init__(self, target: str, model: str, version: int | None = None,
                 timeout: float = 60.0):
        self.target, self.model, self.version, self.timeout = target, model, version, timeout
        self.channel = grpc.insecure_channel(target)
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)

    def predict(self, signature: str, inputs: dict[str, Any]) -> dict[str, Any]:
        """``Predict`` of ``inputs`` (:func:`predict_request`); its outputs by name
        (:func:`response_outputs`). A server that does not answer, or an error status
        (INVALID_ARGUMENT for a bad input, NOT_FOUND for an unknown model), or inputs that
        make no tensor, raise :class:`~evaluate.serving_signatures.ServingError`."""
        try:
            request = predict_request(self.model, signature, inputs, self.version)
        except (TypeError, ValueError) as err:    # e.g. rows of different lengths
            raise ServingError(f"cannot send the {signature} request: "
                               f"{str(err).splitlines()[0]}") from None
        try:
            response = self.stub.Predict(request, timeout=self.timeout)
        except grpc.RpcError as err:
            details = err.details() or err.code().name
            if err.code() in UNREACHED:
                raise ServingError(
                    f"cannot reach TF Serving's gRPC API at {self.target} "
                    f"({details.splitlines()[0]}); is the container running with "
                    "-p 8500:8500?") from None
            raise refused(signature, details) from None
        return response_outputs(response)

    def close(self) -> None:
        """Close the channel; the client makes no calls after it."""
        self.channel.close()
