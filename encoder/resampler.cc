#include "encoder/resampler.h"

#include <soxr.h>

#include "absl/strings/str_cat.h"

namespace oasr::encoder {

absl::StatusOr<std::unique_ptr<Resampler>> Resampler::Create(int in_rate, int out_rate) {
  for (auto [name, rate] : {std::pair<const char*, int>{"in_rate", in_rate}, {"out_rate", out_rate}}) {
    if (rate < 8000 || rate > 48000) {
      return absl::InvalidArgumentError(
          absl::StrCat("Resampler: ", name, "=", rate, " is outside [8000, 48000] Hz"));
    }
  }
  if (in_rate == out_rate) return std::unique_ptr<Resampler>(new Resampler(in_rate, out_rate, nullptr));
  soxr_error_t error = nullptr;
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  soxr_t handle = soxr_create(in_rate, out_rate, 1, &error, &io, &quality, nullptr);
  if (error != nullptr || handle == nullptr) {
    return absl::InternalError(absl::StrCat("soxr_create: ", error ? error : "failed"));
  }
  return std::unique_ptr<Resampler>(new Resampler(in_rate, out_rate, handle));
}

Resampler::~Resampler() {
  if (handle_ != nullptr) soxr_delete(handle_);
}

absl::Status Resampler::Process(const float* in, int64_t n, std::vector<float>* out) {
  if (flushed_) return absl::FailedPreconditionError("Resampler: Process after Flush");
  if (handle_ == nullptr) {
    out->insert(out->end(), in, in + n);
    return absl::OkStatus();
  }
  int64_t consumed = 0;
  while (consumed < n) {
    const size_t room = static_cast<size_t>((n - consumed) * out_rate_ / in_rate_ + 256);
    const size_t start = out->size();
    out->resize(start + room);
    size_t idone = 0, odone = 0;
    soxr_error_t error = soxr_process(handle_, in + consumed, static_cast<size_t>(n - consumed),
                                      &idone, out->data() + start, room, &odone);
    out->resize(start + odone);
    if (error != nullptr) return absl::InternalError(absl::StrCat("soxr_process: ", error));
    consumed += static_cast<int64_t>(idone);
  }
  return absl::OkStatus();
}

absl::Status Resampler::Flush(std::vector<float>* out) {
  if (flushed_) return absl::OkStatus();
  flushed_ = true;
  if (handle_ == nullptr) return absl::OkStatus();
  constexpr size_t kRoom = 4096;
  for (;;) {
    const size_t start = out->size();
    out->resize(start + kRoom);
    size_t odone = 0;
    soxr_error_t error = soxr_process(handle_, nullptr, 0, nullptr, out->data() + start, kRoom, &odone);
    out->resize(start + odone);
    if (error != nullptr) return absl::InternalError(absl::StrCat("soxr_process: ", error));
    if (odone == 0) break;
  }
  return absl::OkStatus();
}

}  // namespace oasr::encoder
