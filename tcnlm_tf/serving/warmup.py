"""TF Serving's warm-up requests for an export: ``assets.extra/tf_serving_warmup_requests``.

TF Serving reads this file of a version it loads and answers every request in it before the
version serves, so the first real request of each signature does not pay for the graph's
first run. The file is a TFRecord file of ``tensorflow_serving.apis.prediction_log_pb2
.PredictionLog`` records, one per signature of the export, each a ``PredictRequest``: the
model's name, the signature's name and a batch of one row of sample inputs. The requests are
built from each signature function's input signature and a value for each input name
(:data:`TEXT_INPUTS`, ``topics``, :data:`SCALAR_SAMPLES`), so a signature whose input has no
sample value fails the export instead of going without warm-up.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

#: where the warm-up file goes inside a version directory (TF Serving's fixed name)
WARMUP_FILE = Path("assets.extra") / "tf_serving_warmup_requests"
#: the inputs that take texts (string [B]): each gets one short text of the run's words
TEXT_INPUTS = ("sentences", "documents", "context", "prompts")
#: the value of each scalar input: the cheapest request (one next word, one greedy sentence
#: from seed 0, no top-k or top-p cut, no beam search, one word per topic)
SCALAR_SAMPLES = {"k": 1, "seed": 0, "temperature": 0.0, "num_sentences": 1, "top_k": 0,
                  "top_p": 1.0, "beam_width": 0, "top_n": 1}


def sample_text(words: Iterable[str], specials: Iterable[str], length: int = 4) -> str:
    """The first ``length`` of ``words`` that are not in ``specials``, joined by spaces: a
    short text of the run's own vocabulary (``""`` for a vocabulary of specials only)."""
    specials = set(specials)
    return " ".join([word for word in words if word not in specials][:length])


def sample_value(name: str, spec: tf.TensorSpec, text: str) -> Any:
    """The warm-up value of input ``name`` (``spec``: its TensorSpec), a batch of one:
    ``[text]`` for a text input [B], one uniform row ``[[1/T] * T]`` for ``topics`` [B, T],
    the :data:`SCALAR_SAMPLES` entry for a scalar input []; ``None`` for any other name."""
    if name in TEXT_INPUTS:
        return [text]
    if name == "topics":
        num_topics = spec.shape[-1]
        return [[1.0 / num_topics] * num_topics]
    return SCALAR_SAMPLES.get(name)


def warmup_request(model_name: str, signature: str, specs: Iterable[tf.TensorSpec],
                   text: str) -> predict_pb2.PredictRequest:
    """The ``PredictRequest`` of ``signature`` whose inputs are ``specs`` (its function's
    input signature, each TensorSpec named): every input's :func:`sample_value` as a
    TensorProto of the input's dtype. Raises ``ValueError`` naming the signature and input
    when an input has no sample value."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature
    for spec in specs:
        value = sample_value(spec.name, spec, text)
        if value is None:
            raise ValueError(
                f"signature {signature!r} has an input {spec.name!r} with no warm-up value: "
                "add one to TEXT_INPUTS or SCALAR_SAMPLES in tcnlm_tf/serving/warmup.py")
        request.inputs[spec.name].CopyFrom(tf.make_tensor_proto(value, dtype=spec.dtype))
    return request


def write_warmup_requests(version_dir: Path, model_name: str,
                          signatures: dict[str, tf.types.experimental.PolymorphicFunction],
                          text: str) -> Path:
    """Write ``version_dir/assets.extra/tf_serving_warmup_requests``: one ``PredictionLog``
    per entry of ``signatures`` (name -> ``tf.function`` with an input signature, as
    :meth:`tcnlm_tf.serving.module.ServingModule.signatures` gives them), in their order,
    each the :func:`warmup_request` of that signature for model ``model_name`` with texts
    ``text``. Returns the file's path."""
    path = version_dir / WARMUP_FILE
    path.parent.mkdir(exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for signature, function in signatures.items():
            request = warmup_request(model_name, signature, function.input_signature, text)
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
    return path
