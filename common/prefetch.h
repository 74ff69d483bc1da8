// Software prefetch for loops over many streams' scattered state: each row
// of a cohort touches a few cache lines no earlier row brought in, and a
// loop that asks for row i + k's lines while it works on row i overlaps
// their misses instead of paying them one after the other. A hint only:
// results never depend on it.
#pragma once

#include <cstddef>

namespace oasr {

// How many rows ahead a loop asks for the lines of the objects its row
// reaches first (kPrefetchFar), and of those they point to (kPrefetchNear,
// read from the first once it has arrived).
inline constexpr size_t kPrefetchFar = 8;
inline constexpr size_t kPrefetchNear = 4;

// Asks for the `lines` 64-byte cache lines from `p` on (p may be null).
inline void Prefetch(const void* p, int lines = 1) {
  if (p == nullptr) return;
  const char* c = static_cast<const char*>(p);
  for (int i = 0; i < lines; ++i) __builtin_prefetch(c + 64 * i, 0, 3);
}

}  // namespace oasr
