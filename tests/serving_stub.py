"""A local stand-in for TF Serving's REST predict endpoint that runs real exports (used by
the serving-client tests and :mod:`tests.fuzzing`)."""
import json
import re
from http.server import BaseHTTPRequestHandler


class PredictHandler(BaseHTTPRequestHandler):
    """``POST /v1/models/<name>:predict`` in the columnar format, as TF Serving answers it:
    named outputs as lists, one unnamed output when the signature has only one, and
    ``{"error": ...}`` with status 400 for a bad request."""

    models: dict = {}

    def log_message(self, *args):
        pass

    def do_POST(self):
        import tensorflow as tf

        match = re.fullmatch(r"/v1/models/([^/:]+)(?:/versions/\d+)?:predict", self.path)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        try:
            model = self.models[match.group(1)]
            fn = model.signatures[body.get("signature_name", "serving_default")]
            specs = fn.structured_input_signature[1]
            if set(body["inputs"]) != set(specs):
                raise ValueError(f"inputs {sorted(body['inputs'])} != {sorted(specs)}")
            args = {k: tf.constant(v, dtype=specs[k].dtype) for k, v in body["inputs"].items()}
            outputs = {k: v.numpy().tolist() for k, v in fn(**args).items()}
            outputs = {k: _decode(v) for k, v in outputs.items()}
            answer = {"outputs": next(iter(outputs.values())) if len(outputs) == 1 else outputs}
            status = 200
        except Exception as err:   # noqa: BLE001 - TF Serving answers every failure this way
            answer, status = {"error": str(err).splitlines()[0]}, 400
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value.decode() if isinstance(value, bytes) else value
