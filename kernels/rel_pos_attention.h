// WeNet's relative-position self-attention (spec section 3) for a cohort of
// streams whose keys and values live in a paged pool, in one call:
//
//   score(i, j) = ((q_i + u) . k_j + (q_i + v) . p_j) / sqrt(d_k)
//
// where p_j = linear_pos(pe[position of key j]) and key j of a row with
// cache length t1 and offset o sits at absolute position o - t1 + j (no
// rel_shift); softmax over j in float32; out_i = sum_j w_ij v_j. Each row
// first writes its chunk's new K and V into the pool at positions
// [t1, t1 + frames) of its block-table row (the blocks the cache manager
// prepared), then attends over all t1 + frames keys; every query of a chunk
// sees every key (the chunk mask is which keys a row holds).
//
// The pool follows flash-attention's paged contract: K and V of one layer
// are [num_blocks, block_size, heads, d_k]; row b's history position p is
// block block_table[slot * table_stride + p / block_size], row
// p % block_size, with slot = slots[b] and t1 = cache_lens[slot].
//
// p_j comes from a per-layer table of linear_pos(pe[p]) for p < pos_rows;
// keys at or past it (a stream running for hours) are projected from the
// sinusoid and linear_pos on the fly, so no position is out of reach.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/dtype.h"
#include "common/execution_context.h"
#include "common/gpu_stream.h"

namespace oasr::kernels {

struct PagedAttentionParams {
  // [batch * chunk, 3 * d] projections q | k | v (head-major within each),
  // stride ld_qkv; row b owns rows [b * chunk, b * chunk + frames[b]).
  const void* qkv = nullptr;
  int64_t ld_qkv = 0;
  DType dtype = DType::kFloat32;      // Of qkv, out and the pool.
  const float* pos_bias_u = nullptr;  // [heads, d_k]
  const float* pos_bias_v = nullptr;  // [heads, d_k]
  void* k_pool = nullptr;             // This layer: [num_blocks, block_size, heads, d_k].
  void* v_pool = nullptr;
  // The pool in float8 e4m3 instead of dtype (the chunk's K/V rounded to
  // nearest even, saturating at +-448, as they go in; each query still sees
  // its own chunk's K/V unrounded). CUDA: 16-bit dtype, d_k a multiple of 16.
  bool pool_fp8 = false;
  int64_t num_blocks = 0;
  int block_size = 0;
  const int32_t* block_table = nullptr;  // [rows, table_stride] by slot.
  int64_t table_stride = 0;
  const int32_t* cache_lens = nullptr;  // [rows] by slot: t1.
  const int32_t* slots = nullptr;       // [batch]
  const int32_t* frames = nullptr;      // [batch], in [0, chunk].
  const int32_t* offsets = nullptr;     // [batch]: encoder frames before the chunk (>= t1).
  // This layer's linear_pos(pe[p]) rows for p < pos_rows, [pos_rows, d]
  // in pos_dtype (float32 or the op's dtype); and linear_pos [d, d] float32
  // for the positions past them.
  const void* pos_table = nullptr;
  DType pos_dtype = DType::kFloat32;
  int64_t pos_rows = 0;
  const float* linear_pos = nullptr;
  // [batch * chunk, d], stride ldo; rows past frames[b] are written as zeros.
  void* out = nullptr;
  int64_t ldo = 0;
  int batch = 0;
  int chunk = 0;
  int heads = 0;
  int d_k = 0;
};

// The op on ctx's device (asynchronous on CUDA). The host must already have
// checked that every row's blocks exist (the engine's plan); INVALID_ARGUMENT
// for null pointers, strides below their rows, or a dtype the device does not
// handle (the CPU: float32 only).
absl::Status PagedAttention(ExecutionContext& ctx, const PagedAttentionParams& p);

// CPU implementation (host pointers); (row, head) pairs split over `pool`.
void PagedAttentionCpu(const PagedAttentionParams& p, ThreadPool* pool);

#if OASR_WITH_CUDA
// One block per (row, head). d_k of 16, 24, 32, 48, 64, 80, 96 or 128 and a
// chunk of at most 16 frames (PagedAttentionCudaSupports).
void LaunchPagedAttention(const PagedAttentionParams& p, GpuStream stream);
bool PagedAttentionCudaSupports(int d_k, int chunk);
#endif

// Row `position` of the sinusoid table (d values, interleaved sin/cos): the
// float32 angle float32(position) * float32(frequency), sin and cos
// evaluated in float64 and rounded, as the PyTorch reference computes it.
void SinusoidRow(int64_t position, int d, float* out);

// --- The CPU primitive the op is built on --------------------------------

// Consecutive keys of one head: key r of the segment is k + r * ld (d_k
// floats) and its value v + r * ld.
struct KvSegment {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t rows = 0;
  int64_t ld = 0;
};

// linear_pos(pe) rows of consecutive key positions for one head: row r at
// p + r * ld (d_k floats).
struct PosSegment {
  const float* p = nullptr;
  int64_t rows = 0;
  int64_t ld = 0;
};

struct RelPosAttentionParams {
  const float* q_u = nullptr;  // [queries, d_k] q + pos_bias_u, row stride ldq.
  const float* q_v = nullptr;  // [queries, d_k] q + pos_bias_v, row stride ldq.
  int64_t ldq = 0;
  int64_t queries = 0;
  int64_t d_k = 0;
  const KvSegment* kv = nullptr;  // Keys in time order; rows add up to T.
  int num_kv = 0;
  const PosSegment* pos = nullptr;  // Positions of the same keys; rows add up to T.
  int num_pos = 0;
  float* out = nullptr;  // [queries, d_k], row stride ldo; written.
  int64_t ldo = 0;
  float* scores = nullptr;  // Scratch of queries * T floats.
};

// One head of one stream over keys given as segments (sgemm per segment).
// T must be at least 1.
void RelPosAttentionCpu(const RelPosAttentionParams& p);

}  // namespace oasr::kernels
