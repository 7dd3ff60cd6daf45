"""TensorBoard as a user sees it, asked through its own HTTP API: a tiny TCNLM run and a
tiny LSTM run in one runs directory (as a comparison lays them out), the LSTM resumed for a
second epoch, the TCNLM's topics written with ``evaluate.topics --projector`` and scored
with ``evaluate.coherence``, and TensorBoard serving that directory in this process. The
HParams dashboard has one row per run with its settings and metrics, the Text tab the
TCNLM's topic table of each epoch, and the projector both runs' word embeddings and the
TCNLM's topics with their labels."""
import json
import socket
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import TINY_EPOCH, TINY_MODELS, run_flags
from train.summaries import METRICS, NPMI_TAG, hparam_names, hparams_of

#: trains tiny runs: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

RUNS = ("tcnlm", "lstm")
#: every status a session can have: the sessions of train.run never write an end status
STATUSES = ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """(the runs directory, the metrics of each run, the URL of a TensorBoard serving it;
    TensorBoard's server thread is a daemon, which ends with the test process)."""
    from evaluate import coherence, topics
    from tensorboard import program
    from train.run import main as train

    root = tmp_path_factory.mktemp("tensorboard")
    metrics = {name: train(TINY_EPOCH + TINY_MODELS[name] + run_flags(root, name))
               for name in RUNS}
    metrics["lstm"] = train(run_flags(root, "lstm") + ["--resume", "--epochs", "2"])
    runs = root / "runs"
    topics.main(["--run", str(runs / "tcnlm"), "--projector"])
    coherence.main(["--run", str(runs / "tcnlm")])
    server = program.TensorBoard()
    server.configure(argv=[None, "--logdir", str(runs), "--host", "127.0.0.1",
                           "--port", str(free_port()), "--load_fast", "false",
                           "--reload_task", "blocking", "--reload_interval", "0"])
    return runs, metrics, server.launch().rstrip("/")


def get(url: str, path: str, body: dict | None = None):
    """The answer to a GET (or, with ``body``, a POST of it as JSON) of ``path``: JSON
    decoded, else its bytes."""
    request = urllib.request.Request(url + path) if body is None else urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        data = answer.read()
        kind = answer.headers.get_content_type()
    return json.loads(data) if kind == "application/json" else data


def test_every_run_writes_the_same_experiment_whatever_its_model():
    """The experiment configuration names every setting any model can have, so whichever
    run's TensorBoard reads first, the dashboard has the columns of all."""
    from tcnlm_tf.config import RunConfig

    lstm, tcnlm = RunConfig(), RunConfig()
    tcnlm.model.model, tcnlm.model.options = "tcnlm", {"num_topics": 4}
    assert hparam_names(lstm) == hparam_names(tcnlm)
    assert "model.options.num_topics" in hparam_names(lstm)
    assert "model.options.num_topics" not in hparams_of(lstm)
    assert hparams_of(tcnlm)["model.options.num_topics"] == 4
    assert set(hparams_of(tcnlm)) <= set(hparam_names(tcnlm))


def test_the_hparams_dashboard_has_a_row_per_run_with_its_settings_and_metrics(board):
    runs, metrics, url = board
    experiment = get(url, "/data/plugin/hparams/experiment", {"experimentName": ""})
    names = {info["name"] for info in experiment["hparamInfos"]}
    assert {"model.model", "model.mode", "model.hidden_size", "model.options.num_topics",
            "model.decoder", "data.seq_len", "train.batch_size", "train.optimizer",
            "train.learning_rate", "model.dropout", "train.precision", "train.seed"} <= names
    assert [m["name"]["tag"] for m in experiment["metricInfos"]] == [t for t, _ in METRICS]
    groups = get(url, "/data/plugin/hparams/session_groups",
                 {"experimentName": "", "allowedStatuses": STATUSES, "startIndex": 0,
                  "sliceSize": 100})["sessionGroups"]
    rows = {group["name"]: group for group in groups}
    assert set(rows) == set(RUNS)
    assert [[s["name"] for s in row["sessions"]] for row in groups] == [
        [f"{row['name']}/tensorboard"] for row in groups]
    tcnlm, lstm = rows["tcnlm"]["hparams"], rows["lstm"]["hparams"]
    assert (tcnlm["model.model"], lstm["model.model"]) == ("tcnlm", "lstm")
    assert tcnlm["model.options.num_topics"] == 4 and "model.options.num_topics" not in lstm
    assert tcnlm["model.hidden_size"] == 16 and tcnlm["data.seq_len"] == 8
    assert tcnlm["train.precision"] == "float32" and tcnlm["train.seed"] == 0
    # resumed with a larger --epochs, the LSTM is still one row, with the values it started
    # with, and the metrics of its last epoch
    assert (tcnlm["train.epochs"], lstm["train.epochs"]) == (1, 1)
    assert len(metrics["lstm"]["epochs"]) == 2
    coherence = json.loads((runs / "tcnlm" / "coherence.json").read_text())
    for name, row in rows.items():
        values = {v["name"]["tag"]: v["value"] for v in row["metricValues"]}
        expected = {"valid/perplexity": metrics[name]["epochs"][-1]["valid_perplexity"],
                    "test/perplexity": metrics[name]["test_perplexity"]}
        if name == "tcnlm":
            expected[NPMI_TAG] = coherence["mean"]
            expected.update({f"coherence/diversity_{n}": value
                             for n, value in coherence["diversity"].items()})
        assert values == pytest.approx(expected, rel=1e-6), name


def test_the_text_tab_has_the_topics_of_every_epoch_and_of_evaluate_topics(board):
    runs, metrics, url = board
    tags = get(url, "/data/plugin/text/tags")
    assert "topics/top_words" in tags["tcnlm/tensorboard"]
    assert "topics/top_words" not in tags.get("lstm/tensorboard", [])
    texts = get(url, "/data/plugin/text/text?run=tcnlm/tensorboard&tag=topics/top_words")
    # the trainer's table after its one epoch, and evaluate.topics' of the same weights
    assert [t["step"] for t in texts] == [metrics["tcnlm"]["epochs"][0]["step"]] * 2
    assert texts[0]["text"] == texts[1]["text"] and "<table>" in texts[0]["text"]
    for line in (runs / "tcnlm" / "topics.txt").read_text().splitlines():
        topic, words = line.removeprefix("topic ").split(": ")
        assert f"<td>{topic}</td>\n<td>{words}</td>" in texts[0]["text"]


def test_the_projector_has_the_word_embeddings_and_the_topics_with_their_labels(board):
    from tcnlm_tf.runs.loading import load_run

    runs, _, url = board
    assert set(get(url, "/data/plugin/projector/runs")) == {f"{r}/tensorboard" for r in RUNS}
    run = load_run(runs / "tcnlm")
    info = get(url, "/data/plugin/projector/info?run=tcnlm/tensorboard")
    shapes = {e["tensorName"]: [int(n) for n in e["tensorShape"]] for e in info["embeddings"]}
    words, topics = ("embedding_embeddings/.ATTRIBUTES/VARIABLE_VALUE",
                     "topic_word/.ATTRIBUTES/VARIABLE_VALUE")
    assert shapes == {words: [len(run.lm_vocab), 12], topics: [4, len(run.topic_vocab)]}
    labels = {name: get(url, f"/data/plugin/projector/metadata?run=tcnlm/tensorboard&name={name}")
              for name in shapes}
    assert labels[words].decode().splitlines() == run.lm_vocab.words
    assert labels[topics].decode().splitlines() == (
        runs / "tcnlm" / "topics.txt").read_text().splitlines()
    tensor = get(url, f"/data/plugin/projector/tensor?run=tcnlm/tensorboard&name={words}")
    np.testing.assert_array_equal(np.frombuffer(tensor, np.float32).reshape(shapes[words]),
                                  np.asarray(run.model.embedding_tables()[0][0]))


def test_topics_warns_in_one_line_when_tensorboard_cannot_be_written(board, monkeypatch,
                                                                     capsys):
    """A full disk (or a read-only TensorBoard directory) costs the TensorBoard output, with
    a warning, not the topics: topics.txt is written and the command succeeds."""
    from evaluate import topics

    runs, _, _ = board
    writer = type(tf.summary.create_file_writer(str(runs / "probe")))

    def no_space(*args, **kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    monkeypatch.setattr(writer, "flush", no_space)
    monkeypatch.setattr(tf.train.CheckpointManager, "save", no_space)
    (runs / "tcnlm" / "topics.txt").unlink()
    result = topics.main(["--run", str(runs / "tcnlm"), "--projector"])
    assert len(result) == 4 and (runs / "tcnlm" / "topics.txt").is_file()
    err = capsys.readouterr().err.strip().splitlines()
    board, text = runs / "tcnlm" / "tensorboard", runs / "tcnlm" / "topics.txt"
    assert err == [f"warning: {what} not written to TensorBoard ({board}): No space left on "
                   f"device; written without it: {text}"
                   for what in ("the topics", "the projector's embeddings")]
