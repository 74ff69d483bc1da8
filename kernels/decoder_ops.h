// The attention decoder's ops beyond linear, layer norm and softmax
// (attention rescoring, encoder/attention_rescorer.h), for hypotheses packed
// one row per decoder position without padding:
// - EmbedTokens: out[r] = table[tokens[r]] * scale + positions[steps[r]];
// - SpanAttention: multi-head attention where query row r attends to the
//   key rows [key_begin[r], key_end[r]) (its own hypothesis' prefix for
//   causal self-attention, its segment's frames for cross-attention);
// - TargetLogProbs: out[r] = log_softmax(logits[r])[targets[r]];
// - CopyRowRuns: runs of rows copied between two row-major buffers of one
//   width (the paged segment memory's appends and gathers).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "common/execution_context.h"
#include "common/gpu_stream.h"

namespace oasr::kernels {

struct EmbedParams {
  const float* table = nullptr;      // [V, d]
  const float* positions = nullptr;  // [P, d]
  const int32_t* tokens = nullptr;   // [rows], in [0, V)
  const int32_t* steps = nullptr;    // [rows], in [0, P)
  float scale = 1.0f;
  float* out = nullptr;  // [rows, d]
  int64_t rows = 0;
  int64_t d = 0;
};

struct SpanAttentionParams {
  const float* q = nullptr;  // [rows, heads * dk], stride ldq
  int64_t ldq = 0;
  const float* k = nullptr;  // key rows, [*, heads * dk], stride ldkv
  const float* v = nullptr;  // value rows, same layout as k
  int64_t ldkv = 0;
  const int32_t* key_begin = nullptr;  // [rows]
  const int32_t* key_end = nullptr;    // [rows], key_end[r] > key_begin[r]
  float* out = nullptr;                // [rows, heads * dk], stride ldo
  int64_t ldo = 0;
  int64_t rows = 0;
  int heads = 0;
  int dk = 0;
  float scale = 1.0f;  // Applied to q.k.
  // CUDA only: [rows * heads, score_ld] float32 scratch, score_ld at least
  // the longest span.
  float* scores = nullptr;
  int64_t score_ld = 0;
};

struct TargetLogProbParams {
  const float* logits = nullptr;  // [rows, n], stride ld
  int64_t ld = 0;
  int64_t rows = 0;
  int64_t n = 0;
  const int32_t* targets = nullptr;  // [rows], in [0, n)
  float* out = nullptr;              // [rows]
};

struct CopyRowRunsParams {
  const float* src = nullptr;
  float* dst = nullptr;
  int64_t width = 0;  // Floats a row.
  // [runs, 3]: source row, destination row, rows.
  const int32_t* runs = nullptr;
  int64_t num_runs = 0;
};

// The ops on ctx's device (asynchronous on CUDA; every pointer on that
// device). INVALID_ARGUMENT for null pointers or sizes that do not fit.
absl::Status EmbedTokens(ExecutionContext& ctx, const EmbedParams& p);
absl::Status SpanAttention(ExecutionContext& ctx, const SpanAttentionParams& p);
absl::Status TargetLogProbs(ExecutionContext& ctx, const TargetLogProbParams& p);
absl::Status CopyRowRuns(ExecutionContext& ctx, const CopyRowRunsParams& p);

// CPU implementations (host pointers).
void EmbedTokensCpu(const EmbedParams& p);
void SpanAttentionCpu(const SpanAttentionParams& p);
void TargetLogProbsCpu(const TargetLogProbParams& p);
void CopyRowRunsCpu(const CopyRowRunsParams& p);

#if OASR_WITH_CUDA
void LaunchEmbedTokens(const EmbedParams& p, GpuStream stream);
void LaunchSpanAttention(const SpanAttentionParams& p, GpuStream stream);
void LaunchTargetLogProbs(const TargetLogProbParams& p, GpuStream stream);
void LaunchCopyRowRuns(const CopyRowRunsParams& p, GpuStream stream);
#endif

}  // namespace oasr::kernels
