// Counts heap allocations made through operator new in this test binary
// (alloc_counter.cc replaces the global allocation functions).
#pragma once

#include <cstdint>

namespace oasr::cache::testing {

// operator new calls (all forms, all threads) since the program started.
int64_t HeapAllocations();

}  // namespace oasr::cache::testing
