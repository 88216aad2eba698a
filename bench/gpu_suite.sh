#!/usr/bin/env bash
# On a GPU machine: build galfast against the machine's own torch (no network needed), run the
# CUDA tests, then the GPU benchmarks (CPU and CUDA peers side by side where a file has both).
# Results land in $OUT (default ./gpu-results): log.txt (card, build info, test summary, tables),
# build.txt, cuda_tests.txt, call_cost.txt (a call's host time, bench/cuda_call_cost.py),
# kernels.json (the sum kernels against cuSPARSE and cupyx),
# epoch.txt (whole GAL MovieLens epochs and a profile), run.txt (whole `galfast run`s) and one
# pytest-benchmark JSON per benchmark file. A failing stage is logged and the next one still
# runs; every stage has a time limit, so a hang cannot eat the machine.
#   bash bench/gpu_suite.sh                                      # everything
#   BENCH_FILTER="gcn" bash bench/gpu_suite.sh                   # narrow every benchmark (-k)
#   BENCH_CASES="bench_aggregate:cuda" bash bench/gpu_suite.sh   # file:filter pairs (_ = space)
#   CMAKE_CUDA_ARCHITECTURES=90-real bash bench/gpu_suite.sh     # build for the card only
#   EPOCH_KINDS="gcn" BENCH_CASES=" " bash bench/gpu_suite.sh     # GCN epochs, no benchmarks
#   EPOCH_KINDS= KERNELS=0 RUNS=0 CALL_COST=0 bash bench/gpu_suite.sh   # skip stages
# The build needs setuptools >= 77 (pyproject.toml's SPDX licence string); on an offline
# machine with an older one, install a newer wheel first and put it on PYTHONPATH.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-results}"
mkdir -p "$OUT"
LOG="$OUT/log.txt"
export PYTHONUNBUFFERED=1
stage() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }

stage card
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee -a "$LOG"
stage build
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" python -m pip install --no-build-isolation --no-deps . \
  >"$OUT/build.txt" 2>&1 || { tail -n 40 "$OUT/build.txt" | tee -a "$LOG"; exit 1; }
# From outside the checkout, so that the installed package (with its extension) is imported.
(cd /tmp && python -c "import galfast, json; print(json.dumps(galfast.build_info()))") 2>&1 \
  | tee -a "$LOG"

# `pytest` (not `python -m pytest`) keeps the source tree off sys.path: the installed build runs.
stage cuda tests
timeout "${TEST_TIMEOUT:-240}" pytest tests -m cuda -q -p no:cacheprovider -p no:benchmark \
  -n 8 --timeout=120 -W ignore::DeprecationWarning >"$OUT/cuda_tests.txt" 2>&1
tail -n 30 "$OUT/cuda_tests.txt" | tee -a "$LOG"

# Where a GPU aggregation call's host time goes (bench/cuda_call_cost.py), with a cProfile.
if [ "${CALL_COST:-1}" = 1 ]; then
  stage call cost
  (cd bench && timeout 120 python cuda_call_cost.py --profile) >"$OUT/call_cost.txt" 2>&1
  grep -E "^(empty|pubmed|movielens) |: [0-9.]+ us$" "$OUT/call_cost.txt" | tee -a "$LOG"
fi

if [ "${KERNELS:-1}" = 1 ]; then
  stage sum kernels
  (cd bench && timeout "${KERNELS_TIMEOUT:-150}" python aggregate_cuda_kernels.py \
    --json "$OUT/kernels.json") 2>&1 | tee -a "$LOG"
fi

# Whole `galfast run`s on the GPU (RUN_FLAGS: one run per entry, "_" for none: CUDA graphs, the
# default there), then with the last entry's flags one timed by phase (bench/run_timeline.py)
# and one under cProfile (bench/run_profile.py; its stats in run.prof).
if [ "${RUNS:-1}" = 1 ]; then
  stage whole runs
  RUN="run --dataset synthetic-movielens-1m --encoder cheb --seeds 1 --device cuda --quiet"
  # The lent machines' site-packages hold no compiled byte code and Python cannot add it there,
  # so every process compiled torch's modules again (seconds). A user's install has it: the
  # runs use a byte-code cache in /tmp, filled by one untimed run first.
  export PYTHONPYCACHEPREFIX=/tmp/pycache
  unset PYTHONDONTWRITEBYTECODE
  (cd /tmp && timeout 120 galfast $RUN --out /tmp/warmup.json) >"$OUT/run_warmup.txt" 2>&1
  for flags in ${RUN_FLAGS:---no-cuda-graphs _}; do
    flags="${flags//_/}"
    start=$EPOCHREALTIME
    (cd /tmp && timeout 120 galfast $RUN $flags --out "/tmp/run$flags.json") >>"$OUT/run.txt" 2>&1
    rc=$?
    seconds=$(python -c "print(round($EPOCHREALTIME - $start, 2))")
    echo "galfast $RUN $flags: rc $rc in $seconds s" | tee -a "$LOG"
  done
  timeline="$PWD/bench/run_timeline.py"
  (cd /tmp && timeout 120 python "$timeline" -- $RUN $flags) 2>&1 | tail -n 12 | tee -a "$LOG"
  profiler="$PWD/bench/run_profile.py"
  (cd /tmp && timeout 150 python "$profiler" --stats "$OUT/run.prof" -- \
    $RUN $flags) >"$OUT/run_profile.txt" 2>&1
  head -n 50 "$OUT/run_profile.txt" | tee -a "$LOG"
fi

stage epoch timing
for kind in ${EPOCH_KINDS-gcn cheb gat}; do
  profile=$([ "$kind" = gcn ] && echo --profile)
  (cd bench && timeout 100 python gal_movielens_epoch.py --device cuda --kind "$kind" \
    --impl galfast galfast-graphs pyg --epochs 2 $profile) >>"$OUT/epoch.txt" 2>&1
done
grep '^{' "$OUT/epoch.txt" | tee -a "$LOG"

# file:filter pairs; the filters keep the default run to a few minutes (the MovieLens-size
# cases, where the GPU matters); BENCH_FILTER narrows every file further.
CASES="${BENCH_CASES:-bench_gal_movielens:cuda bench_aggregate:cuda_and_64 \
bench_layers:cuda_and_movielens bench_sample_nhop:cuda}"
for case in $CASES; do
  file="${case%%:*}" filter="${case#*:}"
  stage "$file"
  GAL_MOVIELENS_ROUNDS=20 timeout "${BENCH_TIMEOUT:-150}" pytest "bench/$file.py" \
    --benchmark-only -q -p no:cacheprovider -k "${filter//_/ }${BENCH_FILTER:+ and $BENCH_FILTER}" \
    --benchmark-max-time=0.25 --benchmark-json="$OUT/$file.json" --benchmark-group-by=group \
    --benchmark-columns=min,median,rounds 2>&1 | grep -v "^$" | tail -n 80 | tee -a "$LOG"
done
stage done
