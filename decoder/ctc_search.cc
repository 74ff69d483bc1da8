#include "decoder/ctc_search.h"

#include <limits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace oasr::decoder {

namespace {

// Inserts values[i] into the sorted top list unless it loses to all of it.
inline void Offer(const float* values, int i, int k, int32_t* ids, float* out_values, int* count) {
  const float v = values[i];
  // `!(v > x)` also rejects NaN.
  if (*count == k && !(v > out_values[k - 1])) return;
  if (std::isnan(v)) return;
  // Insert after every kept value >= v, so equal values keep index order.
  int pos = *count < k ? *count : k - 1;
  while (pos > 0 && out_values[pos - 1] < v) {
    out_values[pos] = out_values[pos - 1];
    ids[pos] = ids[pos - 1];
    --pos;
  }
  out_values[pos] = v;
  ids[pos] = i;
  if (*count < k) ++*count;
}

// The largest of x[0, 32); -inf when all are NaN or -inf (NaN never wins).
inline float BlockMax(const float* x) {
#if defined(__SSE2__)
  // Packed max: MAXPS returns its second operand when the first is NaN.
  __m128 a = _mm_set1_ps(-std::numeric_limits<float>::infinity());
  __m128 b = a;
  for (int j = 0; j < 32; j += 8) {
    a = _mm_max_ps(_mm_loadu_ps(x + j), a);
    b = _mm_max_ps(_mm_loadu_ps(x + j + 4), b);
  }
  a = _mm_max_ps(a, b);
  a = _mm_max_ps(a, _mm_movehl_ps(a, a));
  a = _mm_max_ss(a, _mm_shuffle_ps(a, a, 1));
  return _mm_cvtss_f32(a);
#else
  float m = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < 32; ++j) m = x[j] > m ? x[j] : m;
  return m;
#endif
}

}  // namespace

int TopK(const float* values, int n, int k, int32_t* ids, float* out_values) {
  // Two passes over blocks. The k-th largest block maximum is a lower bound
  // for the k-th largest value (k different blocks reach it), so blocks whose
  // maximum is below it cannot contribute. On peaky CTC rows that leaves about
  // k blocks to scan element by element; the block maxima vectorise.
  constexpr int kBlock = 32;
  const int num_blocks = n / kBlock;
  auto block_max = [values](int block) { return BlockMax(values + block * kBlock); };
  float threshold = -std::numeric_limits<float>::infinity();
  if (num_blocks > k) {
    // Pass 1: the k largest block maxima, kept in `out_values` as scratch.
    int kept = 0;
    for (int b = 0; b < num_blocks; ++b) {
      const float m = block_max(b);
      if (kept == k && !(m > out_values[k - 1])) continue;
      int pos = kept < k ? kept++ : k - 1;
      while (pos > 0 && out_values[pos - 1] < m) {
        out_values[pos] = out_values[pos - 1];
        --pos;
      }
      out_values[pos] = m;
    }
    threshold = out_values[k - 1];
  }
  // Pass 2: exact selection over the blocks that can contribute, in index
  // order so that ties still go to the lower id.
  int count = 0;
  for (int b = 0; b < num_blocks; ++b) {
    if (num_blocks > k && block_max(b) < threshold) continue;
    for (int j = b * kBlock; j < (b + 1) * kBlock; ++j)
      Offer(values, j, k, ids, out_values, &count);
  }
  for (int j = num_blocks * kBlock; j < n; ++j) Offer(values, j, k, ids, out_values, &count);
  return count;
}

}  // namespace oasr::decoder
