"""LSTM+LDA: the in-graph E-step against gensim's, q entering the LM, and a tiny run whose
fitted LDA is saved and restored with the checkpoint."""
import numpy as np
import pytest
import tensorflow as tf
from gensim.models import LdaModel

from layers.lda import LDAInference
from tcnlm_tf.data.loading import SplitArrays, load_corpus
from tcnlm_tf.metrics.evaluation import document_topics
from tcnlm_tf.models.lda_lstm import LDA_FILE, LDALSTM, lda_documents
from tcnlm_tf.models.registry import MODELS
from tcnlm_tf.runs.loading import load_run
from tests.conftest import TINY, run_flags
from train.run import build_parser, config_from_args, main as train_main

V, T = 31, 3          # topic vocabulary (id 0 unused) and topics of the small fitted LDA
LM_V = 40
#: the E-step iterations a run uses by default (--lda-inference-steps)
STEPS = next(o.default for o in MODELS["lda_lstm"].options if o.name == "lda_inference_steps")
#: |q - gensim's converged q| after the default in-graph iterations
TOLERANCE = 1e-4


def bag(counts_row):
    return [(int(w), float(c)) for w, c in enumerate(counts_row) if c > 0]


@pytest.fixture(scope="module")
def fitted():
    """A small LDA on three blocks of words (ids 1-10, 11-20, 21-30), one block per topic."""
    rng = np.random.default_rng(0)
    docs = []
    for d in range(90):
        block = d % T
        words, counts = np.unique(rng.integers(1 + 10 * block, 11 + 10 * block, size=25),
                                  return_counts=True)
        docs.append(list(zip(words.tolist(), counts.tolist())))
    lda = LdaModel(corpus=docs, id2word={i: f"w{i}" for i in range(V)}, num_topics=T,
                   alpha=0.1, eta=0.01, passes=5, random_state=0, eval_every=None)
    layer = LDAInference(V, T, alpha=0.1, steps=STEPS)
    layer.assign(lda.expElogbeta, lda.state.get_lambda())
    return lda, layer


def test_in_graph_e_step_equals_gensim_inference(fitted):
    lda, layer = fitted
    counts = np.zeros((5, V), np.float32)
    counts[0, [1, 2, 3]] = [4, 1, 2]                       # one topic's words
    counts[1, [1, 15, 28]] = [2, 3, 1]                     # all three topics
    counts[2, [12, 22]] = [5, 5]                           # two topics, evenly
    counts[3, 30] = 1                                      # a single word
    counts[4, [5, 11, 21, 29]] = [1, 7, 2, 3]
    lda.iterations, lda.gamma_threshold = 2000, 1e-9       # gensim run to convergence
    gamma, _ = lda.inference([bag(row) for row in counts])
    expected = gamma / gamma.sum(1, keepdims=True)
    q = layer(counts).numpy()
    np.testing.assert_allclose(q, expected, atol=TOLERANCE)
    assert np.abs(expected[0] - expected[2]).max() > 0.3   # the documents differ
    # inside a tf.function (the serving graph) it is the same computation
    np.testing.assert_allclose(tf.function(layer)(counts).numpy(), q, atol=1e-6)


def test_q_sums_to_one_and_an_empty_document_gets_the_uniform_prior_mean(fitted):
    _, layer = fitted
    counts = np.zeros((3, V), np.float32)
    counts[1, [2, 13]] = [3, 1]
    counts[2, 1:] = 100.0
    q = layer(counts).numpy()
    np.testing.assert_allclose(q.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(q[0], np.full(T, 1.0 / T), atol=1e-6)
    assert (q > 0).all()


def test_topic_word_is_the_normalised_lambda(fitted):
    lda, layer = fitted
    lam = lda.state.get_lambda()
    np.testing.assert_allclose(layer.topic_word.numpy(), lam / lam.sum(1, keepdims=True),
                               rtol=1e-5)


def test_layer_config_round_trip():
    layer = LDAInference(V, T, alpha=0.2, steps=7, name="lda")
    clone = LDAInference.from_config(layer.get_config())
    assert (clone.vocab_size, clone.num_topics, clone.alpha, clone.steps) == (V, T, 0.2, 7)


def lm_batch(bow):
    ids = np.random.default_rng(1).integers(3, LM_V, size=(2, 7))
    return {"inputs": tf.constant(ids[:, :6]), "targets": tf.constant(ids[:, 1:]),
            "weights": tf.ones([2, 6]), "bow": tf.constant(bow, tf.int32)}


def test_full_distribution_sums_to_one_and_q_changes_it(fitted):
    """Over the whole vocabulary p sums to 1 and agrees with target_log_prob; a document of
    another topic changes q and, through h_t ⊕ q, the probabilities of the same words."""
    lda, _ = fitted
    model = LDALSTM(LM_V, topic_vocab_size=V, num_topics=T, embedding_dim=8, hidden_size=12,
                    dropout=0.0, decoder_options={"cutoffs": (10, 20)})
    same = [[1, 2, 3, 0], [1, 2, 3, 0]]
    model(lm_batch(same))
    model.lda.assign(lda.expElogbeta, lda.state.get_lambda())
    batch = lm_batch(same)
    context = model.context(batch)
    hidden, _ = model.encode(batch["inputs"], context)
    assert hidden.shape == (2, 6, 12 + T)
    full = model.log_probs(hidden, context).numpy()
    np.testing.assert_allclose(np.exp(full).sum(-1), 1.0, atol=1e-5)
    targets = batch["targets"].numpy()
    np.testing.assert_allclose(np.take_along_axis(full, targets[..., None], -1)[..., 0],
                               model(batch).target_log_probs.numpy(), atol=1e-5)
    # the same words under a document of another topic: q and the probabilities change
    other = model(lm_batch([[1, 2, 3, 0], [21, 22, 23, 0]]))
    q = model.infer_topics(lm_batch([[1, 2, 3, 0], [21, 22, 23, 0]])).numpy()
    assert np.abs(q[0] - q[1]).max() > 0.5
    before = model(batch).target_log_probs.numpy()
    np.testing.assert_allclose(other.target_log_probs.numpy()[0], before[0], atol=1e-6)
    assert np.abs(other.target_log_probs.numpy()[1] - before[1]).max() > 1e-4
    # LDA is fixed: nothing of it is trained
    assert not {id(v) for v in model.lda.weights} & {id(v) for v in model.trainable_variables}


def test_documents_for_gensim_are_topic_id_bags():
    split = SplitArrays(lm_ids=np.zeros(0, np.int32), sent_offsets=np.zeros(5, np.int64),
                        topic_ids=np.array([3, 1, 3, 0, 2, 2, 5]),
                        topic_offsets=np.array([0, 2, 4, 4, 7]),
                        doc_offsets=np.array([0, 2, 3, 4]), doc_lines=np.array([1, 2, 3]))
    assert lda_documents(split) == [[(1, 1), (3, 2)], [], [(2, 2), (5, 1)]]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A tiny lda_lstm run trained through train.run: (its directory, its corpus)."""
    workdir = tmp_path_factory.mktemp("lda_lstm")
    flags = TINY + ["--model", "lda_lstm", *MODELS["lda_lstm"].test_flags]
    train_main(flags + run_flags(workdir, "lda"))
    config = config_from_args(build_parser().parse_args(flags + run_flags(workdir, "lda")))
    corpus = load_corpus(config.data, cache_dir=workdir / "cache", log=lambda _: None)
    return workdir / "runs" / "lda", corpus


def test_run_saves_the_lda_and_the_checkpoint_restores_its_topics(tiny_run):
    """runs/<name>/lda/lda.model is the LDA over the topic vocabulary's ids, and the reloaded
    run infers, from words, the q that this saved LDA gives (its topics are in the
    checkpoint, not the uniform start) and that gensim's own inference gives."""
    run_dir, corpus = tiny_run
    lda = LdaModel.load(str(run_dir / LDA_FILE))
    assert [lda.id2word[i] for i in range(lda.num_terms)] == corpus.topic_vocab.words
    run = load_run(run_dir)
    np.testing.assert_allclose(run.model.lda.exp_elog_beta.numpy(), lda.expElogbeta, rtol=1e-6)
    test = corpus.splits["test"]
    bags = lda_documents(test)[:4]
    assert all(sum(c for _, c in b) <= run.config.data.max_bow for b in bags)   # whole bows
    words = run.topic_vocab.words
    documents = [[[words[i] for i in test.topic_ids[test.topic_offsets[s]:
                                                    test.topic_offsets[s + 1]]]
                  for s in range(test.doc_offsets[d], test.doc_offsets[d + 1])]
                 for d in range(len(bags))]
    q = document_topics(run, documents)
    layer = LDAInference(lda.num_terms, lda.num_topics, alpha=0.1, steps=STEPS)
    layer.assign(lda.expElogbeta, lda.state.get_lambda())
    counts = np.zeros((len(bags), lda.num_terms), np.float32)
    for d, bag_ in enumerate(bags):
        for w, c in bag_:
            counts[d, w] = c
    np.testing.assert_allclose(q, layer(counts).numpy(), atol=1e-6)
    assert np.abs(q - 1.0 / lda.num_topics).max() > 0.05
    lda.iterations, lda.gamma_threshold = 2000, 1e-9
    gamma, _ = lda.inference(bags)
    np.testing.assert_allclose(q, gamma / gamma.sum(1, keepdims=True), atol=TOLERANCE)
