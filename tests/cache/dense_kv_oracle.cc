#include "tests/cache/dense_kv_oracle.h"

#include <algorithm>
#include <span>

#include "absl/strings/str_cat.h"
#include "cache/device_copy.h"
#include "common/status.h"

namespace oasr::cache::testing {
namespace {

// Copies `frames` frames between positions [pos, pos + frames) of the
// stream's pool blocks `row` and a dense (L, H, frames, 2D) tensor, either way.
void CopyDense(const AttentionCacheManager& att, std::span<const int32_t> row, int64_t pos,
               int64_t frames, void* dense, bool to_pool, GpuStream gpu_stream) {
  const CacheConfig& c = att.config();
  const BlockPool& pool = att.pool();
  const size_t esz = DTypeSize(c.dtype);
  const int64_t L = c.num_layers, H = c.n_kv_head, D = c.head_dim;
  const int64_t B = c.block_size_frames, NB = pool.num_physical_blocks();
  const size_t pool_pitch = static_cast<size_t>(H * D) * esz;
  const size_t dense_pitch = static_cast<size_t>(2 * D) * esz;
  const size_t width = static_cast<size_t>(D) * esz;
  for (int64_t p = pos; p < pos + frames;) {
    const int64_t r = p % B;
    const int64_t len = std::min(B - r, pos + frames - p);
    const int64_t block = row[p / B];
    const int64_t f0 = p - pos;
    for (int kv = 0; kv < 2; ++kv) {
      char* pool_base = static_cast<char*>(kv == 0 ? pool.k_pool().data() : pool.v_pool().data());
      for (int64_t l = 0; l < L; ++l) {
        for (int64_t h = 0; h < H; ++h) {
          char* pool_ptr = pool_base + (((l * NB + block) * B + r) * H * D + h * D) * esz;
          char* dense_ptr =
              static_cast<char*>(dense) + (((l * H + h) * frames + f0) * 2 * D + kv * D) * esz;
          if (to_pool) {
            CopyRows(pool_ptr, pool_pitch, dense_ptr, dense_pitch, width, len, c.device,
                     gpu_stream);
          } else {
            CopyRows(dense_ptr, dense_pitch, pool_ptr, pool_pitch, width, len, c.device,
                     gpu_stream);
          }
        }
      }
    }
    p += len;
  }
}

int64_t Frames(const AttentionCacheManager& att, int slot) {
  const int32_t one = slot;
  return *att.CachedFrames(std::span<const int32_t>(&one, 1));
}

}  // namespace

absl::StatusOr<Tensor> GatherDenseHistory(const AttentionCacheManager& att, int slot,
                                          GpuStream gpu_stream) {
  OASR_ASSIGN_OR_RETURN(const std::span<const int32_t> row, att.LogicalBlocks(slot));
  const CacheConfig& c = att.config();
  const int64_t frames = Frames(att, slot);
  OASR_ASSIGN_OR_RETURN(
      Tensor out,
      Tensor::Empty({c.num_layers, c.n_kv_head, frames, c.kv_last_dim()}, c.dtype, c.device));
  CopyDense(att, row, 0, frames, out.data(), /*to_pool=*/false, gpu_stream);
  return out;
}

absl::Status AppendDenseChunk(AttentionCacheManager& att, int slot, const TensorView& kv_chunk,
                              GpuStream gpu_stream) {
  const CacheConfig& c = att.config();
  const int64_t frames = kv_chunk.rank() == 4 ? kv_chunk.dim(2) : -1;
  const Shape expected{c.num_layers, c.n_kv_head, frames, c.kv_last_dim()};
  if (kv_chunk.rank() != 4 || !(kv_chunk.shape() == expected) || frames < 1 ||
      frames > c.chunk_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("AppendDenseChunk: kv_chunk shape ", kv_chunk.shape().ToString(),
                     ", expected [", c.num_layers, ", ", c.n_kv_head,
                     ", 1 <= frames <= ", c.chunk_size, ", ", c.kv_last_dim(), "]"));
  }
  if (kv_chunk.dtype() != c.dtype || !(kv_chunk.device() == c.device)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AppendDenseChunk: kv_chunk is ", DTypeName(kv_chunk.dtype()), " on ",
                     kv_chunk.device().ToString(), ", expected ", DTypeName(c.dtype), " on ",
                     c.device.ToString()));
  }
  OASR_RETURN_IF_ERROR(att.PrepareChunk(slot));
  OASR_ASSIGN_OR_RETURN(const std::span<const int32_t> row, att.LogicalBlocks(slot));
  CopyDense(att, row, Frames(att, slot), frames, kv_chunk.data(), /*to_pool=*/true, gpu_stream);
  return att.CommitChunkPaged(slot, frames);
}

}  // namespace oasr::cache::testing
