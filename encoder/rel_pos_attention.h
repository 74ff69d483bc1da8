// The relative-position attention of one head over a key sequence given as
// segments, so that the same maths serves a dense WeNet cache, a paged
// pool and the new chunk's own keys, for streams of any history length.
//
// score(i, j) = ((q_i + u) . k_j + (q_i + v) . p_j) / sqrt(d_k), where p_j
// is linear_pos(pe[absolute position of key j]) (spec section 3); softmax
// over j in float32; out_i = sum_j w_ij v_j. Every query of a chunk sees
// every key handed in (the chunk mask is expressed by which keys are given),
// so a stream's missing history is simply absent, never masked with -inf.
#pragma once

#include <cstdint>
#include <vector>

namespace oasr::encoder {

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

// CPU implementation (sgemm per segment). T must be at least 1.
void RelPosAttentionCpu(const RelPosAttentionParams& p);

// Where one stream's retained attention history (post-projection K and V)
// lives. Implementations: the dense WeNet cache below; a paged block pool.
class AttentionHistory {
 public:
  virtual ~AttentionHistory() = default;
  // Frames of history (t1), the same for every layer.
  virtual int64_t length() const = 0;
  // Appends the segments holding history keys of (layer, head), oldest first.
  virtual void AppendSegments(int layer, int head, std::vector<KvSegment>* out) const = 0;
};

// A dense WeNet-layout cache (layers, heads, t1, 2 * d_k), K then V on the
// last axis. Non-owning: `cache` must outlive this object.
class DenseAttentionHistory : public AttentionHistory {
 public:
  DenseAttentionHistory(const float* cache, int heads, int64_t t1, int64_t d_k)
      : cache_(cache), heads_(heads), t1_(t1), d_k_(d_k) {}
  int64_t length() const override { return t1_; }
  void AppendSegments(int layer, int head, std::vector<KvSegment>* out) const override;

 private:
  const float* cache_;
  int heads_;
  int64_t t1_;
  int64_t d_k_;
};

}  // namespace oasr::encoder
