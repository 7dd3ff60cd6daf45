"""Cost of the output layers (decoders) beside a tied full softmax, at the APNEWS vocabulary.

Every contender is built with ``tcnlm_tf.decoders.output_layers.make_output_layer``, as a model
builds it, in one process, on the same hidden states (a ``tf.Variable`` of normal noise,
[B, T, H]) and the same Zipfian targets (ids sorted by decreasing frequency, as in the project's
vocabularies); the tied ones share one ``keras.layers.Embedding(V, --embedding-dim)``:

``softmax``   tied full softmax (``TiedSoftmax``), the reference of the ratios;
``adaptive``  adaptive softmax with ``default_cutoffs(V)`` (or ``--cutoffs``);
``sdlm``      sememe-driven decoder (Gu et al. 2018), ``--num-bases`` R, left normalisation,
              over the knowledge base;
``mos``       mixture of ``--mixtures`` softmaxes (Yang et al. 2018).

The vocabulary is the LM vocabulary of the APNEWS sample (``--data-dir``, ``min_freq``
``--min-freq``) and the knowledge base its WordNet one (``build_knowledge_base("wordnet",
words)``); ``--knowledge-base PATH`` reads a saved ``knowledge_base.npz`` (e.g. a run's)
instead, whose words are then the vocabulary.

Time. One step is the forward and backward pass of ``-mean(layer.target_log_prob(hidden,
targets))`` with gradients for the hidden states and every trainable weight the layer reads
(the shared embedding included for the tied decoders), inside ``tf.function``. After
``--warmup`` untimed steps per decoder (the first one traces), ``--repeats`` rounds each time
every decoder once, in turn (the starting decoder rotates from round to round); the table
gives the median ms/step and its ratio to ``softmax``.

Memory, measured in the same process:

* parameters: count and MB (10^6 bytes) of each decoder's weights, counting the input
  embedding (V x E) for every decoder (the tied ones read it; the untied adaptive softmax
  sits beside one in any model), so the columns compare whole output+embedding stacks;
* activation MB of one training step: the sum of the byte sizes (shape x dtype size) of the
  tensors produced by the ops of the traced step's graph
  (``step.get_concrete_function().graph.get_operations()``), forward and backward together.
  Counted: the ops the step's outputs depend on (TensorFlow prunes the rest, e.g. the
  gradient of the SDLM's constant sparse matrix that no one asks for); left out: the
  outputs of ops that only forward their input's buffer (``ReadVariableOp``, ``Identity``,
  ``IdentityN``, ``StopGradient``, ``Reshape``, ``ExpandDims``, ``Squeeze``) and
  resource/variant handles. It is an upper bound of what the step keeps alive at once
  (TensorFlow frees a tensor after its last use, and grappler may fuse ops), but it is
  deterministic and comparable across decoders, which a measured figure is not here:
  TensorFlow on CPU has no peak-memory counter (``tf.config.experimental.get_memory_info``
  is GPU-only). Where a static shape is not fully defined (the tokens that fall in an
  adaptive tail cluster, the words of the SDLM's segment sums), the shape is taken from one
  run of the same traced step that returns those tensors' ``tf.shape``; a dimension still
  unknown would be counted as B x T (the tokens of the batch). The header says how many
  shapes were measured and how many dimensions were substituted.

Every figure is computed in the run; nothing is hard-coded.

    python -m benchmarks.bench_decoders                 # APNEWS + WordNet, all four decoders
    python -m benchmarks.bench_decoders --repeats 2 --time-steps 10     # a quick look
    python -m benchmarks.bench_decoders --knowledge-base runs/X/knowledge_base.npz \\
        --decoders softmax,sdlm

References: Gu et al., "Language Modeling with Sparse Product of Sememe Experts" (EMNLP
2018); Yang et al., "Breaking the Softmax Bottleneck" (ICLR 2018); Grave et al., "Efficient
softmax approximation for GPUs" (arXiv:1609.04309, 2016).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Allow `python benchmarks/bench_decoders.py` as well as `python -m ...` from the root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import (machine_line, print_table, ratio,
                                time_contenders, unique)
from benchmarks.sections.decoders import (DECODERS, REFERENCE,
                                          decoder_options, zipf_targets)
from tcnlm_tf.arguments import finite_float
from tcnlm_tf.errors import UserError, exit_on_user_error

DATASET = "apnews"
SPLITS = ("train", "valid", "test")
#: ops whose output shares its input's buffer in TensorFlow's kernels: not counted
ALIAS_OPS = frozenset({"ReadVariableOp", "Identity", "IdentityN", "StopGradient", "Reshape",
                       "ExpandDims", "Squeeze"})
MB = 1e6


def parse_args(argv=None):
    parser = argparse.ArgumentParser(allow_abbrev=False,
        description="Time, parameters and activation memory of the output layers (decoders) "
                    "beside a tied full softmax, at the APNEWS vocabulary."
    )
    parser.add_argument("--data-dir", default="../shared/data",
                        help=f"directory holding {DATASET}/{{train,valid,test}}.txt "
                             "(default ../shared/data)")
    parser.add_argument("--min-freq", type=int, default=10,
                        help="LM vocabulary: words seen at least this often (default 10)")
    parser.add_argument("--cache-dir", default=None,
                        help="prepared-corpus cache (default: $TCNLM_CACHE_DIR or .cache)")
    parser.add_argument("--knowledge-base", default=None, metavar="PATH",
                        help="a saved knowledge_base.npz (e.g. a run's) instead of building the "
                             "WordNet one; its words are the vocabulary")
    parser.add_argument("--decoders", default=",".join(DECODERS),
                        help=f"comma list out of {','.join(DECODERS)} (default all)")
    parser.add_argument("--hidden", type=int, default=600, help="input (hidden) size (default 600)")
    parser.add_argument("--embedding-dim", type=int, default=300,
                        help="shared input embedding size (default 300)")
    parser.add_argument("--batch", type=int, default=64, help="sequences per batch (default 64)")
    parser.add_argument("--time-steps", type=int, default=30,
                        help="tokens per sequence (default 30)")
    parser.add_argument("--cutoffs", type=int, nargs="+", default=None,
                        help="adaptive cluster boundaries (default: default_cutoffs(V))")
    parser.add_argument("--num-bases", type=int, default=5, help="sdlm bases R (default 5)")
    parser.add_argument("--mixtures", type=int, default=10, help="mos components (default 10)")
    parser.add_argument("--zipf", type=finite_float, default=1.0,
                        help="Zipf exponent of the targets (default 1.0)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed steps per decoder (default 1)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)
    for name in ("min_freq", "hidden", "embedding_dim", "batch", "time_steps", "num_bases",
                 "mixtures", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be non-negative")
    chosen = [d.strip() for d in args.decoders.split(",") if d.strip()]
    unknown = [d for d in chosen if d not in DECODERS]
    if not chosen or unknown:
        parser.error(f"--decoders: {'unknown ' + ','.join(unknown) if unknown else 'none given'}"
                     f"; choose from {','.join(DECODERS)}")
    args.decoders = [d for d in DECODERS if d in chosen]  # canonical order, no duplicates
    return parser, args


def load_knowledge_base(args):
    """(knowledge base, where the vocabulary came from)."""
    from tcnlm_tf.data import knowledge

    if args.knowledge_base is not None:
        kb = knowledge.load(args.knowledge_base)
        return kb, f"knowledge base {args.knowledge_base} ({kb.source})"
    directory = Path(args.data_dir) / DATASET
    if not all((directory / f"{split}.txt").is_file() for split in SPLITS):
        raise UserError(f"no {DATASET} corpus in {directory} (train.txt, valid.txt, test.txt); "
                        "pass --data-dir DIR (DIR/apnews/train.txt ...) or --knowledge-base "
                        "PATH (a saved knowledge_base.npz)")
    from tcnlm_tf.config import DataConfig
    from tcnlm_tf.data.loading import load_corpus

    corpus = load_corpus(DataConfig(dataset=DATASET, data_dir=str(args.data_dir),
                                    min_freq=args.min_freq),
                         cache_dir=args.cache_dir,
                         log=lambda message: print(message, file=sys.stderr))
    words = list(corpus.lm_vocab.words)
    kb = knowledge.build_knowledge_base("wordnet", words)
    return kb, f"{DATASET} LM vocabulary (min_freq {args.min_freq}) + wordnet"


def live_operations(fetches) -> list:
    """The ops that ``fetches`` (tensors and ops) depend on, through data and control inputs:
    the ones a run of the graph executes (TensorFlow prunes the others, e.g. the gradient of
    a constant that no one asked for)."""
    seen: dict = {}
    stack = [f.op if hasattr(f, "op") else f for f in fetches]
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen[op.name] = op
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return list(seen.values())


def counted_outputs(operations) -> list:
    """The outputs of ``operations`` whose bytes are counted (see the module docstring)."""
    import tensorflow as tf

    return [out for op in operations if op.type not in ALIAS_OPS for out in op.outputs
            if out.dtype not in (tf.resource, tf.variant, tf.string)]


def activation_bytes(graph, runtime_shapes: dict, tokens: int) -> tuple[int, int, int]:
    """(bytes of the tensors the live ops of ``graph`` produce, tensors whose static shape
    was not fully defined and whose shape was taken from ``runtime_shapes`` (name -> shape),
    dimensions still unknown and counted as ``tokens``)."""
    total, from_run, substituted = 0, 0, 0
    outputs = counted_outputs(live_operations(list(graph.outputs) + list(graph.control_outputs)))
    for out in outputs:
        shape = out.shape
        if shape.rank is not None and shape.is_fully_defined():
            dims = shape.as_list()
        elif out.name in runtime_shapes:
            dims = runtime_shapes[out.name]
            from_run += 1
        elif shape.rank is not None:
            dims = [tokens if d is None else d for d in shape.as_list()]
            substituted += sum(d is None for d in shape.as_list())
        else:
            raise ValueError(f"{out.name} has an unknown rank and no measured shape")
        count = 1
        for dim in dims:
            count *= int(dim)
        total += count * out.dtype.size
    return total, from_run, substituted


@exit_on_user_error
def main(argv=None) -> None:
    parser, args = parse_args(argv)

    kb, vocabulary_source = load_knowledge_base(args)

    import keras
    import numpy as np
    import tensorflow as tf

    from layers.adaptive_softmax import default_cutoffs
    from tcnlm_tf.decoders import output_layers

    keras.utils.set_random_seed(args.seed)
    V = kb.num_words
    cutoffs = tuple(args.cutoffs) if args.cutoffs is not None else default_cutoffs(V)
    options = decoder_options(kb, cutoffs, args.num_bases, args.mixtures)

    embedding = keras.layers.Embedding(V, args.embedding_dim, name="embedding")
    embedding.build((None,))

    rng = np.random.default_rng(args.seed)
    shape = (args.batch, args.time_steps)
    tokens = args.batch * args.time_steps
    targets = zipf_targets(rng, V, shape, args.zipf)
    hidden = tf.Variable(rng.normal(size=shape + (args.hidden,)).astype("float32"),
                         name="hidden")

    steps, probes, params = {}, {}, {}
    for name in args.decoders:
        try:
            layer = output_layers.make_output_layer(name, options[name], V, args.hidden, embedding)
        except ValueError as err:
            parser.error(f"{name}: {err}")
        # Build every weight (sublayers included) eagerly, outside the traced step.
        layer.target_log_prob(hidden[:1, :1], targets[:1, :1])
        trainable = unique(layer.trainable_weights)
        stack = unique(layer.weights + embedding.weights)  # embedding counted for everyone
        params[name] = (sum(int(np.prod(v.shape)) for v in stack),
                        sum(int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size for v in stack))

        def make_step(layer=layer, variables=[hidden] + trainable):
            def body():
                with tf.GradientTape() as tape:
                    loss = -tf.reduce_mean(layer.target_log_prob(hidden, targets))
                return loss, tape.gradient(loss, variables)

            step = tf.function(body)
            unknown: list = []

            @tf.function
            def probe():
                """The same step, returning the run-time shapes of its tensors whose static
                shape is not fully defined (their names go to ``unknown`` when tracing)."""
                loss, grads = body()
                fetches = [loss] + [g for g in grads if g is not None]
                tensors = [t for t in counted_outputs(live_operations(fetches))
                           if t.shape.rank is None or not t.shape.is_fully_defined()]
                unknown[:] = [t.name for t in tensors]
                return [tf.shape(t, out_type=tf.int64) for t in tensors]

            return step, probe, unknown

        steps[name], *probes[name] = make_step()

    activations, from_run, substituted = {}, 0, 0
    for name, step in steps.items():
        probe, unknown = probes[name]
        measured_shapes = [s.numpy().tolist() for s in probe()]  # traces: fills `unknown`
        shapes = dict(zip(unknown, measured_shapes))
        graph = step.get_concrete_function().graph
        activations[name], measured, count = activation_bytes(graph, shapes, tokens)
        from_run += measured
        substituted += count

    def timed(step):
        def run(_):
            loss, grads = step()
            loss.numpy()
            grads[0].numpy()
            return 0.0
        return run

    names = list(steps)
    times = time_contenders({name: timed(step) for name, step in steps.items()}, args.warmup,
                            args.repeats, 1)
    median = {name: times[name]["seconds"] for name in names}
    ref_time = median.get(REFERENCE)
    ref_act = activations.get(REFERENCE)
    print(f"V={V:,} senses M={kb.num_senses:,} edges E={len(kb.edge_sense):,} "
          f"sememes K={len(kb.sememes):,} ({kb.num_real_sememes:,} real) from "
          f"{vocabulary_source}; hidden={args.hidden} embedding={args.embedding_dim} "
          f"batch={args.batch}x{args.time_steps} cutoffs={list(cutoffs)} R={args.num_bases} "
          f"mixtures={args.mixtures} zipf={args.zipf} warmup={args.warmup} "
          f"repeats={args.repeats}; activation shapes: {from_run} measured in a run, "
          f"{substituted} dims counted as B*T={tokens}")
    print(machine_line())
    header = ("decoder", "ms/step (median)", "x softmax", "parameters", "activation MB",
              "x softmax")
    rows = []
    for name in names:
        count, nbytes = params[name]
        rows.append((name, f"{median[name] * 1e3:.1f}", ratio(median[name], ref_time),
                     f"{count:,} ({nbytes / MB:.1f} MB)", f"{activations[name] / MB:.1f}",
                     ratio(activations[name], ref_act)))
    print_table(header, rows)
    if REFERENCE not in names:
        print(f"(no ratios: {REFERENCE} is not among --decoders)")


if __name__ == "__main__":
    main()
