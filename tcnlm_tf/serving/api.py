"""The Python API: ``tcnlm_tf.load(path)`` and the :class:`LoadedModel` it returns.

``path`` may be a run directory (``runs/<name>``, written by ``python -m train.run``), a
preset directory (``python -m train.preset``, :mod:`tcnlm_tf.serving.preset`), an exported
SavedModel version directory (``saved_models/<name>/<version>``, written by
``python -m train.export``) or the model directory above its versions (the newest is
loaded). Every method goes through the functions of the export: for a run or a preset those
of :class:`~tcnlm_tf.serving.module.ServingModule` on the model in memory, for an export its
signatures, so the three give the same numbers, and the same as the commands
(``evaluate.perplexity``, ``evaluate.score``, ``evaluate.topics``)::

    import tcnlm_tf
    model = tcnlm_tf.load("runs/mycorpus-tcnlm")
    model.perplexity("data/mycorpus/test.txt")
    model.score(["the market fell"], documents=["stocks fell sharply\\tthe dow lost"])
    model.next_words("the market", k=5)
    model.generate("the market", sampler=tcnlm_tf.samplers.TopPSampler(p=0.9), topic=3)
    model.infer_topics(["stocks fell sharply\\tthe dow lost"])
    model.topics(top_n=10)

Text is in the corpus format: tokens separated by spaces, tokenised and cased as the
training corpus; a document is its sentences separated by TABs (or a list of sentences).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from tcnlm_tf.data.corpus import Document, parse_document, read_corpus_file
from tcnlm_tf.errors import UserError
from tcnlm_tf.samplers import Sampler, get_sampler
from tcnlm_tf.serving.mixtures import topic_mixture
from tcnlm_tf.serving.scoring import corpus_score

#: what ``generate`` conditions on when it is given nothing: an empty document
NO_DOCUMENT = ""


def _text(document: str | Sequence[str]) -> str:
    """A document as the export reads it: its sentences joined by TABs."""
    return document if isinstance(document, str) else "\t".join(document)


def _rows(value: str | Sequence[str]) -> tuple[list[str], bool]:
    """``value`` as a list of rows, and whether one row was given as a plain string."""
    return ([value], True) if isinstance(value, str) else (list(value), False)


class LoadedModel:
    """A trained model and its vocabularies, loaded by :func:`load`.

    ``functions``: signature name -> a callable taking the signature's inputs as keyword
    arguments (tensors) and returning its outputs; ``specs``: signature name -> {input
    name: ``tf.TensorSpec``}. ``model_type`` is the ``--model`` name, ``context_kind`` how
    the ``documents`` inputs are read (see
    :meth:`tcnlm_tf.serving.module.ServingModule.context_rule`), ``num_topics`` the topic
    count (None for a model without topics). ``run`` is the loaded run (None for an
    export), which :meth:`save_preset` needs."""

    def __init__(self, source: Path, functions: dict[str, Callable[..., dict]],
                 specs: dict[str, dict[str, Any]], model_type: str, context_kind: str,
                 num_topics: int | None, run=None):
        self.source = source
        self._functions = functions
        self._specs = specs
        self.model_type = model_type
        self.context_kind = context_kind
        self.num_topics = num_topics
        self.run = run

    def __repr__(self) -> str:
        topics = f", {self.num_topics} topics" if self.num_topics else ""
        return f"<LoadedModel {self.model_type}{topics} from {self.source}>"

    @property
    def has_topics(self) -> bool:
        return self.num_topics is not None

    # ---------------------------------------------------------------- plumbing
    def call(self, signature: str, **inputs: Any) -> dict[str, np.ndarray]:
        """Run ``signature`` on ``inputs`` (Python values, converted to its input dtypes);
        its outputs as NumPy arrays (strings decoded)."""
        import tensorflow as tf

        if signature not in self._functions:
            raise UserError(f"{self.source} has no {signature} signature"
                            + ("; re-export the run with `python -m train.export`"
                               if signature.startswith("generate_sampled") else ""))
        specs = self._specs[signature]
        tensors = {name: tf.constant(value, dtype=specs[name].dtype)
                   for name, value in inputs.items()}
        try:
            out = self._functions[signature](**tensors)
        except tf.errors.InvalidArgumentError as error:
            raise UserError(_refusal(error.message)) from None
        return {name: _numpy(value) for name, value in out.items()}

    def _require_topics(self, what: str) -> None:
        if not self.has_topics:
            raise UserError(f"{what} needs a topic model; {self.source} is a "
                            f"--model {self.model_type} model without topics")

    # ------------------------------------------------------------------ scoring
    def score(self, sentences: str | Sequence[str],
              documents: str | Sequence[str | Sequence[str]] | None = None
              ) -> dict[str, np.ndarray]:
        """The ``score`` signature: per sentence ``log_likelihood``, ``perplexity``,
        ``num_tokens``, and per token ``tokens`` and ``token_log_probs`` (natural log).
        ``documents``: each sentence's context document (as the model reads it: see
        ``context_kind``); none by default."""
        rows, _ = _rows(sentences)
        contexts = ([NO_DOCUMENT] * len(rows) if documents is None
                    else [documents] if isinstance(documents, str)
                    else [_text(d) for d in documents])
        return self.call("score", sentences=rows, documents=contexts)

    def perplexity(self, path_or_texts: str | Path | Sequence[str | Document],
                   batch_size: int = 64) -> float:
        """Perplexity of a corpus-format file, or of documents (corpus-format lines, or
        lists of token lists), each sentence scored with the context the model was trained
        with: ``evaluate.perplexity``'s number."""
        return self.corpus_score(path_or_texts, batch_size)["perplexity"]

    def corpus_score(self, path_or_texts: str | Path | Sequence[str | Document],
                     batch_size: int = 64) -> dict[str, float | int | str]:
        """Total ``log_likelihood``, ``tokens``, ``sentences`` and ``perplexity`` of a file or
        of documents (see :meth:`perplexity`)."""
        documents = _documents(path_or_texts)
        return corpus_score(lambda s, c: self.call("score", sentences=s, documents=c),
                            documents, self.context_kind, batch_size)

    def next_words(self, context: str | Sequence[str], k: int = 10,
                   documents: Sequence[str] | None = None):
        """The ``k`` most probable next words after ``context`` (the sentence so far) with
        their probabilities, most probable first: ``[(word, p), ...]`` for one context,
        a list of those for a list."""
        rows, one = _rows(context)
        contexts = [NO_DOCUMENT] * len(rows) if documents is None else [_text(d)
                                                                         for d in documents]
        out = self.call("next_words", context=rows, documents=contexts, k=int(k))
        pairs = [list(zip(words, map(float, p)))
                 for words, p in zip(out["words"].tolist(), out["probabilities"])]
        return pairs[0] if one else pairs

    # --------------------------------------------------------------- generating
    def generate(self, prompts: str | Sequence[str] = "", *,
                 sampler: str | Sampler = "greedy", num: int = 1, topic: int | None = None,
                 mixture: dict[int, float] | Sequence[float] | None = None,
                 document: str | Sequence[str] | None = None, seed: int = 0):
        """Sentences continuing ``prompts`` (each prompt's words then the generated ones,
        at most 40 generated words, ending at ``<eos>``), ``num`` per prompt: a list of
        strings for one prompt, a list of such lists for a list of prompts.

        ``sampler``: a :mod:`tcnlm_tf.samplers` object or name (greedy, random, top_k, top_p,
        beam). A topic model is conditioned on one ``topic`` (its one-hot topic vector),
        a ``mixture`` ({topic: weight} or T weights, normalised) or a ``document`` (the
        context the model reads from it when scoring); with none of them, on an empty
        document, as a model without topics always is. ``seed`` makes sampling repeatable.
        """
        if int(num) < 1:
            raise UserError(f"num={num}: generate at least one sentence per prompt")
        rows, one = _rows(prompts)
        prompt_rows = [p for p in rows for _ in range(int(num))]
        inputs = {"prompts": prompt_rows, "seed": int(seed), **get_sampler(sampler).inputs()}
        given = [name for name, value in (("topic", topic), ("mixture", mixture),
                                          ("document", document)) if value is not None]
        if len(given) > 1:
            raise UserError(f"generate: give one of topic, mixture and document, not "
                            f"{' and '.join(given)}")
        if given and not self.has_topics:
            self._require_topics(f"generate({given[0]}=...)")
        if topic is not None or mixture is not None:
            weights = (dict(enumerate(mixture)) if mixture is not None
                       and not isinstance(mixture, dict) else mixture)
            t = topic_mixture(self.num_topics, topic, weights)
            out = self.call("generate_sampled", topics=[t] * len(prompt_rows), **inputs)
        elif self.has_topics:
            text = NO_DOCUMENT if document is None else _text(document)
            out = self.call("generate_sampled_from_document",
                            documents=[text] * len(prompt_rows), **inputs)
        else:
            out = self.call("generate_sampled", **inputs)
        sentences = out["sentences"].tolist()
        grouped = [sentences[i:i + int(num)] for i in range(0, len(sentences), int(num))]
        return grouped[0] if one else grouped

    # ------------------------------------------------------------------- topics
    def infer_topics(self, documents: str | Sequence[str | Sequence[str]]) -> np.ndarray:
        """Topic proportions of whole documents: [D, T] (one row for one document)."""
        self._require_topics("infer_topics")
        rows = [documents] if isinstance(documents, str) else [_text(d) for d in documents]
        return self.call("infer_topics", documents=rows)["topics"]

    def topics(self, top_n: int = 10) -> list[list[str]]:
        """The ``top_n`` most probable words of every topic (``evaluate.topics``'s lists)."""
        self._require_topics("topics")
        return self.call("topic_words", top_n=int(top_n))["words"].tolist()

    # ------------------------------------------------------------------ presets
    def save_preset(self, directory: str | Path) -> Path:
        """Save the model as a preset directory (see :mod:`tcnlm_tf.serving.preset`);
        returns it."""
        if self.run is None:
            raise UserError(f"{self.source} is an exported SavedModel: make a preset from "
                            "its run directory or from a preset (python -m train.preset)")
        from tcnlm_tf.serving.preset import save_preset
        return save_preset(self.run, Path(directory))


def _refusal(message: str) -> str:
    """The reason in a signature's ``InvalidArgument`` error: the message of the assertion
    that failed (``assertion failed: [<message>] [Condition ...``; the checks' messages name
    the signature), else the error's first line with text."""
    found = re.search(r"assertion failed: \[(.*?)\](?: \[|$)", message, re.M)
    if found:
        return found.group(1).strip()
    lines = [line for line in message.splitlines()
             if line.strip() and not line.startswith("Graph execution error")]
    return lines[0] if lines else message


def _numpy(value) -> np.ndarray:
    array = value.numpy()
    if array.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array) \
            if array.size else array.astype(str)
    return array


def _documents(path_or_texts) -> list[Document]:
    """Documents of a corpus-format file, or of the given corpus-format lines or documents."""
    if isinstance(path_or_texts, (str, Path)):
        documents, _ = read_corpus_file(Path(path_or_texts))
    else:
        documents = [parse_document(d) if isinstance(d, str) else [list(s) for s in d]
                     for d in path_or_texts]
        documents = [d for d in documents if d]
    if not documents:
        raise UserError(f"no document to score in {path_or_texts!r}: give a corpus-format "
                        "file or non-empty documents")
    return documents


def _from_module(source: Path, run) -> LoadedModel:
    """A :class:`LoadedModel` of a loaded run (or preset), through a ServingModule."""
    from tcnlm_tf.serving.module import ServingModule

    module = ServingModule(run)
    functions = module.signatures()
    specs = {name: {spec.name: spec for spec in fn.input_signature}
             for name, fn in functions.items()}
    return LoadedModel(source, functions, specs, module.model_type.numpy().decode(),
                       module.context_rule(), getattr(module, "num_topics", None), run)


def _damaged_file(path: Path) -> Path:
    """The file of the export at ``path`` that does not read back, for an error to name:
    ``saved_model.pb`` where it does not parse, else ``variables/variables.index`` where
    the checkpoint's index does not, else the data file where a variable fails its
    checksum or is cut short; ``path`` itself where each of them reads."""
    import tensorflow as tf
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import saved_model_pb2

    graph = path / "saved_model.pb"
    try:
        saved_model_pb2.SavedModel.FromString(graph.read_bytes())
    except (OSError, DecodeError):
        return graph
    variables = path / "variables"
    try:
        reader = tf.train.load_checkpoint(str(variables / "variables"))
    except (ValueError, tf.errors.OpError):
        return variables / "variables.index"
    try:
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (ValueError, IndexError, tf.errors.OpError):
        data = sorted(variables.glob("variables.data-*"))
        return data[0] if len(data) == 1 else variables
    return path


def load_export(path: Path) -> LoadedModel:
    """A :class:`LoadedModel` of an exported SavedModel version directory (``evaluate.score``
    reads exports through it too)."""
    import tensorflow as tf

    try:
        loaded = tf.saved_model.load(str(path))
    except (OSError, ValueError, IndexError, tf.errors.OpError) as error:
        # a saved_model.pb that does not parse; variables/ missing, failing its checksums
        # or cut short (IndexError: "Read less bytes than requested")
        reason = (str(error).strip() or type(error).__name__).splitlines()[0][:200]
        damaged = _damaged_file(Path(path))
        where = "" if damaged == Path(path) else f": {damaged} does not read back"
        raise UserError(f"the export {path} is damaged and cannot be loaded{where} "
                        f"({reason}); export the run again (`python -m train.export`)") from None
    if "score" not in loaded.signatures or not hasattr(loaded, "context_kind"):
        raise UserError(f"{path} was not exported by `python -m train.export` (it has no "
                        "score signature or context_kind); re-export the run")
    functions = dict(loaded.signatures)
    specs = {name: fn.structured_input_signature[1] for name, fn in functions.items()}
    topics = specs["generate"].get("topics")            # [B, T] in a topic model's
    num_topics = None if topics is None else int(topics.shape[1])
    model = LoadedModel(path, functions, specs, loaded.model_type.numpy().decode(),
                        loaded.context_kind.numpy().decode(), num_topics)
    model._saved_model = loaded     # the signatures' variables live as long as it does
    return model


def version_number(name: str) -> int | None:
    """The number of a SavedModel version folder (TF Serving's layout) named ``name``: a
    name of ASCII digits only (``str.isdigit`` also takes ``²``, which is no number), else
    None."""
    return int(name) if re.fullmatch(r"[0-9]+", name) else None


def load(path: str | Path, precision: str | None = None) -> LoadedModel:
    """The model at ``path``: a run directory, a preset directory, an exported SavedModel
    version directory, or a model directory of numbered versions (the newest).
    ``precision`` (runs and presets): the layers' precision (default: the one it trained
    in, as the ``evaluate`` commands use it); an export computes in float32."""
    path = Path(path)
    from tcnlm_tf.serving.preset import is_preset, load_preset

    if (path / "saved_model.pb").is_file():
        return load_export(path)
    versions = sorted((int(p.name), p) for p in path.glob("[0-9]*")
                      if version_number(p.name) is not None
                      and (p / "saved_model.pb").is_file())
    if versions:
        return load_export(versions[-1][1])
    if is_preset(path):
        return _from_module(path, load_preset(path, precision))
    if (path / "config.json").is_file():
        from tcnlm_tf.runs.loading import load_run
        return _from_module(path, load_run(path, precision=precision))
    raise UserError(f"{path} is not a run directory (config.json), a preset (metadata.json) "
                    "or an exported SavedModel (saved_model.pb): pass runs/<name>, a "
                    "preset directory or saved_models/<name>[/<version>]")
