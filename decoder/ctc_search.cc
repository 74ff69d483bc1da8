#include "decoder/ctc_search.h"

namespace oasr::decoder {

int TopK(const float* values, int n, int k, int32_t* ids, float* out_values) {
  int count = 0;
  for (int i = 0; i < n; ++i) {
    const float v = values[i];
    // Fast path: most values lose to the current k-th best. `!(v > x)` also
    // rejects NaN.
    if (count == k && !(v > out_values[k - 1])) continue;
    if (std::isnan(v)) continue;
    // Insert after every kept value >= v, so equal values keep index order.
    int pos = count < k ? count : k - 1;
    while (pos > 0 && out_values[pos - 1] < v) {
      out_values[pos] = out_values[pos - 1];
      ids[pos] = ids[pos - 1];
      --pos;
    }
    out_values[pos] = v;
    ids[pos] = i;
    if (count < k) ++count;
  }
  return count;
}

}  // namespace oasr::decoder
