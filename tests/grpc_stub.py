"""A local stand-in for TF Serving's gRPC ``PredictionService`` that runs real exports (used
by the gRPC client's tests): TF Serving itself is not installable here."""
from __future__ import annotations

from concurrent import futures

import grpc
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc


class PredictServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """``Predict`` as TF Serving answers it: the request's TensorProtos, each of its input's
    dtype, exactly the signature's inputs, run through the loaded SavedModel's signature
    (``models``: model name -> ``tf.saved_model.load`` result); the outputs as TensorProtos.
    Any failure is an INVALID_ARGUMENT status with the error's first line."""

    def __init__(self, models: dict):
        self.models = models

    def Predict(self, request: predict_pb2.PredictRequest, context) -> predict_pb2.PredictResponse:
        try:
            outputs = self._run(request)
        except Exception as err:   # noqa: BLE001 - TF Serving answers every failure this way
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err).splitlines()[0])
        response = predict_pb2.PredictResponse()
        response.model_spec.CopyFrom(request.model_spec)
        for name, value in outputs.items():
            response.outputs[name].CopyFrom(tf.make_tensor_proto(value.numpy()))
        return response

    def _run(self, request: predict_pb2.PredictRequest) -> dict[str, tf.Tensor]:
        """The signature's outputs for the request; raises on a request TF Serving refuses."""
        model = self.models[request.model_spec.name]
        fn = model.signatures[request.model_spec.signature_name or "serving_default"]
        specs = fn.structured_input_signature[1]
        if set(request.inputs) != set(specs):
            raise ValueError(f"inputs {sorted(request.inputs)} != {sorted(specs)}")
        for name, proto in request.inputs.items():
            if proto.dtype != specs[name].dtype.as_datatype_enum:
                raise ValueError(f"input {name}: expects {specs[name].dtype.name}, got "
                                 f"{tf.dtypes.as_dtype(proto.dtype).name}")
        return fn(**{name: tf.constant(tf.make_ndarray(proto))
                     for name, proto in request.inputs.items()})


def serve(models: dict) -> tuple[str, grpc.Server]:
    """Start the stand-in on a free local port for ``models``: its ``HOST:PORT`` and the
    server (``server.stop(None)`` ends it)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictServicer(models), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return f"127.0.0.1:{port}", server
