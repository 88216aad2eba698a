#!/usr/bin/env bash
# Builds the extension with AddressSanitizer and UndefinedBehaviorSanitizer (CPU only) into its
# own folder and runs the CPU kernel tests against that build: out-of-bounds reads and writes,
# use after free and undefined behaviour in the kernels and their glue fail the run.
#
#   scripts/sanitize_tests.sh                  # the kernel tests (a few minutes on 2 cores)
#   scripts/sanitize_tests.sh tests/test_graph.py -k rowptr   # other pytest arguments
#
# GALFAST_SANITIZE (default address,undefined) picks the sanitizers; the build goes to
# build/sanitize (GALFAST_SANITIZE_DIR) and never touches an in-place or installed build.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
sanitize="${GALFAST_SANITIZE:-address,undefined}"
out="$(realpath -m "${GALFAST_SANITIZE_DIR:-build/sanitize}")"

# RelWithDebInfo: line numbers in reports, and no link-time optimisation (slow with ASan).
GALFAST_SANITIZE="$sanitize" GALFAST_CUDA=0 GALFAST_BUILD_TYPE=RelWithDebInfo python setup.py -q build_ext \
  --build-lib "$out/lib" --build-temp "$out/temp"

# A galfast package of this checkout's Python sources and the sanitized extension, imported in
# place of the checkout's own (the tests run from that folder, so it comes first on sys.path).
rm -rf "$out/pkg" && mkdir -p "$out/pkg"
cp -r galfast "$out/pkg/galfast"
find "$out/pkg/galfast" \( -name '_C*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
cp "$out"/lib/galfast/_C*.so "$out/pkg/galfast/"

if [ "$#" -eq 0 ]; then
  set -- tests/test_aggregate.py tests/test_aggregate_no_edges.py tests/test_gat_aggregate.py \
    tests/test_sample_nhop.py tests/test_graph.py tests/test_philox.py \
    tests/test_graph_validation.py tests/test_ops_hardening.py tests/test_compgcn_aggregate.py \
    tests/test_nnconv_aggregate.py tests/test_sample_neighbors.py tests/test_block_aggregate.py
  set -- "$@" tests/test_batch_norm.py tests/test_gather_rows.py tests/test_row_dots.py \
    tests/test_aggregate_simd.py tests/test_edge_scores.py
fi
# Test paths are made absolute: pytest runs from the package folder.
args=()
for arg in "$@"; do
  if [[ "$arg" == tests/* ]]; then args+=("$root/$arg"); else args+=("$arg"); fi
done

# The sanitizer runtimes must be loaded before anything else in a Python that was not built
# with them. CPython and torch keep allocations alive until exit: leak checking stays off. A
# report aborts the process, so pytest captures only Python's streams (--capture=sys): the
# report goes straight to stderr instead of into a capture file that is never printed.
preload=()
if [[ ",$sanitize," == *,address,* ]]; then
  preload+=("$("${CXX:-c++}" -print-file-name=libasan.so)")
fi
if [[ ",$sanitize," == *,undefined,* ]]; then
  preload+=("$("${CXX:-c++}" -print-file-name=libubsan.so)")
fi
cd "$out/pkg"
LD_PRELOAD="${preload[*]}" \
  ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0:abort_on_error=1:${ASAN_OPTIONS:-}" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
  python -m pytest -q -p no:cacheprovider --capture=sys --rootdir "$root" -c "$root/pyproject.toml" "${args[@]}"
