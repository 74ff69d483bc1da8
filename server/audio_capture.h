// Live audio for `oasr-client mic`: an input device through PortAudio (when
// the build found it), or audio already in memory played out in real time
// as if a microphone produced it (--wav, for machines without a sound card
// and for tests).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace oasr::server {

class AudioCapture {
 public:
  // Receives 16-bit mono samples at rate(), on a capture thread, in pieces
  // of whatever size the source produces. Must not block for long.
  using Sink = std::function<void(const int16_t* samples, size_t count)>;

  virtual ~AudioCapture() = default;
  virtual int rate() const = 0;
  // A name for the source (the device's, or the file's).
  virtual const std::string& name() const = 0;
  // Starts delivering audio to `sink` until Stop() or the source runs out
  // (ended()). FAILED_PRECONDITION when started twice; UNAVAILABLE when the
  // device cannot be opened.
  virtual absl::Status Start(Sink sink) = 0;
  // Stops delivering; no sink call is in progress once it returns. Idempotent.
  virtual void Stop() = 0;
  // True once a finite source has delivered all of its audio.
  virtual bool ended() const = 0;
};

// Plays `samples` (mono, `rate` Hz) in real time: 20 ms every 20 ms, from a
// fixed clock.
std::unique_ptr<AudioCapture> MakeReplayCapture(std::string name, std::vector<int16_t> samples,
                                                int rate);

// Whether this build captures from devices (PortAudio was found).
bool DeviceCaptureAvailable();

// The input devices, one per line: "INDEX: NAME (CHANNELS ch, DEFAULT_RATE Hz)"
// with "(default)" on the default one; UNAVAILABLE without PortAudio or when
// it cannot start.
absl::StatusOr<std::string> ListCaptureDevices();

// Input device `device` (-1: the default one) at `rate` Hz, mono 16-bit.
// NOT_FOUND when there is no input device, UNAVAILABLE without PortAudio.
absl::StatusOr<std::unique_ptr<AudioCapture>> OpenDeviceCapture(int device, int rate);

}  // namespace oasr::server
