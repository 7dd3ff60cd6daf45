#!/usr/bin/env bash
# Two workers on 127.0.0.1 (--strategy multi_worker) against one process, on a generated
# corpus: the same flags, one run stopped partway through its first epoch and resumed
# (both workers restarted with --resume), the other uninterrupted. Prints each worker's
# count of the targets it read per epoch (they add up to the epoch's), and both runs'
# validation and test perplexities.
#
#   bash benchmarks/two_workers.sh WORK_DIR [TOKENS] [EXTRA TRAIN.RUN FLAGS...]
#
# TOKENS: training tokens of the generated corpus (default 1M). Runs from the checkout's
# root with the Python on PATH (or $PYTHON).
set -euo pipefail
if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    exit $(( $# < 1 ? 2 : 0 ))
fi
work=$(mkdir -p "$1" && cd "$1" && pwd)
tokens=${2:-1M}
shift $(( $# >= 2 ? 2 : 1 ))
python=${PYTHON:-python}
cd "$(dirname "$0")/.."

corpus=$("$python" - "$work/corpora" "$tokens" <<'EOF'
import sys
from pathlib import Path
from benchmarks.bench_corpus_size import CorpusSpec, ensure_corpus, token_count
spec = CorpusSpec(token_count(sys.argv[2]), vocabulary=5000, topics=20)
print(ensure_corpus(Path(sys.argv[1]), spec)["path"])
EOF
)
flags=(--dataset "$(basename "$corpus")" --data-dir "$(dirname "$corpus")"
       --cache-dir "$work/cache" --runs-dir "$work/runs" --model lstm
       --hidden-size 64 --embedding-dim 32 --batch-size 64 --seq-len 30 --epochs 2
       --log-every 100 "$@")
rm -rf "$work/runs" "$work/logs"
mkdir -p "$work/logs"
export TF_CPP_MIN_LOG_LEVEL=2 TCNLM_COLLECTIVE_TIMEOUT=300

workers() {   # workers TAG FLAGS...: both workers of one cluster, each logging to a file
    local tag=$1 ports cluster pids=() status=0
    shift
    ports=$("$python" -c 'import socket
s = [socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
    read -r a b <<<"$ports"
    cluster="{\"worker\": [\"127.0.0.1:$a\", \"127.0.0.1:$b\"]}"
    for index in 0 1; do
        TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": $index}}" \
            "$python" -m train.run "${flags[@]}" --strategy multi_worker "$@" \
            >"$work/logs/$tag-worker-$index.log" 2>&1 &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
    return "$status"
}

echo "corpus: $corpus"
echo "flags: ${flags[*]}"
echo "== one process"
"$python" -m train.run "${flags[@]}" --run-name one >"$work/logs/one.log" 2>&1
echo "== two workers: 150 steps, then both restarted with --resume"
workers first --run-name two --max-steps 150
workers resumed --run-name two --resume
for log in "$work"/logs/{one,first-worker-0,first-worker-1,resumed-worker-0,resumed-worker-1}.log; do
    echo "-- $(basename "$log")"
    grep -E "resumed from|input pipeline|^epoch [0-9]+:|^epoch [0-9]+/|perplexity|^  (unigram|lstm) |stopp" "$log" || true
done
