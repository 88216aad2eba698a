// CUDA n-hop walks. Thread mapping: one thread per walk; it runs the shared walker state
// machine (sample_nhop_row.h) phase after phase until the walk is done, then writes its end and
// path. The path and swap map live in the thread's registers and local memory; neighbouring
// threads take neighbouring walks, so the reads of starts and the writes of end coalesce.
#include <cstdint>

#include "common/cuda_check.h"
#include "walk/sample_nhop.h"
#include "walk/sample_nhop_row.h"

namespace galfast {
namespace {

constexpr int kThreads = 128;

template <typename Index>
__global__ void sample_nhop_kernel(SampleNhopParams p, WalkGraph<Index> g) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.num_walks || walk_done_before(p, i)) return;
  NhopWalker<Index> w;
  FreshBlocks blocks;
  walker_start(w, g, p.walk_offset + static_cast<uint64_t>(i), static_cast<Index>(p.starts[i]),
               p.first_attempt);
  while (w.phase != NhopWalker<Index>::kDone) {
    if (w.phase == NhopWalker<Index>::kRow) {
      walker_read_row(w, g, blocks);
    } else {
      walker_offer(w, g, g.out_nbr[w.slot], blocks);
    }
  }
  walker_store(w, p, i);
}

template <typename Index>
void launch(const SampleNhopParams& p, cudaStream_t stream) {
  const int64_t blocks = (p.num_walks + kThreads - 1) / kThreads;
  sample_nhop_kernel<Index>
      <<<grid_size(blocks, "sample_nhop_kernel"), kThreads, 0, stream>>>(p, walk_graph<Index>(p));
  GALFAST_CHECK_LAUNCH("sample_nhop_kernel");
}

}  // namespace

void sample_nhop_cuda(const SampleNhopParams& p, void* stream) {
  if (p.num_walks == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (p.index_type == IndexType::kInt32) {
    launch<int32_t>(p, s);
  } else {
    launch<int64_t>(p, s);
  }
}

}  // namespace galfast
