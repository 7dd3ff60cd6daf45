"""``python -m evaluate.perplexity --run runs/<name> [--text-file F]``: test perplexity of a
trained run on its own test split or on any file in the corpus format."""
from __future__ import annotations

import json

from evaluate.common import parser, read_documents, split_file
from tcnlm_tf.arguments import integer
from tcnlm_tf.config import CONTEXTS
from tcnlm_tf.errors import exit_on_user_error


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict:
    p = parser("perplexity", __doc__.split(": ", 1)[1],
               "The perplexity is exp(total NLL / predicted tokens), <eos> included.")
    p.add_argument("--text-file", help="file in the corpus format (default: the run's test split)")
    p.add_argument("--batch-size", type=integer(1), default=None, help="default: the run's")
    p.add_argument("--topics", choices=("inferred", "shuffled", "uniform"), default="inferred",
                   help="what a topic model's LM is conditioned on: the topics it infers from "
                   "each sentence's document context (default), or an ablation: those of "
                   "another document of the file (shuffled) or uninformative topics "
                   "(uniform: proportions 1/T; Topic-RNN's theta at its prior mean 0)")
    p.add_argument("--context", choices=CONTEXTS, default=None,
                   help="the context protocol of the evaluation, for a sentence-mode model "
                   "that reads its document's bag of words: rest (the document minus the "
                   "sentence) or preceding (only the sentences before it); default: the "
                   "protocol the run was trained with. A run trained under rest and scored "
                   "under preceding is how Zheng, Vafa and Blei (2023) evaluate: their code "
                   "trains on the rest of the document and scores on the text before")
    args = p.parse_args(argv)
    from tcnlm_tf.metrics.evaluation import corpus_nll
    from tcnlm_tf.metrics.perplexity import perplexity
    from tcnlm_tf.runs.loading import load_run

    run = load_run(args.run, data_dir=args.data_dir)
    path = args.text_file or split_file(run, "test")
    nll, tokens = corpus_nll(run, read_documents(path), args.batch_size,
                             split=None if args.text_file else "test", topics=args.topics,
                             context=args.context)
    result = {"file": str(path), "perplexity": perplexity(nll, tokens),
              "predicted_tokens": int(tokens), "nll": nll, "checkpoint": run.checkpoint,
              "topics": args.topics, "context": args.context}
    print(f"{run.config.model.model} perplexity on {path}"
          f"{'' if args.topics == 'inferred' else f' with {args.topics} topics'}"
          f"{'' if args.context is None else f' under the {args.context} protocol'}: "
          f"{result['perplexity']:.2f} ({int(tokens)} predicted tokens)")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
