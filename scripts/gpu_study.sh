#!/usr/bin/env bash
# The study's training on one bare GPU machine: scripts/gpu_study.sh CARRY OUT
#
# CARRY (built here, travels with the code): cache/sbert/ — the synthetic world's caption embeddings
#   (python -m reproduce.driver.gpu_carry --out CARRY); flickr8k/ — the Flickr8k bundle, optional
#   (python -m reproduce.bundle --data flickr8k --out CARRY/flickr8k); runs.tar.xz[.partN] — an earlier
#   session's archive, optional: its runs are imported first, so a plan longer than one session goes on.
# OUT: what comes back — runs.tar.xz (every run of the current code, in 16 MiB parts when larger),
#   report.md (device, torch, commit, phases and their wall times, what the runs cost per data set, loss and
#   engine), train.log, bench/.
#
# Steps: check CUDA; bench_cuda.py's correctness parts (losses on CUDA against the CPU, float32 and float64,
# the same run twice, captured runs against eager ones, a run alone against the same run in a pack); train the
# plan with --skip-notebooks for at most LIMIT_S seconds (SIGINT then: finished runs stay cached); export the
# cache's runs. Needs only torch and the scientific stack (no Jupyter, papermill, Ray, sentence model or
# network); the code runs from the checkout (PYTHONPATH), nothing is installed.
#
# Settings (environment): PROFILE (default), DATA (synthetic,flickr8k — flickr8k only with CARRY/flickr8k),
# PAPERS (all), GPU_STUDY_MPS=1 (the CUDA MPS daemon runs while the script does), BENCH_LIMIT_S (none: the
# benchmark parts' time limit; the parts finished by then are reported), WORKERS (16 on CUDA), RUNS_PER_WORKER
# (1; K > 1, runs side by side in each worker, is for the CPU: on CUDA the driver refuses it), LIMIT_S (420; 300
# with the papers' size),
# GPU_STUDY_CACHE (a fresh folder under /tmp), GPU_STUDY_BENCH=0 (no correctness parts), GPU_STUDY_PARTS
# (bench_cuda.py's parts to run instead of the correctness parts, e.g. add ",packed": epochs an hour for
# processes × runs side by side), GPU_STUDY_ALLOW_CPU=1 (the CPU stands in: a check of this script, e.g.
# PROFILE=smoke; tests/reproduce/driver/test_gpu_study.py), ENGINE (auto: the packed engine on CUDA, solo on the
# CPU; solo or pack to choose) and PACK_WIDTH (8: members of a pack), PAPER_LIMIT_S (150 on CUDA with a Flickr8k
# bundle, else 0: seconds for the papers' size — PAPER_PROFILE, default paper — of the main comparison, the
# overview's arms on Flickr8k, after the plan; exported into runs_paper.tar.xz), TOTAL_S (540: the whole visit's
# budget — the papers'-size phase gets at most what is left of it after the plan, less 60 s for the exports — so
# one command fits the device's 10-minute limit; with the papers' size on, LIMIT_S defaults to 300).
set -euo pipefail
CARRY=$(cd "${1:?usage: scripts/gpu_study.sh CARRY OUT}" && pwd)
mkdir -p "${2:?usage: scripts/gpu_study.sh CARRY OUT}"
OUT=$(cd "$2" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
PROFILE=${PROFILE:-default}
TOTAL_S=${TOTAL_S:-540}
export PYTHONPATH="$ROOT/src:$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONHASHSEED=0 PYTHONUNBUFFERED=1
export COHERENT_ITR_CACHE=${GPU_STUDY_CACHE:-$(mktemp -d /tmp/coherent_itr_gpu.XXXXXX)}
unset COHERENT_ITR_RUNS_FROM
t0=$(date +%s)
phase() { echo "| $1 | $(( $(date +%s) - t0 )) s |" >>"$OUT/phases.md"; echo "gpu_study: $1 ($(( $(date +%s) - t0 )) s)"; }
: >"$OUT/phases.md"

# 1. the device
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    DEVICE=cuda
    WORKERS=${WORKERS:-16}
elif [ "${GPU_STUDY_ALLOW_CPU:-0}" = 1 ]; then
    DEVICE=cpu
    WORKERS=${WORKERS:-2}
else
    echo "gpu_study: no CUDA device (torch.cuda.is_available() is False); GPU_STUDY_ALLOW_CPU=1 checks the script on the CPU" >&2
    exit 2
fi
phase "device $DEVICE checked"

# 1b. CUDA MPS (GPU_STUDY_MPS=1): the workers' kernels then run at once instead of by turns on the one GPU
MPS=off
if [ "${GPU_STUDY_MPS:-0}" = 1 ] && [ "$DEVICE" = cuda ]; then
    export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/coherent_itr-mps/pipe}
    export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/coherent_itr-mps/log}
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
        trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true' EXIT
        if "$PY" -c "import torch; torch.zeros(1, device='cuda').sum().item()"; then
            MPS=on
        else
            echo quit | nvidia-cuda-mps-control || true
            echo "gpu_study: a CUDA client failed under MPS; the daemon is stopped, training goes on without it"
        fi
    else
        echo "gpu_study: GPU_STUDY_MPS=1 but nvidia-cuda-mps-control -d failed; training goes on without MPS"
    fi
    phase "CUDA MPS $MPS"
fi

# 2. data: the synthetic world's caption embeddings; Flickr8k from its bundle
mkdir -p "$COHERENT_ITR_CACHE"
if [ -d "$CARRY/cache/sbert" ]; then
    cp -r "$CARRY/cache/sbert" "$COHERENT_ITR_CACHE/"
fi
DATA=${DATA:-synthetic,flickr8k}
if [ -f "$CARRY/flickr8k/MANIFEST.json" ]; then
    export FLICKR8K_DIR="$CARRY/flickr8k"
else
    DATA=$(echo "$DATA" | tr ',' '\n' | grep -vx flickr8k | paste -sd, - || true)
    if [ -z "$DATA" ]; then
        echo "gpu_study: DATA asks for Flickr8k only and there is no bundle in $CARRY/flickr8k (python -m reproduce.bundle)" >&2
        exit 2
    fi
    echo "gpu_study: no Flickr8k bundle in $CARRY/flickr8k: $DATA only"
fi
if ls "$CARRY"/runs.tar.xz* >/dev/null 2>&1; then
    first=$(ls "$CARRY"/runs.tar.xz* | head -1)
    "$PY" -m reproduce --import-runs "$first"
    phase "earlier runs imported"
fi

# 3. correctness on this device (losses against the CPU, the same run twice)
if [ "${GPU_STUDY_BENCH:-1}" = 1 ]; then
    bench=(--out "$OUT/bench" --parts "${GPU_STUDY_PARTS:-losses,losses_float64,determinism,graph_runs,packed_identity}")
    if [ "$DEVICE" = cpu ]; then bench+=(--allow-cpu --quick); fi
    limit=()
    if [ -n "${BENCH_LIMIT_S:-}" ]; then limit=(timeout --signal=INT --kill-after=20 "$BENCH_LIMIT_S"); fi
    "${limit[@]}" "$PY" benchmarks/bench_cuda.py "${bench[@]}" >"$OUT/bench.log" 2>&1 ||
        echo "gpu_study: bench_cuda.py failed or reached BENCH_LIMIT_S (see bench.log; the parts before are in bench/)"
    phase "bench_cuda correctness parts"
fi

# the papers' size after the plan (4b): on CUDA with a Flickr8k bundle unless PAPER_LIMIT_S says otherwise
default_paper_s=0
if [ "$DEVICE" = cuda ] && [ -n "${FLICKR8K_DIR:-}" ]; then default_paper_s=150; fi
PAPER_LIMIT_S=${PAPER_LIMIT_S:-$default_paper_s}
if [ "$PAPER_LIMIT_S" -gt 0 ]; then LIMIT_S=${LIMIT_S:-300}; else LIMIT_S=${LIMIT_S:-420}; fi

# 4. train for at most LIMIT_S seconds; SIGINT then (the driver keeps every finished run)
papers=()
if [ -n "${PAPERS:-}" ]; then papers=(--papers "$PAPERS"); fi
smi=""
if [ "$DEVICE" = cuda ] && command -v nvidia-smi >/dev/null 2>&1; then  # the GPU's use while the plan trains
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -l 5 >"$OUT/gpu_use.csv" 2>/dev/null &
    smi=$!
fi
ENGINE=${ENGINE:-auto}
PACK_WIDTH=${PACK_WIDTH:-8}
engine=(--engine "$ENGINE" --pack-width "$PACK_WIDTH")
set +e
timeout --foreground --preserve-status --signal=INT --kill-after=60 "$LIMIT_S" "$PY" -m reproduce --profile "$PROFILE" --data "$DATA" "${papers[@]}" \
    --skip-notebooks --no-progress --workers "$WORKERS" --runs-per-worker "${RUNS_PER_WORKER:-1}" "${engine[@]}" >"$OUT/train.log" 2>&1
train_rc=$?
set -e
if [ -n "$smi" ]; then kill "$smi" 2>/dev/null || true; fi
tail -5 "$OUT/train.log"
phase "training (exit $train_rc: 0 done, 130 stopped at the time limit, else failures in train.log)"

# 4b. the papers' size: the main comparison's arms on Flickr8k at PAPER_PROFILE, for at most PAPER_LIMIT_S seconds
PAPER_PROFILE=${PAPER_PROFILE:-paper}
left=$(( TOTAL_S - ($(date +%s) - t0) - 60 ))  # what the visit's budget leaves, the exports' minute kept
if [ "$PAPER_LIMIT_S" -gt "$left" ]; then PAPER_LIMIT_S=$(( left > 0 ? left : 0 )); fi
paper_rc=skipped
if [ "$PAPER_LIMIT_S" -gt 0 ]; then
    PAPER_CACHE="$COHERENT_ITR_CACHE-paper"  # a cache of its own: each archive holds one size's runs
    mkdir -p "$PAPER_CACHE"
    if [ -d "$CARRY/cache/sbert" ]; then cp -r "$CARRY/cache/sbert" "$PAPER_CACHE/"; fi
    set +e
    COHERENT_ITR_CACHE="$PAPER_CACHE" timeout --foreground --preserve-status --signal=INT --kill-after=60 "$PAPER_LIMIT_S" "$PY" -m reproduce --profile "$PAPER_PROFILE" \
        --data "${PAPER_DATA:-flickr8k}" --papers overview --skip-notebooks --no-progress --workers "$WORKERS" "${engine[@]}" >"$OUT/train_paper.log" 2>&1
    paper_rc=$?
    set -e
    tail -3 "$OUT/train_paper.log"
    phase "the papers' size ($PAPER_PROFILE, exit $paper_rc)"
fi
# the export reads the runs under the engine they trained with (auto resolves as the driver's did)
export COHERENT_ITR_ENGINE="$ENGINE:$PACK_WIDTH"
if [ "$ENGINE" = solo ]; then export COHERENT_ITR_ENGINE=solo; fi

# 5. the archive and the report
if "$PY" -m reproduce.driver.run_archive --export "$OUT/runs.tar.xz" --profile "$PROFILE" --data "$DATA" --no-progress; then
    phase "runs exported"
else
    phase "nothing exported"
fi
if [ "$paper_rc" != skipped ]; then
    if COHERENT_ITR_CACHE="$PAPER_CACHE" "$PY" -m reproduce.driver.run_archive --export "$OUT/runs_paper.tar.xz" --profile "$PAPER_PROFILE" \
        --data "${PAPER_DATA:-flickr8k}" --no-progress; then
        phase "the papers' size exported"
    else
        phase "nothing of the papers' size exported"
    fi
fi
{
    echo "# gpu_study.sh on $(hostname) — $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    "$PY" -c "import torch, platform; d = torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu'; print(f'- device: {d}; torch {torch.__version__}; python {platform.python_version()}')"
    echo "- commit: $(git rev-parse HEAD 2>/dev/null || echo unknown); profile $PROFILE; data $DATA; workers $WORKERS × ${RUNS_PER_WORKER:-1} runs side by side; limit ${LIMIT_S} s"
    echo "- engine: $ENGINE (pack width $PACK_WIDTH; auto = packed on CUDA, solo on a CPU)"
    echo "- training exit status: $train_rc"
    echo "- the papers' size ($PAPER_PROFILE, ${PAPER_LIMIT_S} s): exit status $paper_rc"
    if [ -s "$OUT/gpu_use.csv" ]; then
        awk -F', *' '{u += $1; if ($2 > m) m = $2; n++} END {printf "- GPU while training: %.0f %% busy on average over %d samples 5 s apart, at most %d MiB used\n", u / n, n, m}' "$OUT/gpu_use.csv"
    fi
    echo "- CUDA MPS: $MPS (GPU_STUDY_MPS=1 turns it on; control daemon: $(command -v nvidia-cuda-mps-control || echo 'not installed'))"
    echo
    echo "| phase | ends at |"
    echo "|---|---|"
    cat "$OUT/phases.md"
    echo
    echo "Last lines of the training log:"
    echo
    tail -8 "$OUT/train.log" | sed 's/^/    /'
    echo
    echo "What the runs in the cache cost here ($WORKERS workers × ${RUNS_PER_WORKER:-1} side by side; python -m reproduce.protocol.cost):"
    echo
    "$PY" -m reproduce.protocol.cost "$COHERENT_ITR_CACHE" || true
} >"$OUT/report.md"
rm -f "$OUT/phases.md"
cat "$OUT/report.md"
