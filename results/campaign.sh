#!/usr/bin/env bash
# The long trainings behind the results report, started and stopped as one campaign.
#
#   bash results/campaign.sh start    # resume every unfinished run (or start it), in the background
#   bash results/campaign.sh stop     # SIGTERM them and wait: each saves a checkpoint and exits
#   bash results/campaign.sh status   # which campaign processes run, and train.status of the runs
#
# The runs live outside the checkout, in $TCNLM_RUNS_DIR (default ~/runs), so that they outlive
# a checkout laid anew; a lost machine still loses an unfinished run, which is why every
# finished row's record is committed under results/ by the comparison itself.
#
# Each comparison trains on the code of one pinned commit (its first argument below), so that
# every seed of a row comes from one commit whatever happens to the checkout meanwhile: `start`
# clones the checkout's repository into <parent of the checkout>/campaign-<commit> at that
# commit (a git work tree, so each run's provenance names the commit and a clean tree), and
# removes the copies no campaign process works from any more. It refuses to start while a
# campaign process runs (stop first, then start again).
set -euo pipefail

CHECKOUT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${TCNLM_RUNS_DIR:-$HOME/runs}
PY=$CHECKOUT/.venv/bin/python
PARENT=$(dirname "$CHECKOUT")
PATTERN='campaign-chain|evaluate\.compare .*--commit-records|train\.run .*--runs-dir'
#: the commit the comparisons below train with (provenance, per-document test scores, exact
#: resume of the variational models), the one of the --long-sentences carry measurement, the
#: one of the precision comparison (the written-out LSTM and TC-LSTM recurrences and the
#: bfloat16 output-layer products whose speed the choice of default precision weighs), and
#: the one its TCNLM trains with under mixed_bfloat16: the TC-LSTM's grouped products as a
#: batched matmul, whose float32 products are PRECISION_CODE's einsum's (gradients to
#: rounding) and whose bfloat16 ones are exact to one rounding and, on a CPU without bfloat16
#: instructions, about 7x faster per TCNLM step (docs/benchmarks.md); the sentence LSTMs of
#: both precisions and TCNLM's float32 run stay at PRECISION_CODE; and the one of the
#: comparisons that start after it, tied-softmax, decoders and table6: the SDLM's sparse
#: product by CSR kernels (the same bits at a fraction of the time) and the output layer run
#: at the real targets only (0.6-0.9x the step of the models with large output layers in
#: sentence mode; the same values, gradients to rounding; docs/benchmarks.md); and the one of
#: decoders: SCORED_CODE with the mixture of softmaxes' log-normalisers keeping their
#: exponentials for the backward pass (the same bits, about 0.9x an lstm-mos step)
CODE=d4c5efaccf614242b339dfc18aa6b5ab896c9f24
CARRY_CODE=8acdfb26d949381fcfbfa763a256e8ce821505c9
PRECISION_CODE=33f4a3aab4ef9496fd76f0a04083556ee7ec2899
BF16_CODE=c281eea4e9ec795b3d7e2cd9cb376afd86eee00a
SCORED_CODE=ac92d0a82583ecc9cde6906e1e4e4c67e10d764c
DECODERS_CODE=39369501ffcb954393c00cd1a02a8cd96a21d828

campaign_pids() { pgrep -f "$PATTERN" || true; }

frozen_copy() {
    local commit=$1 copy=$PARENT/campaign-${1:0:12}
    if [ ! -d "$copy" ]; then
        rm -rf "$copy.tmp"
        git clone -q --no-checkout "$CHECKOUT" "$copy.tmp"
        git -C "$copy.tmp" checkout -q "$commit"
        mv "$copy.tmp" "$copy"
    fi
    echo "$copy"
}

start() {
    if [ -n "$(campaign_pids)" ]; then
        echo "campaign.sh: campaign processes are running (pids $(campaign_pids | tr '\n' ' '));" \
             "run 'bash results/campaign.sh stop' first" >&2
        exit 1
    fi
    [ -x "$PY" ] || { echo "campaign.sh: $PY is missing; run 'make install' first" >&2; exit 1; }
    mkdir -p "$RUNS"
    local code carry_code precision_code bf16_code scored_code decoders_code
    code=$(frozen_copy "$CODE")
    carry_code=$(frozen_copy "$CARRY_CODE")
    precision_code=$(frozen_copy "$PRECISION_CODE")
    bf16_code=$(frozen_copy "$BF16_CODE")
    scored_code=$(frozen_copy "$SCORED_CODE")
    decoders_code=$(frozen_copy "$DECODERS_CODE")
    export TF_CPP_MIN_LOG_LEVEL=2 PYTHONUNBUFFERED=1 TCNLM_RUNS_DIR=$RUNS

    # Two lanes side by side, one core each: each lane runs its comparisons one after the
    # other, one run at a time with one TensorFlow thread (the setting --jobs 2 gives each
    # run), so a comparison with an odd number of runs or one long row leaves no core idle;
    # a stopped comparison ends its lane (`start` resumes it). Every comparison: the APNEWS
    # sample, the papers' protocol (--context rest, the default), small preset, 50 topics,
    # until converged (patience 2, at most 30 epochs), runs in $RUNS/apnews-<name>, records
    # committed to results/apnews/<name> as each run ends. First, both cores:
    #  seeds: seeds 0, 1, 2 of the seven rows of the converged table.
    # Then lane A:
    #  precision-float32: the sentence LSTM and TCNLM, seed 0, under float32 (beside
    #     precision-mixed_bfloat16 below: bfloat16 becomes the default only if it costs at
    #     most 1 % test perplexity at convergence);
    #  long-sentences-carry: the sentence LSTM and TDLM, seed 0, with the state carried
    #     across the pieces of long sentences (the papers' protocol resets it);
    #  tied-softmax: the topic rows and the document LSTM with a tied full softmax, seed 0
    #     (at SCORED_CODE);
    #  decoders: MoS and SDLM (WordNet) to convergence, seed 0 (at DECODERS_CODE).
    # Lane B:
    #  precision-mixed_bfloat16: the same two rows under mixed_bfloat16 (TCNLM at BF16_CODE);
    #  full-softmax: the sentence and document LSTM with Topic-RNN's untied full softmax;
    #  table6: the TCNLM paper's Table 6 on APNEWS (1x100 LSTM, T = 30), 3 seeds (at
    #     SCORED_CODE).
    local stop_words=../shared/data/stopwords/mallet-en.txt
    nohup bash -c '
        : campaign-chain
        # records: relative to the frozen copies (the checkout beside them), as the
        # comparisons name them in their tables
        py=$0 runs=$1 records=$2/results/apnews stop_words=$3 code=$4 carry_code=$5
        precision_code=$6 bf16_code=$7 scored_code=$8 decoders_code=$9
        compare_at() { (cd "$1" && "$py" -m evaluate.compare --dataset apnews \
            --data-dir ../shared/data --max-epochs 30 --jobs 2 --cache-dir "$runs/cache" \
            --commit-records --name "apnews-$2" --record-dir "$records/$2" "${@:3}") \
            >> "$runs/apnews-$2.log" 2>&1; }
        # one run at a time, one thread: a lane
        lane_at() { TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 \
            compare_at "$1" "$2" --jobs 1 "${@:3}"; }
        lane() { lane_at "$code" "$@"; }
        topics=(-- --topic-min-docs 10 --stopwords "$stop_words")
        precision() { lane_at "$2" "precision-$1" --num-topics 50 \
            --reference lstm --models lstm,tcnlm "${topics[@]}" --precision "$1"; }
        lane_a() {
            precision float32 "$precision_code" &&
            lane_at "$carry_code" long-sentences-carry --num-topics 50 \
                --reference lstm --models lstm,tdlm "${topics[@]}" --long-sentences carry &&
            lane_at "$scored_code" tied-softmax --num-topics 50 --reference lstm-document \
                --models lstm-document,tdlm,lda_lstm,tcnlm "${topics[@]}" \
                --decoder softmax --tie-embeddings &&
            lane_at "$decoders_code" decoders --num-topics 50 --reference lstm-tied \
                --models lstm-mos,sdlm "${topics[@]}"; }
        lane_b() {
            precision mixed_bfloat16 "$bf16_code" &&
            lane full-softmax --num-topics 50 --models lstm,lstm-document \
                "${topics[@]}" --decoder softmax &&
            lane_at "$scored_code" table6 --seeds 0,1,2 --num-topics 30 --reference lstm \
                --models lstm,tcnlm,tcnlm-constant-t,moe "${topics[@]}" --hidden-size 100; }
        compare_at "$code" seeds --seeds 0,1,2 --num-topics 50 --ablations \
            --models lstm,lstm-document,lstm-tied,tdlm,lda_lstm,tcnlm,topic_rnn \
            "${topics[@]}" &&
        { lane_a & a=$!
          lane_b & b=$!
          wait $a; a=$?; wait $b && [ $a = 0 ]; }
    ' "$PY" "$RUNS" "../$(basename "$CHECKOUT")" "$stop_words" "$code" "$carry_code" \
        "$precision_code" "$bf16_code" "$scored_code" "$decoders_code" \
        > /dev/null 2>&1 &
    echo "started the campaign (pid $!) from $code; logs in $RUNS/<comparison>.log"

    sleep 5
    local copy
    for copy in "$PARENT"/campaign-*; do
        [ "$copy" = "$code" ] || [ "$copy" = "$carry_code" ] \
            || [ "$copy" = "$precision_code" ] || [ "$copy" = "$bf16_code" ] \
            || [ "$copy" = "$scored_code" ] || [ "$copy" = "$decoders_code" ] && continue
        if ! ls -l /proc/[0-9]*/cwd 2>/dev/null | grep -q -- "-> $copy\( (deleted)\)\?$"; then
            rm -rf "$copy"
            echo "removed the old frozen copy $copy"
        fi
    done
}

stop() {
    local pids
    pids=$(campaign_pids)
    if [ -z "$pids" ]; then
        echo "no campaign process is running"
        return
    fi
    # SIGTERM the chain and the comparisons (they pass it on to their rows)
    kill -TERM $pids 2>/dev/null || true
    local waited=0
    while [ -n "$(campaign_pids)" ] && [ $waited -lt 300 ]; do
        sleep 5
        waited=$((waited + 5))
    done
    if [ -n "$(campaign_pids)" ]; then
        echo "campaign.sh: still running after ${waited}s: $(campaign_pids | tr '\n' ' ')" >&2
        exit 1
    fi
    echo "stopped (${waited}s); each run saved a checkpoint: 'bash results/campaign.sh start' resumes"
}

status() {
    local pids
    pids=$(campaign_pids)
    if [ -n "$pids" ]; then
        ps -o pid,etime,args -p "$(echo $pids | tr ' ' ',')" | cut -c1-200
    else
        echo "no campaign process is running"
    fi
    "$PY" -m train.status --runs-dir "$RUNS"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: bash results/campaign.sh start|stop|status" >&2; exit 2 ;;
esac
