// Streaming sample-rate conversion of mono float audio with libsoxr (high
// quality), used to bring 8-48 kHz client audio to the model's 16 kHz.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct soxr;

namespace oasr::encoder {

class Resampler {
 public:
  // Rates in Hz, each in [8000, 48000]; INVALID_ARGUMENT names the bad one.
  // Equal rates make a pass-through.
  static absl::StatusOr<std::unique_ptr<Resampler>> Create(int in_rate, int out_rate);
  ~Resampler();
  Resampler(const Resampler&) = delete;
  Resampler& operator=(const Resampler&) = delete;

  int in_rate() const { return in_rate_; }
  int out_rate() const { return out_rate_; }

  // Consumes n input samples and appends whatever output is ready to *out
  // (the filter holds back a few milliseconds until Flush). Output does not
  // depend on how the input is split. Not thread-safe (one per stream).
  absl::Status Process(const float* in, int64_t n, std::vector<float>* out);

  // Ends the input and appends the held-back tail. Afterwards Process fails
  // with FAILED_PRECONDITION.
  absl::Status Flush(std::vector<float>* out);

 private:
  Resampler(int in_rate, int out_rate, soxr* handle)
      : in_rate_(in_rate), out_rate_(out_rate), handle_(handle) {}

  int in_rate_;
  int out_rate_;
  soxr* handle_;  // Owned; null for a pass-through.
  bool flushed_ = false;
};

}  // namespace oasr::encoder
