#!/usr/bin/env bash
# The long trainings behind RESULTS.md's open tables, started and stopped as one campaign.
#
#   bash results/campaign.sh start    # resume every unfinished run (or start it), in the background
#   bash results/campaign.sh stop     # SIGTERM them and wait: each saves a checkpoint and exits
#   bash results/campaign.sh status   # which campaign processes run, and train.status of the runs
#
# The runs live outside the checkout, in $TCNLM_RUNS_DIR (default ~/runs), so that they outlive
# a checkout laid anew; a lost machine still loses an unfinished run, which is why every
# finished row's record is committed under results/ by the comparison itself.
# `start` runs the code of a frozen copy of HEAD (/work/campaign-<commit>, made with
# git archive beside the checkout), so that editing the checkout never changes code under a
# running training; it then removes the frozen copies that no process works from any more.
# It refuses to start while a campaign process runs (stop first, then start again).
set -euo pipefail

CHECKOUT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${TCNLM_RUNS_DIR:-$HOME/runs}
PY=$CHECKOUT/.venv/bin/python
PARENT=$(dirname "$CHECKOUT")
PATTERN='(evaluate\.compare|train\.run|train\.worker).*(--runs-dir|i26-apnews|i29|i31)|compare\(\) \{'

campaign_pids() { pgrep -f "$PATTERN" || true; }

start() {
    if [ -n "$(campaign_pids)" ]; then
        echo "campaign.sh: campaign processes are running (pids $(campaign_pids | tr '\n' ' '));" \
             "run 'bash results/campaign.sh stop' first" >&2
        exit 1
    fi
    [ -x "$PY" ] || { echo "campaign.sh: $PY is missing; run 'make install' first" >&2; exit 1; }
    local commit frozen
    commit=$(git -C "$CHECKOUT" rev-parse --short HEAD)
    frozen=$PARENT/campaign-$commit
    if [ ! -d "$frozen" ]; then
        mkdir -p "$frozen.tmp"
        git -C "$CHECKOUT" archive HEAD | tar -x -C "$frozen.tmp"
        mv "$frozen.tmp" "$frozen"
    fi
    mkdir -p "$RUNS/i29"
    cd "$frozen"
    export TF_CPP_MIN_LOG_LEVEL=2 PYTHONUNBUFFERED=1 TCNLM_RUNS_DIR=$RUNS

    # One after the other in two slots (--jobs 2), each comparison starting once the one
    # before has finished every row (a stopped one ends the chain; `start` resumes it):
    # issue 26's converged APNEWS table (RESULTS.md, "The converged APNEWS table"), then
    # issue 31's topic rows under the causal protocol and TCNLM and TDLM at 100 and 150
    # topics (the same corpus, preset, seed and stopping rule; the 50-topic rows of the
    # coherence table are issue 26's); then issue 31's 50-topic rows trained again under the
    # papers' protocol (`rest`, issue 26's settings and seed, so the same runs as its records)
    # and scored with the preceding text only (the "preceding" ablation), as the 2023
    # re-evaluation's code evaluates: issue 26's weights were lost with a machine, only their
    # records are kept; then issue 26's MoS and SDLM rows trained on to
    # convergence from copies of their 10-epoch runs, as its tied LSTM was
    # (`i26-apnews-tied`): every one of their 10 epochs improved, so no learning rate was
    # halved and going on under the rule equals having trained under it (without a copy, a
    # machine lost meanwhile, the row trains from epoch 1 under the same rule).
    # They run at nice 5: with issue 29's single run at nice 0 on the 2 cores, that run gets
    # a core to itself (about 20 minutes an epoch instead of 35) and the comparison's two rows
    # share the other, so the longest run, the one a lost machine costs most, ends soonest.
    local stop_words=../shared/data/stopwords/mallet-en.txt
    nohup nice -n 5 bash -c '
        compare() { "$0" -m evaluate.compare --dataset apnews --data-dir ../shared/data \
            --max-epochs 30 --jobs 2 --cache-dir "$1/cache" --commit-records "${@:2}"; }
        compare "$1" --models lstm,tcnlm,lstm-document,tdlm,lclm,lda_lstm,topic_rnn,lstm-1x1000,tcnlm-constant-t,moe,sdlm,lstm-tied,lstm-mos \
            --fixed-budget moe=10,sdlm=10,lstm-tied=10,lstm-mos=10 --num-topics 50 --ablations \
            --name i26-apnews --record-dir "$2/results/i26-apnews" \
            -- --topic-min-docs 10 --stopwords "$3" >> "$1/i26-apnews.log" 2>&1 &&
        compare "$1" --models tcnlm,tdlm,lda_lstm,topic_rnn,tcnlm-constant-t --num-topics 50 \
            --ablations --name i31-apnews-preceding \
            --record-dir "$2/results/i31-apnews-preceding" \
            -- --context preceding --topic-min-docs 10 --stopwords "$3" \
            >> "$1/i31-apnews-preceding.log" 2>&1 &&
        compare "$1" --models tcnlm,tdlm --num-topics 100,150 --ablations --name i31-apnews-topics \
            --record-dir "$2/results/i31-apnews-topics" \
            -- --topic-min-docs 10 --stopwords "$3" >> "$1/i31-apnews-topics.log" 2>&1 &&
        compare "$1" --models tcnlm,tdlm,lda_lstm,topic_rnn --num-topics 50 --ablations \
            --name i31-apnews-rest-scored-preceding \
            --record-dir "$2/results/i31-apnews-rest-scored-preceding" \
            -- --topic-min-docs 10 --stopwords "$3" \
            >> "$1/i31-apnews-rest-scored-preceding.log" 2>&1 &&
        { mkdir -p "$1/i26-apnews-decoders"; for row in lstm-mos sdlm; do
            [ -d "$1/i26-apnews-decoders/$row" ] || [ ! -d "$1/i26-apnews/$row" ] ||
            cp -a "$1/i26-apnews/$row" "$1/i26-apnews-decoders/$row"; done; } &&
        compare "$1" --models lstm-mos,sdlm --num-topics 50 --name i26-apnews-decoders \
            --record-dir "$2/results/i26-apnews-decoders" \
            -- --topic-min-docs 10 --stopwords "$3" >> "$1/i26-apnews-decoders.log" 2>&1
    ' "$PY" "$RUNS" "$CHECKOUT" "$stop_words" > /dev/null 2>&1 &
    echo "started the comparisons of issues 26 and 31 (pid $!, logs $RUNS/i26-apnews.log," \
         "$RUNS/i31-apnews-preceding.log, $RUNS/i31-apnews-topics.log," \
         "$RUNS/i31-apnews-rest-scored-preceding.log, $RUNS/i26-apnews-decoders.log)"

    # Issue 29: People's Daily tied medium LSTM (RESULTS.md, People's Daily section); one
    # thread, as it shares the 2 cores with the comparison's two rows. Once it has evaluated
    # its test split, its record goes to results/i29-peoples-daily/ and is committed (a
    # finished run is only recorded, not trained again).
    local resume=()
    [ -d "$RUNS/i29/pd-tied-medium-none/checkpoints" ] && resume=(--resume)
    TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 nohup bash -c '
        run=$1/i29/pd-tied-medium-none
        { grep -qs "\"test_perplexity\"" "$run/metrics.json" ||
          "$0" -m train.run --dataset peoples_daily --data-dir ../shared/data --preset medium \
            --decoder softmax --tie-embeddings --dropout 0.6 --mode stream --line-end none \
            --seq-len 35 --batch-size 20 --optimizer sgd --learning-rate 20 --clip-norm 0.25 \
            --min-freq 1 --epochs 80 --patience 80 --runs-dir "$1/i29" \
            --run-name pd-tied-medium-none "${@:3}"; } &&
        "$0" -m evaluate.record --run "$run" --record-dir "$2/results/i29-peoples-daily" \
            --commit-records
    ' "$PY" "$RUNS" "$CHECKOUT" "${resume[@]}" >> "$RUNS/i29/pd-tied-medium-none.log" 2>&1 &
    echo "started issue 29's run (pid $!, log $RUNS/i29/pd-tied-medium-none.log)"

    sleep 5
    local copy
    for copy in "$PARENT"/campaign-*; do
        [ "$copy" = "$frozen" ] && continue
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
    # SIGTERM the comparisons first (they pass it on to their rows), then the single runs.
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
