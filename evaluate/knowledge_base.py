"""``python -m evaluate.knowledge_base [train.run flags]``: the word -> sense -> sememe
knowledge base that ``--decoder sdlm`` with these flags would build over the corpus's LM
vocabulary, described by its sparsity (words covered, senses per word, sememes per sense,
experts per word, senses per expert, and the share of training tokens whose word has only a
private sense) beside the two HowNet numbers of Gu et al. 2018 Sec. 3.3 (3.4 experts per
word, 22 senses per expert).
For ``wordnet`` it shows the knowledge base without the stop-word rule beside the one a run
builds (the words of ``--stopwords`` get private senses), so the rule's effect on the
sparsity is seen. It trains nothing and writes nothing."""
from __future__ import annotations

from tcnlm_tf.errors import exit_on_user_error


@exit_on_user_error
def main(argv: list[str] | None = None) -> str:
    from tcnlm_tf.cli.command_line import build_parser, config_from_args

    parser = build_parser()
    parser.prog = "python -m evaluate.knowledge_base"
    parser.description = __doc__.split(": ", 1)[1]
    parser.epilog = ("example: python -m evaluate.knowledge_base --dataset apnews --data-dir "
                     "../shared/data --knowledge-base wordnet --stopwords "
                     "../shared/data/stopwords/mallet-en.txt")
    args = parser.parse_args(argv)
    # TensorFlow's start-up (and its log lines) only once the flags are good
    from tcnlm_tf.data import knowledge
    from tcnlm_tf.data.loading import load_corpus
    from tcnlm_tf.decoders.output_layers import build_run_knowledge_base
    from tcnlm_tf.metrics.baselines import target_counts

    args.decoder = "sdlm"
    config = config_from_args(args)
    config.validate()
    corpus = load_corpus(config.data, cache_dir=args.cache_dir)
    counts = target_counts(corpus.splits["train"], len(corpus.lm_vocab), config.data.line_end)
    spec = config.model.decoder_option("knowledge_base")
    if spec == "wordnet":
        columns = {"all words": build_run_knowledge_base(config, corpus, stopword_rule=False),
                   "stop words private": build_run_knowledge_base(config, corpus)}
    else:
        columns = {spec: build_run_knowledge_base(config, corpus)}
    table = knowledge.format_statistics(
        *(knowledge.statistics(kb, counts) for kb in columns.values()), labels=list(columns))
    print(f"knowledge base {spec} over the {config.data.dataset} LM vocabulary "
          f"({len(corpus.lm_vocab):,} words; token mass: training targets):\n{table}")
    return table


if __name__ == "__main__":
    main()
