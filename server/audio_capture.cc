#include "server/audio_capture.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"

#ifdef OASR_WITH_PORTAUDIO
#include <portaudio.h>
#endif

namespace oasr::server {
namespace {

class ReplayCapture final : public AudioCapture {
 public:
  ReplayCapture(std::string name, std::vector<int16_t> samples, int rate)
      : name_(std::move(name)), samples_(std::move(samples)), rate_(rate) {}
  ~ReplayCapture() override { Stop(); }

  int rate() const override { return rate_; }
  const std::string& name() const override { return name_; }
  bool ended() const override { return ended_.load(); }

  absl::Status Start(Sink sink) override {
    if (thread_.joinable()) return absl::FailedPreconditionError("capture already started");
    thread_ = std::thread([this, sink = std::move(sink)] {
      const size_t piece = std::max<size_t>(1, static_cast<size_t>(rate_) / 50);  // 20 ms.
      const auto start = std::chrono::steady_clock::now();
      for (size_t at = 0, n = 1; at < samples_.size() && !stop_.load(); at += piece, ++n) {
        std::this_thread::sleep_until(start + n * std::chrono::milliseconds(20));
        if (stop_.load()) break;
        sink(samples_.data() + at, std::min(piece, samples_.size() - at));
      }
      ended_.store(true);
    });
    return absl::OkStatus();
  }

  void Stop() override {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::string name_;
  std::vector<int16_t> samples_;
  int rate_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> ended_{false};
};

#ifdef OASR_WITH_PORTAUDIO

// Pa_Initialize for the process's lifetime: PortAudio counts its callers.
absl::Status InitPortAudio() {
  static const PaError error = Pa_Initialize();
  if (error != paNoError) {
    return absl::UnavailableError(absl::StrCat("PortAudio cannot start: ", Pa_GetErrorText(error)));
  }
  return absl::OkStatus();
}

class DeviceCapture final : public AudioCapture {
 public:
  DeviceCapture(PaDeviceIndex device, int rate)
      : device_(device), rate_(rate), name_(Pa_GetDeviceInfo(device)->name) {}
  ~DeviceCapture() override { Stop(); }

  int rate() const override { return rate_; }
  const std::string& name() const override { return name_; }
  bool ended() const override { return false; }

  absl::Status Start(Sink sink) override {
    if (stream_ != nullptr) return absl::FailedPreconditionError("capture already started");
    sink_ = std::move(sink);
    PaStreamParameters input{};
    input.device = device_;
    input.channelCount = 1;
    input.sampleFormat = paInt16;
    input.suggestedLatency = Pa_GetDeviceInfo(device_)->defaultLowInputLatency;
    PaError error = Pa_OpenStream(&stream_, &input, nullptr, rate_, paFramesPerBufferUnspecified,
                                  paNoFlag, &DeviceCapture::Callback, this);
    if (error == paNoError) error = Pa_StartStream(stream_);
    if (error != paNoError) {
      if (stream_ != nullptr) Pa_CloseStream(stream_);
      stream_ = nullptr;
      return absl::UnavailableError(absl::StrCat("cannot capture from '", name_, "' at ", rate_,
                                                 " Hz: ", Pa_GetErrorText(error)));
    }
    return absl::OkStatus();
  }

  void Stop() override {
    if (stream_ == nullptr) return;
    Pa_StopStream(stream_);  // Returns once the callback is done.
    Pa_CloseStream(stream_);
    stream_ = nullptr;
  }

 private:
  static int Callback(const void* input, void* /*output*/, unsigned long frames,
                      const PaStreamCallbackTimeInfo* /*time*/, PaStreamCallbackFlags /*flags*/,
                      void* self) {
    if (input != nullptr) {
      static_cast<DeviceCapture*>(self)->sink_(static_cast<const int16_t*>(input), frames);
    }
    return paContinue;
  }

  PaDeviceIndex device_;
  int rate_;
  std::string name_;
  Sink sink_;
  PaStream* stream_ = nullptr;
};

#endif  // OASR_WITH_PORTAUDIO

}  // namespace

std::unique_ptr<AudioCapture> MakeReplayCapture(std::string name, std::vector<int16_t> samples,
                                                int rate) {
  return std::make_unique<ReplayCapture>(std::move(name), std::move(samples), rate);
}

#ifdef OASR_WITH_PORTAUDIO

bool DeviceCaptureAvailable() { return true; }

absl::StatusOr<std::string> ListCaptureDevices() {
  if (absl::Status s = InitPortAudio(); !s.ok()) return s;
  std::string out;
  const PaDeviceIndex default_input = Pa_GetDefaultInputDevice();
  for (PaDeviceIndex i = 0; i < Pa_GetDeviceCount(); ++i) {
    const PaDeviceInfo* info = Pa_GetDeviceInfo(i);
    if (info == nullptr || info->maxInputChannels < 1) continue;
    absl::StrAppend(&out, i, ": ", info->name, " (", info->maxInputChannels, " ch, ",
                    static_cast<int>(info->defaultSampleRate), " Hz)",
                    i == default_input ? " (default)" : "", "\n");
  }
  return out;
}

absl::StatusOr<std::unique_ptr<AudioCapture>> OpenDeviceCapture(int device, int rate) {
  if (absl::Status s = InitPortAudio(); !s.ok()) return s;
  const PaDeviceIndex index = device >= 0 ? device : Pa_GetDefaultInputDevice();
  if (index == paNoDevice || index >= Pa_GetDeviceCount()) {
    return absl::NotFoundError(device >= 0 ? absl::StrCat("--device ", device, ": no such device")
                                           : std::string("no input device (none is the default; "
                                                         "--list-devices shows them)"));
  }
  const PaDeviceInfo* info = Pa_GetDeviceInfo(index);
  if (info == nullptr || info->maxInputChannels < 1) {
    return absl::NotFoundError(absl::StrCat("device ", index, " has no input channels"));
  }
  return std::unique_ptr<AudioCapture>(new DeviceCapture(index, rate));
}

#else

bool DeviceCaptureAvailable() { return false; }

absl::StatusOr<std::string> ListCaptureDevices() {
  return absl::UnavailableError(
      "this oasr-client was built without PortAudio (install portaudio19-dev and rebuild); "
      "--wav plays a file as if it were the microphone");
}

absl::StatusOr<std::unique_ptr<AudioCapture>> OpenDeviceCapture(int /*device*/, int /*rate*/) {
  return ListCaptureDevices().status();
}

#endif  // OASR_WITH_PORTAUDIO

}  // namespace oasr::server
