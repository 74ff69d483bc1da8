#include "kernels/rel_pos_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/half.h"
#include "kernels/cpu_math.h"

namespace oasr::kernels {

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

void RelPosAttentionCpu(const RelPosAttentionParams& p) {
  int64_t total = 0;
  for (int s = 0; s < p.num_kv; ++s) total += p.kv[s].rows;
  int64_t pos_total = 0;
  for (int s = 0; s < p.num_pos; ++s) pos_total += p.pos[s].rows;
  OASR_CHECK_EQ(total, pos_total);
  OASR_CHECK_GT(total, 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(p.d_k));
  // Content term (q + u) K^T, then the position term (q + v) P^T added on.
  int64_t col = 0;
  for (int s = 0; s < p.num_kv; ++s) {
    const KvSegment& seg = p.kv[s];
    cpu::GemmNT(p.queries, seg.rows, p.d_k, scale, p.q_u, p.ldq, seg.k, seg.ld, 0.0f,
                p.scores + col, total);
    col += seg.rows;
  }
  col = 0;
  for (int s = 0; s < p.num_pos; ++s) {
    const PosSegment& seg = p.pos[s];
    cpu::GemmNT(p.queries, seg.rows, p.d_k, scale, p.q_v, p.ldq, seg.p, seg.ld, 1.0f,
                p.scores + col, total);
    col += seg.rows;
  }
  cpu::SoftmaxRows(p.scores, p.queries, total, total);
  col = 0;
  for (int s = 0; s < p.num_kv; ++s) {
    const KvSegment& seg = p.kv[s];
    cpu::GemmNN(p.queries, p.d_k, seg.rows, p.scores + col, total, seg.v, seg.ld,
                s == 0 ? 0.0f : 1.0f, p.out, p.ldo);
    col += seg.rows;
  }
}

namespace {

// One (row, head) task of PagedAttentionCpu.
void AttendRowHead(const PagedAttentionParams& p, int64_t b, int64_t head) {
  const int64_t dk = p.d_k, heads = p.heads, d = heads * dk, bs = p.block_size;
  const int32_t slot = p.slots[b];
  const int64_t t1 = p.cache_lens[slot];
  const int64_t c = p.frames[b];
  const int64_t total = t1 + c;
  const int32_t* table = p.block_table + static_cast<int64_t>(slot) * p.table_stride;
  float* k_pool = static_cast<float*>(p.k_pool);
  float* v_pool = static_cast<float*>(p.v_pool);
  uint8_t* k8 = static_cast<uint8_t*>(p.k_pool);
  uint8_t* v8 = static_cast<uint8_t*>(p.v_pool);
  const float* qkv = static_cast<const float*>(p.qkv) + b * p.chunk * p.ld_qkv;
  float* out = static_cast<float*>(p.out) + b * p.chunk * p.ldo + head * dk;
  // Where this head's row of history position `pos` lives in the pool.
  auto pool_at = [&](int64_t pos) {
    return ((static_cast<int64_t>(table[pos / bs]) * bs + pos % bs) * heads + head) * dk;
  };
  for (int64_t i = c; i < p.chunk; ++i) std::fill(out + i * p.ldo, out + i * p.ldo + dk, 0.0f);
  if (c == 0) return;

  // The chunk's keys and values go to positions [t1, t1 + c) first.
  for (int64_t i = 0; i < c; ++i) {
    const int64_t dst = pool_at(t1 + i);
    const float* k = qkv + i * p.ld_qkv + d + head * dk;
    if (p.pool_fp8) {
      ConvertFromFloat(k, dk, DType::kFloat8E4M3, k8 + dst);
      ConvertFromFloat(k + d, dk, DType::kFloat8E4M3, v8 + dst);
    } else {
      std::memcpy(k_pool + dst, k, dk * sizeof(float));
      std::memcpy(v_pool + dst, k + d, dk * sizeof(float));
    }
  }

  thread_local std::vector<float> q_u, q_v, scores, pe, projected, k_rows, v_rows;
  thread_local std::vector<KvSegment> kv;
  thread_local std::vector<PosSegment> pos;
  q_u.resize(static_cast<size_t>(c * dk));
  q_v.resize(static_cast<size_t>(c * dk));
  scores.resize(static_cast<size_t>(c * total));
  const float* u = p.pos_bias_u + head * dk;
  const float* v = p.pos_bias_v + head * dk;
  for (int64_t i = 0; i < c; ++i) {
    const float* q = qkv + i * p.ld_qkv + head * dk;
    for (int64_t j = 0; j < dk; ++j) {
      q_u[i * dk + j] = q[j] + u[j];
      q_v[i * dk + j] = q[j] + v[j];
    }
  }
  kv.clear();
  if (p.pool_fp8) {
    // The history read back from the pool as floats, the chunk's own K/V as
    // computed.
    k_rows.resize(static_cast<size_t>(total * dk));
    v_rows.resize(static_cast<size_t>(total * dk));
    for (int64_t j = 0; j < total; ++j) {
      if (j < t1) {
        const int64_t at = pool_at(j);
        ConvertToFloat(k8 + at, dk, DType::kFloat8E4M3, k_rows.data() + j * dk);
        ConvertToFloat(v8 + at, dk, DType::kFloat8E4M3, v_rows.data() + j * dk);
      } else {
        const float* k = qkv + (j - t1) * p.ld_qkv + d + head * dk;
        std::copy(k, k + dk, k_rows.data() + j * dk);
        std::copy(k + d, k + d + dk, v_rows.data() + j * dk);
      }
    }
    kv.push_back(KvSegment{k_rows.data(), v_rows.data(), total, dk});
  } else {
    for (int64_t start = 0; start < total; start += bs) {
      const int64_t base = static_cast<int64_t>(table[start / bs]) * bs * d + head * dk;
      kv.push_back(KvSegment{k_pool + base, v_pool + base, std::min(bs, total - start), d});
    }
  }
  pos.clear();
  const int64_t first = p.offsets[b] - t1, end = p.offsets[b] + c;
  const float* table_rows = static_cast<const float*>(p.pos_table);
  const int64_t in_table = std::clamp<int64_t>(p.pos_rows - first, 0, total);
  if (in_table > 0) pos.push_back(PosSegment{table_rows + first * d + head * dk, in_table, d});
  if (in_table < total) {
    // Past the table: this head's columns of linear_pos(pe) for the rest.
    const int64_t n = total - in_table, from = end - n;
    pe.resize(static_cast<size_t>(n * d));
    projected.resize(static_cast<size_t>(n * dk));
    for (int64_t r = 0; r < n; ++r) SinusoidRow(from + r, static_cast<int>(d), pe.data() + r * d);
    cpu::GemmNT(n, dk, d, 1.0f, pe.data(), d, p.linear_pos + head * dk * d, d, 0.0f,
                projected.data(), dk);
    pos.push_back(PosSegment{projected.data(), n, dk});
  }
  RelPosAttentionParams a;
  a.q_u = q_u.data();
  a.q_v = q_v.data();
  a.ldq = dk;
  a.queries = c;
  a.d_k = dk;
  a.kv = kv.data();
  a.num_kv = static_cast<int>(kv.size());
  a.pos = pos.data();
  a.num_pos = static_cast<int>(pos.size());
  a.out = out;
  a.ldo = p.ldo;
  a.scores = scores.data();
  RelPosAttentionCpu(a);
}

bool DeviceDType(DType d) {
  return d == DType::kFloat32 || d == DType::kBFloat16 || d == DType::kFloat16;
}

}  // namespace

void PagedAttentionCpu(const PagedAttentionParams& p, ThreadPool* pool) {
  const int64_t tasks = int64_t{p.batch} * p.heads;
  if (pool == nullptr || pool->threads() == 1) {
    for (int64_t t = 0; t < tasks; ++t) AttendRowHead(p, t / p.heads, t % p.heads);
    return;
  }
  pool->ParallelFor(tasks, [&](int64_t t) { AttendRowHead(p, t / p.heads, t % p.heads); });
}

absl::Status PagedAttention(ExecutionContext& ctx, const PagedAttentionParams& p) {
  if (p.batch == 0) return absl::OkStatus();
  const int64_t d = int64_t{p.heads} * p.d_k;
  if (p.qkv == nullptr || p.out == nullptr || p.k_pool == nullptr || p.v_pool == nullptr ||
      p.pos_bias_u == nullptr || p.pos_bias_v == nullptr || p.block_table == nullptr ||
      p.cache_lens == nullptr || p.slots == nullptr || p.frames == nullptr ||
      p.offsets == nullptr || p.linear_pos == nullptr ||
      (p.pos_rows > 0 && p.pos_table == nullptr) || p.batch < 0 || p.chunk < 1 || p.heads < 1 ||
      p.d_k < 1 || p.block_size < 1 || p.ld_qkv < 3 * d || p.ldo < d || p.table_stride < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("paged_attention: batch ", p.batch, ", chunk ", p.chunk, ", heads ", p.heads,
                     ", d_k ", p.d_k, ", block_size ", p.block_size, ", ld_qkv ", p.ld_qkv,
                     ", ldo ", p.ldo, " (pointers non-null, ld_qkv >= 3 d, ldo >= d)"));
  }
  const bool cuda = ctx.is_cuda();
  if (cuda ? !DeviceDType(p.dtype)
           : (p.dtype != DType::kFloat32 || p.pos_dtype != DType::kFloat32)) {
    return absl::InvalidArgumentError(absl::StrCat("paged_attention: dtype ", DTypeName(p.dtype),
                                                   " is not computed on ",
                                                   ctx.device().ToString()));
  }
  if (!cuda) {
    PagedAttentionCpu(p, &ctx.threads());
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  if (p.pool_fp8 && (p.dtype == DType::kFloat32 || p.pos_dtype != p.dtype || p.d_k % 16 != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "paged_attention: a float8 pool on CUDA needs a 16-bit dtype (got ", DTypeName(p.dtype),
        ") with the position table in it, and d_k a multiple of 16 (got ", p.d_k, ")"));
  }
  if (!PagedAttentionCudaSupports(p.d_k, p.chunk) ||
      (p.pos_dtype != DType::kFloat32 && p.pos_dtype != p.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "paged_attention: the CUDA kernel takes d_k 16, 24, 32, 48, 64, 80, 96 or 128 (got ", p.d_k,
        "), chunks of at most 16 frames (got ", p.chunk, ") and a position table in float32 or ",
        DTypeName(p.dtype)));
  }
  LaunchPagedAttention(p, ctx.stream());
#endif
  return absl::OkStatus();
}

}  // namespace oasr::kernels
