// oasr-bench-cache: the cost of the cache layer's per-step hot path -- one
// cohort step of PrepareChunksBatched + device mirror update +
// CommitChunkPaged for every stream -- at B = 1, 64 and 1024 streams, on CPU
// storage and, when a GPU is present, on CUDA storage. Geometry: the
// published streaming Conformer (12 layers, 4 KV heads of 64, fp16), chunk =
// block = 16 frames, num_left_chunks 4 (so every step also evicts a block per
// stream), max_blocks_per_seq 512 (the table mirrored is blocks_per_stream = 6
// columns wide). Goal: under 2 us per stream per step on
// CPU, and no device synchronisation inside a step on CUDA. No model is
// involved; the banner prints the geometry measured. --help lists the flags.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "cache/attention_cache_manager.h"
#include "cache/block_pool.h"
#include "common/device.h"
#include "common/logging.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace oasr::cache {
namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  double ns_per_step = 0;
  double bytes_per_step = 0;
  double busy_step_us = -1;  // CUDA: a step taken while the GPU stream is blocked.
};

bool Check(const absl::Status& s) {
  if (!s.ok()) std::fprintf(stderr, "oasr-bench-cache: %s\n", s.ToString().c_str());
  return s.ok();
}

#if OASR_WITH_CUDA
void SleepOnStream(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(ms)));
}
#endif

// The measured geometry: the published streaming Conformer's cache, sized
// for `batch` streams, on `device`.
CacheConfig Geometry(Device device, int batch) {
  CacheConfig c;
  c.num_layers = 12;
  c.n_kv_head = 4;
  c.head_dim = 64;
  c.chunk_size = 16;
  c.block_size_frames = 16;
  c.num_left_chunks = 4;
  c.max_blocks_per_seq = 512;
  c.max_batch_size = batch;
  c.max_num_blocks = c.min_pool_blocks();
  c.dtype = DType::kFloat16;
  c.device = device;
  return c;
}

std::string Banner() {
  const CacheConfig c = Geometry(Device::Cpu(), 1);
  return absl::StrFormat(
      "geometry: %d layers, %d KV heads x %d, %s, chunk = block = %d, num_left_chunks %d, "
      "max_blocks_per_seq %d (mirrored width %lld)",
      c.num_layers, c.n_kv_head, c.head_dim, DTypeName(c.dtype), c.chunk_size, c.num_left_chunks,
      c.max_blocks_per_seq,
      static_cast<long long>(std::min<int64_t>(c.max_blocks_per_seq, c.blocks_per_stream())));
}

bool RunOne(Device device, int batch, Result* result) {
  const CacheConfig c = Geometry(device, batch);
  absl::StatusOr<std::unique_ptr<BlockPool>> pool = BlockPool::Create(c);
  if (!Check(pool.status())) return false;
  absl::StatusOr<std::unique_ptr<AttentionCacheManager>> att =
      AttentionCacheManager::Create(pool->get());
  if (!Check(att.status())) return false;
  AttentionCacheManager& m = **att;

  GpuStream stream = nullptr;
#if OASR_WITH_CUDA
  if (device.is_cuda()) {
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    stream = s;
  }
#endif
  std::vector<int32_t> slots(batch);
  std::iota(slots.begin(), slots.end(), 0);
  for (const int32_t slot : slots) {
    if (!Check(m.AllocateSlot(slot, stream))) return false;
  }
  bool ok = true;
  auto step = [&] {
    ok &= m.PrepareChunksBatched(slots).ok();
    m.UpdateDeviceMirror(stream);
    for (const int32_t slot : slots) ok &= m.CommitChunkPaged(slot, c.chunk_size).ok();
  };
  for (int i = 0; i < 20; ++i) step();  // Past the first evictions.
  // Enough steps for ~0.3 s of work, at least 50.
  const auto probe_start = Clock::now();
  for (int i = 0; i < 10; ++i) step();
  const double probe_ns =
      std::chrono::duration<double, std::nano>(Clock::now() - probe_start).count() / 10;
  const int steps = std::max(50, static_cast<int>(3e8 / std::max(probe_ns, 1.0)));
  const int64_t bytes_before = m.mirror().bytes_copied();
  const auto start = Clock::now();
  for (int i = 0; i < steps; ++i) step();
  const auto end = Clock::now();
  result->ns_per_step = std::chrono::duration<double, std::nano>(end - start).count() / steps;
  result->bytes_per_step = static_cast<double>(m.mirror().bytes_copied() - bytes_before) / steps;
#if OASR_WITH_CUDA
  if (device.is_cuda()) {
    // A step while the stream is held for 50 ms by queued work: a step that
    // synchronised with the GPU would take at least that long.
    static int hold_ms = 50;
    cudaStreamSynchronize(stream);
    cudaLaunchHostFunc(stream, &SleepOnStream, &hold_ms);
    const auto busy_start = Clock::now();
    step();
    result->busy_step_us =
        std::chrono::duration<double, std::micro>(Clock::now() - busy_start).count();
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
#endif
  return ok;
}

}  // namespace
}  // namespace oasr::cache

int main(int argc, char** argv) {
  CLI::App app{
      "oasr-bench-cache: per-step cost of the paged cache's hot path (PrepareChunksBatched + "
      "UpdateDeviceMirror + CommitChunkPaged) at 1, 64 and 1024 streams, CPU and CUDA storage"};
  bool cpu_only = false;
  app.add_flag("--cpu-only", cpu_only, "Skip the CUDA rows even when a GPU is present");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!oasr::InitLogging("warn").ok()) return 1;
  std::vector<oasr::Device> devices = {oasr::Device::Cpu()};
  const bool gpu = !cpu_only && oasr::CudaDeviceCount() > 0;
  if (gpu) devices.push_back(oasr::Device::Cuda(0));
  std::printf("oasr-bench-cache: PrepareChunksBatched + UpdateDeviceMirror + CommitChunkPaged\n");
  std::printf("%s\n", oasr::cache::Banner().c_str());
  if (gpu) {
    std::printf("gpu: %s\n", oasr::CudaDeviceName(0).value_or("?").c_str());
  } else {
    std::printf("gpu: %s (CUDA rows skipped)\n", cpu_only ? "not used" : "none");
  }
  std::printf("%-8s %6s %14s %18s %16s %22s\n", "device", "B", "us/step", "ns/stream/step",
              "mirror KiB/step", "step, GPU busy 50ms (us)");
  bool ok = true;
  for (const oasr::Device& device : devices) {
    for (int batch : {1, 64, 1024}) {
      oasr::cache::Result r;
      if (!oasr::cache::RunOne(device, batch, &r)) {
        ok = false;
        continue;
      }
      char busy[32] = "-";
      if (r.busy_step_us >= 0) std::snprintf(busy, sizeof(busy), "%.1f", r.busy_step_us);
      std::printf("%-8s %6d %14.2f %18.1f %16.1f %22s\n", device.ToString().c_str(), batch,
                  r.ns_per_step / 1e3, r.ns_per_step / batch, r.bytes_per_step / 1024, busy);
    }
  }
  std::printf("goal: < 2000 ns/stream/step on cpu; on cuda a step never waits for the GPU\n");
  return ok ? 0 : 1;
}
