#include "encoder/rel_position_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <vector>

#include "common/check.h"
#include "kernels/cpu_math.h"
#include "kernels/rel_pos_attention.h"

namespace oasr::encoder {

RelPositionTable::RelPositionTable(const ConformerWeights* weights, int d, int64_t max_positions)
    : weights_(weights),
      d_(d),
      layers_(static_cast<int>(weights->layers.size())),
      max_blocks_((max_positions + kBlockRows - 1) / kBlockRows) {
  bytes_ = static_cast<size_t>(layers_) * max_blocks_ * kBlockRows * d_ * sizeof(float);
  // Address space only: pages are committed as Ensure writes them.
  void* p = mmap(nullptr, std::max<size_t>(bytes_, 1), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  OASR_CHECK(p != MAP_FAILED, "cannot reserve the position table's address range");
  data_ = static_cast<float*>(p);
}

RelPositionTable::~RelPositionTable() { munmap(data_, std::max<size_t>(bytes_, 1)); }

void RelPositionTable::Ensure(int64_t end) {
  const int64_t need = std::min((end + kBlockRows - 1) / kBlockRows, max_blocks_);
  if (ready_blocks_.load(std::memory_order_acquire) >= need) return;
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<float> pe(static_cast<size_t>(kBlockRows) * d_);
  for (int64_t b = ready_blocks_.load(std::memory_order_relaxed); b < need; ++b) {
    for (int64_t r = 0; r < kBlockRows; ++r) {
      kernels::SinusoidRow(b * kBlockRows + r, d_, pe.data() + r * d_);
    }
    for (int l = 0; l < layers_; ++l) {
      const Tensor& pos = weights_->layers[l].linear_pos;
      float* rows = data_ + (l * max_positions() + b * kBlockRows) * d_;
      kernels::cpu::GemmNT(kBlockRows, d_, d_, 1.0f, pe.data(), d_, pos.data<float>(), d_, 0.0f,
                           rows, d_);
    }
    ready_blocks_.store(b + 1, std::memory_order_release);
  }
}

}  // namespace oasr::encoder
