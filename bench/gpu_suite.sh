#!/usr/bin/env bash
# On a GPU machine: build galfast against the machine's own torch (no network needed), run the
# CUDA tests, then the benchmarks on CPU and GPU side by side. Results land in $OUT (default
# ./gpu-results): the card's name, test log, and pytest-benchmark JSON + table.
#   bash bench/gpu_suite.sh            # everything
#   BENCH_FILTER="movielens" bash bench/gpu_suite.sh   # restrict the benchmarks (-k expression)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-results}"
mkdir -p "$OUT"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
pip install --no-build-isolation --no-deps . 2>&1 | tail -n 3
python -c "import galfast, json; print(json.dumps(galfast.build_info()))" | tee "$OUT/build_info.json"

# `pytest` (not `python -m pytest`) keeps the source tree off sys.path: the installed build runs.
pytest -m cuda -q 2>&1 | tee "$OUT/cuda_tests.txt" | tail -n 15
pytest bench/ --benchmark-only -q -k "cuda${BENCH_FILTER:+ and $BENCH_FILTER}" \
  --benchmark-json="$OUT/bench.json" --benchmark-columns=min,median,rounds \
  2>&1 | tee "$OUT/bench.txt" | tail -n 60
