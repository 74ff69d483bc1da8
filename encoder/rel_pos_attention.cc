#include "encoder/rel_pos_attention.h"

#include <cmath>

#include "common/check.h"
#include "encoder/cpu_ops.h"

namespace oasr::encoder {

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

void DenseAttentionHistory::AppendSegments(int layer, int head,
                                           std::vector<KvSegment>* out) const {
  if (t1_ == 0) return;
  const float* k = cache_ + ((static_cast<int64_t>(layer) * heads_ + head) * t1_) * 2 * d_k_;
  out->push_back(KvSegment{k, k + d_k_, t1_, 2 * d_k_});
}

}  // namespace oasr::encoder
