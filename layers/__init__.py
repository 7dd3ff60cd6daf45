"""Reusable Keras 3 layers for topic-guided language models.

Every layer here is registered for serialisation under the ``tcnlm_tf`` package name (so
``import layers`` before ``keras.saving.load_model`` of a model that uses them),
has ``get_config``, documents its input/output shapes and the paper equation it
implements, and does no file I/O.
"""

from layers.adaptive_softmax import AdaptiveSoftmax, default_cutoffs
from layers.context_attention import ContextAttention, LateFusionLSTM, LateFusionLSTMCell
from layers.gaussian_encoder import GaussianEncoder
from layers.hoisted_lstm import HoistedLSTM
from layers.lda import LDAInference
from layers.mixture_of_experts import MixtureOfExpertsLSTM, MixtureOfExpertsLSTMCell
from layers.mixture_of_softmaxes import MixtureOfSoftmaxes
from layers.sememe_decoder import SememeDecoder
from layers.tied_softmax import TiedSoftmax
from layers.topic_attention import (ConvolutionalTopicModel, DocumentConvolution,
                                    TopicAttention, TopicGate)
from layers.topic_lstm import TopicCompositionalLSTM, TopicCompositionalLSTMCell, TopicState
from layers.topic_model import BagOfWords, NeuralTopicModel
from layers.topic_rnn import TopicRNNInference, TopicRNNOutput

__all__ = ["AdaptiveSoftmax", "BagOfWords", "ContextAttention", "ConvolutionalTopicModel",
           "DocumentConvolution", "GaussianEncoder", "HoistedLSTM", "LDAInference",
           "LateFusionLSTM", "LateFusionLSTMCell", "MixtureOfExpertsLSTM",
           "MixtureOfExpertsLSTMCell", "MixtureOfSoftmaxes", "NeuralTopicModel",
           "SememeDecoder", "TiedSoftmax", "TopicAttention", "TopicCompositionalLSTM",
           "TopicCompositionalLSTMCell", "TopicGate", "TopicRNNInference", "TopicRNNOutput",
           "TopicState", "default_cutoffs"]
