// Names the calling thread (at most 15 characters are kept), so that per-
// thread CPU figures (/proc/PID/task/*/comm, top -H, perf) say whose
// thread it is: oasr-scheduler, oasr-frontend, oasr-pool, oasr-events,
// oasr-metrics, oasr-load.
#pragma once

namespace oasr {

void SetThreadName(const char* name);

}  // namespace oasr
