#include "encoder/rel_position_table.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/check.h"
#include "encoder/cpu_ops.h"

namespace oasr::encoder {

void SinusoidRow(int64_t position, int d, float* out) {
  const double step = -std::log(10000.0) / d;
  const float pos = static_cast<float>(position);
  for (int i = 0; i < d / 2; ++i) {
    const float freq = static_cast<float>(std::exp(static_cast<double>(2 * i) * step));
    const double angle = static_cast<double>(pos * freq);
    out[2 * i] = static_cast<float>(std::sin(angle));
    out[2 * i + 1] = static_cast<float>(std::cos(angle));
  }
}

RelPositionTable::RelPositionTable(const ConformerWeights* weights, int d, int64_t max_positions)
    : weights_(weights),
      d_(d),
      layers_(static_cast<int>(weights->layers.size())),
      max_blocks_((max_positions + kBlockRows - 1) / kBlockRows),
      blocks_(new std::unique_ptr<float[]>[max_blocks_]) {}

void RelPositionTable::ProjectRows(int64_t start, int64_t count, float* out) const {
  std::vector<float> pe(static_cast<size_t>(count) * d_);
  for (int64_t r = 0; r < count; ++r) SinusoidRow(start + r, d_, pe.data() + r * d_);
  for (int l = 0; l < layers_; ++l) {
    const Tensor& pos = weights_->layers[l].linear_pos;
    cpu::GemmNT(count, d_, d_, 1.0f, pe.data(), d_, pos.data<float>(), d_, 0.0f,
                out + static_cast<int64_t>(l) * count * d_, d_);
  }
}

void RelPositionTable::Ensure(int64_t end) {
  const int64_t need = std::min((end + kBlockRows - 1) / kBlockRows, max_blocks_);
  if (ready_blocks_.load(std::memory_order_acquire) >= need) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (int64_t b = ready_blocks_.load(std::memory_order_relaxed); b < need; ++b) {
    auto block = std::make_unique<float[]>(static_cast<size_t>(layers_) * kBlockRows * d_);
    ProjectRows(b * kBlockRows, kBlockRows, block.get());
    blocks_[b] = std::move(block);
    ready_blocks_.store(b + 1, std::memory_order_release);
  }
}

const float* RelPositionTable::Rows(int layer, int64_t position, int64_t* contiguous) const {
  const int64_t b = position / kBlockRows;
  OASR_DCHECK(b < ready_blocks_.load(std::memory_order_acquire));
  const int64_t r = position % kBlockRows;
  *contiguous = kBlockRows - r;
  return blocks_[b].get() + (static_cast<int64_t>(layer) * kBlockRows + r) * d_;
}

}  // namespace oasr::encoder
