// CacheConfig validation and derived sizes, and pool sizing from memory.
#include "cache/cache_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cache/pool_sizing.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"

namespace oasr::cache {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(CacheConfigTest, DefaultsMatchTheSeedGeometry) {
  const CacheConfig c;
  ASSERT_TRUE(c.Validate().ok()) << c.Validate();
  EXPECT_EQ(c.kv_last_dim(), 128);
  EXPECT_EQ(c.cnn_cache_frames(), 14);
  EXPECT_FALSE(c.eviction_enabled());
  EXPECT_EQ(c.max_logical_blocks(), -1);
  EXPECT_EQ(c.retained_frames(), -1);
  // Unlimited history: min(max_blocks_per_seq 512, 1024 blocks / 32 streams).
  EXPECT_EQ(c.blocks_per_stream(), 32);
  EXPECT_EQ(c.max_stream_frames(), 512);
  EXPECT_DOUBLE_EQ(c.max_stream_seconds(), 512 * 0.04);
  // 2 x 12 layers x 16 frames x 4 heads x 64 dims x 2 bytes = 192 KiB.
  EXPECT_EQ(c.bytes_per_kv_block(), 192u * 1024);
  EXPECT_EQ(c.pool_bytes(), 1024u * 192 * 1024);
  CacheConfig big = c;
  big.max_num_blocks = 2048;
  EXPECT_EQ(big.pool_bytes(), size_t{384} << 20);
}

TEST(CacheConfigTest, EvictionBoundsWhatAStreamHolds) {
  CacheConfig c;
  c.num_left_chunks = 4;
  c.max_num_blocks = 32 * 6;
  ASSERT_TRUE(c.Validate().ok()) << c.Validate();
  EXPECT_EQ(c.retained_frames(), 64);
  EXPECT_EQ(c.max_logical_blocks(), 4);
  // Window 64 + a partly filled tail (15) + the chunk in flight (16) = 95 frames.
  EXPECT_EQ(c.blocks_per_stream(), 6);
  EXPECT_EQ(c.min_pool_blocks(), 32 * 6);

  // Full chunks of a block each never leave a partly filled block: 64 + 16.
  c.full_chunks = true;
  EXPECT_EQ(c.blocks_per_stream(), 5);
  EXPECT_EQ(c.min_pool_blocks(), 32 * 5);

  c.chunk_size = 8;  // Window 32 frames in blocks of 16 (a chunk may start mid-block).
  EXPECT_EQ(c.max_logical_blocks(), 2);
  EXPECT_EQ(c.blocks_per_stream(), 4);  // ceil((32 + 15 + 8) / 16)
}

TEST(CacheConfigTest, RejectsChunkWiderThanABlock) {
  CacheConfig c;
  c.chunk_size = 32;
  const absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), AllOf(HasSubstr("chunk_size = 32"), HasSubstr("block_size_frames = 16")));
}

TEST(CacheConfigTest, RejectsABlockTableThatCannotAddressTheHistory) {
  CacheConfig c;
  c.num_left_chunks = 8;  // max_logical_blocks 8.
  c.max_blocks_per_seq = 7;
  c.max_num_blocks = 4096;
  absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s),
              AllOf(HasSubstr("max_blocks_per_seq = 7"), HasSubstr("max_logical_blocks = 8")));
  // The window plus the chunk in flight (10 blocks) must fit too.
  c.max_blocks_per_seq = 9;
  EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument);
  c.max_blocks_per_seq = 10;
  EXPECT_TRUE(c.Validate().ok()) << c.Validate();
}

TEST(CacheConfigTest, RejectsAnExplicitPoolTooSmallForTheBatchWithEviction) {
  CacheConfig c;
  c.num_left_chunks = 4;
  c.max_num_blocks = 32 * 6 - 1;
  const absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), AllOf(HasSubstr("max_num_blocks = 191"), HasSubstr("192"),
                                HasSubstr("max_batch_size 32")));
  c.max_num_blocks = 0;  // Derived later: not checked here.
  EXPECT_TRUE(c.Validate().ok());
}

TEST(CacheConfigTest, RejectsAPoolWithoutOneBlockPerStream) {
  CacheConfig c;
  c.max_num_blocks = 31;
  const absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s),
              AllOf(HasSubstr("max_num_blocks = 31"), HasSubstr("max_batch_size = 32")));
}

TEST(CacheConfigTest, RejectsNonPositiveSizesByName) {
  const struct {
    const char* field;
    void (*set)(CacheConfig&);
  } cases[] = {
      {"num_layers", [](CacheConfig& c) { c.num_layers = 0; }},
      {"n_kv_head", [](CacheConfig& c) { c.n_kv_head = -1; }},
      {"head_dim", [](CacheConfig& c) { c.head_dim = 0; }},
      {"hidden_dim", [](CacheConfig& c) { c.hidden_dim = 0; }},
      {"kernel_size", [](CacheConfig& c) { c.kernel_size = 0; }},
      {"chunk_size", [](CacheConfig& c) { c.chunk_size = 0; }},
      {"block_size_frames", [](CacheConfig& c) { c.block_size_frames = 0; }},
      {"max_blocks_per_seq", [](CacheConfig& c) { c.max_blocks_per_seq = 0; }},
      {"max_batch_size", [](CacheConfig& c) { c.max_batch_size = 0; }},
      {"max_num_blocks", [](CacheConfig& c) { c.max_num_blocks = -5; }},
      {"num_left_chunks", [](CacheConfig& c) { c.num_left_chunks = -2; }},
      {"pool_memory_fraction", [](CacheConfig& c) { c.pool_memory_fraction = 0; }},
      {"host_pool_budget_bytes", [](CacheConfig& c) { c.host_pool_budget_bytes = 0; }},
  };
  for (const auto& tc : cases) {
    CacheConfig c;
    tc.set(c);
    const absl::Status s = c.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << tc.field;
    EXPECT_THAT(Message(s), HasSubstr(tc.field));
  }
}

TEST(CacheConfigTest, PrefillNeedsAWindowAlignedToChunks) {
  CacheConfig c;
  c.prefill_kv_window = true;
  EXPECT_THAT(Message(c.Validate()), HasSubstr("num_left_chunks = -1"));
  c.num_left_chunks = 4;
  c.max_num_blocks = 0;
  EXPECT_TRUE(c.Validate().ok()) << c.Validate();
  c.chunk_size = 8;
  EXPECT_THAT(Message(c.Validate()), HasSubstr("chunk_size = 8"));
}

TEST(PoolSizingTest, EvictionOffFillsTheBudgetCappedByTheBlockTables) {
  CacheConfig c;  // 192 KiB blocks, 32 streams x 512 columns.
  const int64_t block = static_cast<int64_t>(c.bytes_per_kv_block());
  EXPECT_EQ(*PoolBlocksForBytes(c, 100 * block + block / 2), 100);
  EXPECT_EQ(*PoolBlocksForBytes(c, int64_t{1} << 40), 32 * 512);
  const absl::StatusOr<int64_t> small = PoolBlocksForBytes(c, 31 * block);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(small.status()), AllOf(HasSubstr("32 streams"), HasSubstr("cpu")));
}

TEST(PoolSizingTest, EvictionOnOnlyChecksTheRetainedHistoryFits) {
  CacheConfig c;
  c.num_left_chunks = 4;
  const int64_t block = static_cast<int64_t>(c.bytes_per_kv_block());
  EXPECT_EQ(*PoolBlocksForBytes(c, int64_t{1} << 40), 32 * 6);
  const absl::StatusOr<int64_t> small = PoolBlocksForBytes(c, 32 * 6 * block - 1);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(small.status()), HasSubstr("192 blocks"));
}

TEST(PoolSizingTest, ResolveDerivesFromTheHostBudgetAndLogsTheCeiling) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(16);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));

  CacheConfig c;
  c.max_num_blocks = 0;
  c.host_pool_budget_bytes = 256 * static_cast<int64_t>(c.bytes_per_kv_block());
  const absl::StatusOr<CacheConfig> resolved = ResolveCacheConfig(c);
  spdlog::set_default_logger(previous);

  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->max_num_blocks, 256);
  EXPECT_EQ(resolved->blocks_per_stream(), 8);
  const std::vector<std::string> lines = sink->last_formatted();
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.back(), AllOf(HasSubstr("max_stream_frames 128"), HasSubstr("5.1 s")));
}

TEST(PoolSizingTest, ResolveRejectsAnInvalidConfigAndKeepsAnExplicitPool) {
  CacheConfig c;
  c.chunk_size = 17;
  EXPECT_EQ(ResolveCacheConfig(c).status().code(), absl::StatusCode::kInvalidArgument);
  c.chunk_size = 16;
  c.max_num_blocks = 77 * 32;
  EXPECT_EQ(ResolveCacheConfig(c)->max_num_blocks, 77 * 32);
}

TEST(PoolSizingTest, DerivingOnCudaUsesFreeDeviceMemory) {
  if (CudaDeviceCount() == 0) {
    CacheConfig c;
    c.device = Device::Cuda(0);
    EXPECT_FALSE(UsablePoolBytes(c).ok());
    return;
  }
  CacheConfig c;
  c.device = Device::Cuda(0);
  const DeviceMemoryInfo info = *QueryDeviceMemory(c.device);
  const int64_t usable = *UsablePoolBytes(c);
  EXPECT_GT(usable, 0);
  EXPECT_LE(usable, static_cast<int64_t>(info.free_bytes * 0.9) + 1);
}

}  // namespace
}  // namespace oasr::cache
