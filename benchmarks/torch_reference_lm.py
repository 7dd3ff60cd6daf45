"""``python -m benchmarks.torch_reference_lm``: the SDLM authors' tied-LSTM baseline recipe
in plain PyTorch, independent of this project's TensorFlow stack, as a reference curve for
the People's Daily baseline (the SDLM paper's Table 1: 105.35 validation / 104.67 test).

The authors trained the baseline with ``LM/run_tied_lstm_bl.py`` of thunlp/SDLM-pytorch,
which is PyTorch's ``word_language_model`` example: each split read as one stream of
tokens (no ``<eos>``: the authors never predict one), cut into ``--batch-size`` lanes
(evaluation: 10 lanes) read ``--bptt`` tokens at a time with the state carried and
detached; an embedding, a ``torch.nn.LSTM`` with dropout between layers, dropout on the
embeddings and on the output, and a decoder whose weight is the embedding (tied);
embeddings U(±0.1), decoder bias 0, the LSTM's own initialisation; plain SGD at ``--lr``
on gradients clipped to norm ``--clip``; after each epoch the learning rate is halved
if the validation loss did not improve (training goes on from the current weights), and
the test is scored with the best weights. Their evaluation divides the summed loss by the
rows of the lane matrix, one more than the targets; both that and the exact per-token mean
are printed.

Written here from that description (the authors' model module is missing from their
repository); it needs PyTorch and, for speed, a GPU. One JSON line per epoch goes to
``--output``, then one with the test perplexity.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from benchmarks.harness import Parser
from tcnlm_tf.arguments import finite_float, integer, random_seed
from tcnlm_tf.errors import exit_on_user_error
from tcnlm_tf.options import rate


def read_stream(path: Path, vocab: dict[str, int] | None) -> tuple[list[int], dict[str, int]]:
    """The file's tokens as ids, lines concatenated without ``<eos>``. With ``vocab=None``
    the vocabulary is built from this file (``<unk>`` first); otherwise unknown tokens map
    to ``<unk>``."""
    tokens = path.read_text(encoding="utf-8").split()
    if vocab is None:
        vocab = {"<unk>": 0}
        for token in tokens:
            vocab.setdefault(token, len(vocab))
    unk = vocab["<unk>"]
    return [vocab.get(t, unk) for t in tokens], vocab


def positive(text: str) -> float:
    """argparse type: a finite float above 0."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
    return value


def dropout(text: str) -> float:
    """argparse type: a dropout rate (:func:`tcnlm_tf.options.rate`: in [0, 1))."""
    value = finite_float(text)
    if not rate(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be in [0, 1)")
    return value


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    p = Parser(allow_abbrev=False, prog="python -m benchmarks.torch_reference_lm",
               description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, required=True,
                   help="directory holding train.txt, valid.txt, test.txt")
    p.add_argument("--output", type=Path, required=True, help="JSON lines, one per epoch")
    p.add_argument("--emsize", type=integer(1), default=650,
                   help="embedding size (default: 650, the medium model)")
    p.add_argument("--nhid", type=integer(1), default=650,
                   help="LSTM units, equal to --emsize (tied; default: 650)")
    p.add_argument("--nlayers", type=integer(1), default=2, help="LSTM layers (default: 2)")
    p.add_argument("--dropout", type=dropout, default=0.6,
                   help="embedding, between-layer and output dropout (default: 0.6)")
    p.add_argument("--lr", type=positive, default=20.0,
                   help="initial SGD learning rate (default: 20)")
    p.add_argument("--clip", type=positive, default=0.25,
                   help="gradient norm clip (default: 0.25)")
    p.add_argument("--epochs", type=integer(1), default=80,
                   help="epochs (default: 80, the authors' README)")
    p.add_argument("--batch-size", type=integer(1), default=20,
                   help="training lanes (default: 20)")
    p.add_argument("--eval-batch-size", type=integer(1), default=10,
                   help="evaluation lanes (default: 10, the authors' eval_batch_size)")
    p.add_argument("--bptt", type=integer(1), default=35,
                   help="steps per window (default: 35)")
    p.add_argument("--seed", type=random_seed, default=1111,
                   help="torch.manual_seed (default: 1111, the script's)")
    p.add_argument("--time-limit", type=positive, default=None,
                   help="stop after the epoch that ends past this many seconds, then test")
    args = p.parse_args(argv)
    if args.nhid != args.emsize:
        p.error(f"--nhid {args.nhid} must equal --emsize {args.emsize}: the decoder is tied "
                "to the embedding")
    for name in ("train", "valid", "test"):
        if not (args.data_dir / f"{name}.txt").is_file():
            p.error(f"{args.data_dir / f'{name}.txt'} not found: --data-dir must hold "
                    "train.txt, valid.txt and test.txt")

    import torch
    from torch import nn

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_ids, vocab = read_stream(args.data_dir / "train.txt", None)
    splits = {"train": train_ids}
    for name in ("valid", "test"):
        splits[name] = read_stream(args.data_dir / f"{name}.txt", vocab)[0]

    def lanes(ids: list[int], batch: int) -> torch.Tensor:
        """[rows, batch]: the stream cut into ``batch`` contiguous lanes (remainder dropped)."""
        rows = len(ids) // batch
        if rows < 2:
            p.error(f"a split of {len(ids)} tokens is too short for {batch} lanes: give "
                    "fewer lanes or a longer split")
        return torch.tensor(ids[:rows * batch], device=device).view(batch, rows).t().contiguous()

    data = {"train": lanes(splits["train"], args.batch_size),
            "valid": lanes(splits["valid"], args.eval_batch_size),
            "test": lanes(splits["test"], args.eval_batch_size)}
    V = len(vocab)

    class TiedLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(args.dropout)
            self.encoder = nn.Embedding(V, args.emsize)
            self.rnn = nn.LSTM(args.emsize, args.nhid, args.nlayers, dropout=args.dropout)
            self.decoder = nn.Linear(args.nhid, V)
            self.decoder.weight = self.encoder.weight
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)

        def forward(self, x, state):
            out, state = self.rnn(self.drop(self.encoder(x)), state)
            return self.decoder(self.drop(out)), state

    model = TiedLSTM().to(device)
    loss_fn = nn.CrossEntropyLoss()

    def zero_state(batch: int):
        shape = (args.nlayers, batch, args.nhid)
        return (torch.zeros(shape, device=device), torch.zeros(shape, device=device))

    def evaluate(source: torch.Tensor) -> tuple[float, float]:
        """(the authors' loss: summed over targets / rows, the exact per-target mean)."""
        model.eval()
        total, targets = 0.0, 0
        state = zero_state(source.size(1))
        with torch.no_grad():
            for i in range(0, source.size(0) - 1, args.bptt):
                n = min(args.bptt, source.size(0) - 1 - i)
                out, state = model(source[i:i + n], state)
                total += n * loss_fn(out.view(-1, V), source[i + 1:i + 1 + n].reshape(-1)).item()
                targets += n
        return total / source.size(0), total / targets

    lr, best, best_state, start = args.lr, None, None, time.time()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w") as log:
        log.write(json.dumps({"vocab": V, "tokens": {k: len(v) for k, v in splits.items()},
                              "device": str(torch.cuda.get_device_name(0)
                                            if device.type == "cuda" else "cpu"),
                              "torch": torch.__version__, **{k: str(v) for k, v in
                                                            vars(args).items()}}) + "\n")
        for epoch in range(1, args.epochs + 1):
            model.train()
            began, state, source = time.time(), zero_state(args.batch_size), data["train"]
            for i in range(0, source.size(0) - 1, args.bptt):
                n = min(args.bptt, source.size(0) - 1 - i)
                state = tuple(s.detach() for s in state)
                model.zero_grad()
                out, state = model(source[i:i + n], state)
                loss = loss_fn(out.view(-1, V), source[i + 1:i + 1 + n].reshape(-1))
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                with torch.no_grad():
                    for param in model.parameters():
                        param.add_(param.grad, alpha=-lr)
            authors, exact = evaluate(data["valid"])
            record = {"epoch": epoch, "lr": lr, "valid_ppl": math.exp(authors),
                      "valid_ppl_exact": math.exp(exact), "seconds": time.time() - began}
            if best is None or authors < best:
                best = authors
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            else:
                lr /= 2.0
            log.write(json.dumps(record) + "\n")
            log.flush()
            print(json.dumps(record), flush=True)
            if args.time_limit is not None and time.time() - start > args.time_limit:
                break
        model.load_state_dict(best_state)
        authors, exact = evaluate(data["test"])
        record = {"test_ppl": math.exp(authors), "test_ppl_exact": math.exp(exact),
                  "best_valid_ppl": math.exp(best), "epochs": epoch}
        log.write(json.dumps(record) + "\n")
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
