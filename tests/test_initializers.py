"""``--init pytorch``: the SDLM authors' starting weights (embeddings U(+-0.1), the LSTM as
``torch.nn.LSTM`` starts), beside Keras's default ones."""
import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.initializers import SumOfUniforms, pytorch_lstm_initializers
from tcnlm_tf.models.lstm import LSTMLanguageModel
from train.run import build_parser, config_from_args

H, V, E = 50, 300, 20


def test_a_sum_of_two_uniforms_is_triangular_not_one_draw_doubled():
    """Var(U1 + U2) = 2 l^2 / 3 for independent draws; a doubled single draw (an initialiser
    whose fixed seed repeats itself) would have 4 l^2 / 3."""
    keras.utils.set_random_seed(0)
    values = keras.ops.convert_to_numpy(SumOfUniforms(0.5)((400, 500)))
    assert np.abs(values).max() <= 1.0 and np.abs(values).max() > 0.95
    assert values.var() == pytest.approx(2 * 0.5 ** 2 / 3, rel=0.02)
    assert abs(values.mean()) < 0.005


def test_the_initializer_round_trips_through_its_config():
    config = keras.initializers.serialize(SumOfUniforms(0.25, count=3, seed=7))
    again = keras.initializers.deserialize(json.loads(json.dumps(config)))
    assert isinstance(again, SumOfUniforms)
    assert (again.limit, again.count, again.seed) == (0.25, 3, 7)
    with pytest.raises(ValueError, match="limit must be positive"):
        SumOfUniforms(0.0)


def lstm_weights(model):
    layer = model.rnns[0]
    return (model.embedding.embeddings.numpy(), layer.cell.kernel.numpy(),
            layer.cell.recurrent_kernel.numpy(), layer.cell.bias.numpy())


def built(init):
    keras.utils.set_random_seed(1)
    model = LSTMLanguageModel(V, embedding_dim=E, hidden_size=H, init=init,
                              decoder="softmax", decoder_options={"tie": False})
    inputs = tf.constant(np.ones((2, 3), np.int32))
    model({"inputs": inputs, "targets": inputs, "weights": tf.ones((2, 3))})
    return model


def test_pytorch_init_starts_the_embedding_and_the_lstm_as_the_authors_code():
    embedding, kernel, recurrent, bias = lstm_weights(built("pytorch"))
    limit = 1 / math.sqrt(H)
    assert 0.09 < np.abs(embedding).max() <= 0.1
    for weights in (kernel, recurrent):
        assert 0.95 * limit < np.abs(weights).max() <= limit
        assert weights.std() == pytest.approx(limit / math.sqrt(3), rel=0.05)
    # PyTorch's two biases b_ih + b_hh, each U(+-limit): their sum, std limit * sqrt(2/3)
    assert limit < np.abs(bias).max() <= 2 * limit
    assert bias.std() == pytest.approx(limit * math.sqrt(2 / 3), rel=0.15)
    forget = bias[H:2 * H]                             # gates i, f, c, o
    assert abs(forget.mean()) < 0.05                   # no unit forget bias


def test_keras_init_is_unchanged_by_default():
    embedding, kernel, recurrent, bias = lstm_weights(built("keras"))
    assert np.abs(embedding).max() <= 0.05
    np.testing.assert_array_equal(bias[H:2 * H], 1.0)   # unit forget bias
    np.testing.assert_allclose(recurrent @ recurrent.T, np.eye(H), atol=1e-5)  # orthogonal


def test_the_flag_reaches_the_config_and_the_layer_kwargs():
    parser = build_parser()
    assert config_from_args(parser.parse_args([])).model.init == "keras"
    assert config_from_args(parser.parse_args(["--init", "pytorch"])).model.init == "pytorch"
    kwargs = pytorch_lstm_initializers(100)
    assert kwargs["unit_forget_bias"] is False and kwargs["bias_initializer"].limit == 0.1
