#include "server/load_generator.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <queue>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/thread_name.h"
#include "encoder/resampler.h"
#include "nlohmann/json.hpp"
#include "server/client_channel.h"
#include "server/grpc_status.h"

namespace oasr::server {
namespace {

using Clock = std::chrono::steady_clock;
using Request = asr::v1::StreamingRecognizeRequest;
using Response = asr::v1::StreamingRecognizeResponse;

constexpr double kHistogramMinMs = 0.01;
const double kLogGrowth = std::log(1.01);

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// User + system CPU seconds of `who` (RUSAGE_THREAD or RUSAGE_SELF).
double CpuSeconds(int who) {
  rusage usage{};
  getrusage(who, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// A clip at one rate.
struct Audio {
  int rate = 0;
  std::vector<int16_t> samples;
};

absl::StatusOr<Audio> Resample(const LoadClip& clip, int rate) {
  Audio out{rate, {}};
  if (rate == clip.rate) {
    out.samples = clip.samples;
    return out;
  }
  absl::StatusOr<std::unique_ptr<encoder::Resampler>> resampler =
      encoder::Resampler::Create(clip.rate, rate);
  if (!resampler.ok()) return resampler.status();
  std::vector<float> in(clip.samples.size()), resampled;
  for (size_t i = 0; i < in.size(); ++i) in[i] = clip.samples[i] / 32768.0f;
  if (absl::Status s =
          (*resampler)->Process(in.data(), static_cast<int64_t>(in.size()), &resampled);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = (*resampler)->Flush(&resampled); !s.ok()) return s;
  out.samples.resize(resampled.size());
  for (size_t i = 0; i < resampled.size(); ++i) {
    out.samples[i] =
        static_cast<int16_t>(std::clamp(std::lround(resampled[i] * 32768.0f), -32768L, 32767L));
  }
  return out;
}

bool AccountedFor(const StreamRecord& r, double frame_s) {
  return r.audio_processed_s + frame_s + 1e-3 >= r.audio_sent_s;
}

// The report's per-stream counts, added up as streams end (a worker's own,
// merged at the end), so that no record need be kept.
struct StreamTally {
  int64_t streams = 0;
  std::map<std::string, int64_t> codes, behaviours;
  int64_t failed = 0, audio_lost = 0, no_final = 0;
  double audio_sent_s = 0, audio_processed_s = 0;
  // The first few errors (by starting order) of streams that should have
  // ended OK: (index, "CODE: message").
  std::vector<std::pair<int64_t, std::string>> errors;
  static constexpr size_t kErrors = 3;

  void Add(const StreamRecord& r, double frame_s) {
    ++streams;
    ++codes[GrpcCodeName(static_cast<int>(r.code))];
    ++behaviours[StreamBehaviourName(r.behaviour)];
    audio_sent_s += r.audio_sent_s;
    audio_processed_s += r.audio_processed_s;
    bool wrong = false;
    switch (r.behaviour) {
      case StreamBehaviour::kNormal:
      case StreamBehaviour::kStall:
        if (r.code != grpc::StatusCode::OK) {
          wrong = true;
          AddError(r.index, absl::StrCat(GrpcCodeName(static_cast<int>(r.code)), ": ", r.error));
        } else if (!r.final_result) {
          wrong = true;
          ++no_final;
        } else if (r.finish_reason == "stop" && !AccountedFor(r, frame_s)) {
          wrong = true;
          ++audio_lost;
        }
        break;
      case StreamBehaviour::kCancel:
        wrong = r.code != grpc::StatusCode::CANCELLED;
        break;
      case StreamBehaviour::kVanish:
        break;  // Any status: the server had to end it.
    }
    if (wrong) ++failed;
  }

  void Merge(const StreamTally& other) {
    streams += other.streams;
    for (const auto& [name, n] : other.codes) codes[name] += n;
    for (const auto& [name, n] : other.behaviours) behaviours[name] += n;
    failed += other.failed;
    audio_lost += other.audio_lost;
    no_final += other.no_final;
    audio_sent_s += other.audio_sent_s;
    audio_processed_s += other.audio_processed_s;
    for (const auto& [index, error] : other.errors) AddError(index, error);
  }

 private:
  // Keeps the kErrors earliest-starting ones.
  void AddError(int64_t index, std::string error) {
    errors.emplace_back(index, std::move(error));
    std::sort(errors.begin(), errors.end());
    if (errors.size() > kErrors) errors.pop_back();
  }
};

class Worker;

enum class OpKind { kStart, kWrite, kRead, kWritesDone, kFinish };

struct Stream;

// A completion-queue tag: which stream, which operation.
struct Op {
  Stream* stream;
  OpKind kind;
};

struct Stream {
  explicit Stream(StreamRecord r)
      : record(std::move(r)),
        start_op{this, OpKind::kStart},
        write_op{this, OpKind::kWrite},
        read_op{this, OpKind::kRead},
        writes_done_op{this, OpKind::kWritesDone},
        finish_op{this, OpKind::kFinish} {}

  StreamRecord record;
  int slot = 0;
  const Audio* audio = nullptr;
  int64_t total_samples = 0;  // What this stream sends (the clip repeated or cut).
  int64_t step = 0;           // Samples per message.
  int64_t messages = 0;
  Clock::time_point t0;  // The stream's audio clock starts here.
  Clock::time_point half_closed_at;
  double event_at_s = -1;  // Cancel / stall / vanish point, in its audio.

  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<Request, Response>> call;
  Request request;
  Response response;
  grpc::Status status;
  Op start_op, write_op, read_op, writes_done_op, finish_op;

  int64_t next_message = 0;  // The next audio message to send.
  // Send times of the messages not yet covered by a result; front() is
  // message sent_base.
  std::deque<Clock::time_point> sent_at;
  int64_t sent_base = 0;
  int64_t covered_samples = 0;

  bool write_in_flight = false;
  bool config_sent = false;
  bool half_closed = false;
  bool reads_done = false;
  bool finish_called = false;
  bool finished = false;
  bool stalled = false;    // Not reading now.
  bool read_owed = false;  // A read to issue when the stall ends.
  bool silent = false;     // Vanished: sends nothing more.
  int pending = 0;         // Operations and timers that still point here.
};

enum class TimerKind { kSlotStart, kSend, kEvent, kStallEnd };

struct Timer {
  Clock::time_point at;
  TimerKind kind;
  Stream* stream;  // Null for kSlotStart.
  int slot;
  bool operator>(const Timer& other) const { return at > other.at; }
};

// Shared by the workers.
struct Run {
  const LoadOptions* options;
  std::vector<std::vector<Audio>> audio;  // [clip][rate index]
  std::vector<int> rates;                 // Empty: each clip's own.
  Clock::time_point begin, stop_starting;
  std::atomic<int64_t> next_index{0};
};

class Worker {
 public:
  Worker(Run* run, int id) : run_(run), random_(run->options->seed * 7919 + id) {}

  void AddSlot(int slot, Clock::time_point first_start) {
    timers_.push({first_start, TimerKind::kSlotStart, nullptr, slot});
  }

  void Loop() {
    const double cpu0 = CpuSeconds(RUSAGE_THREAD);
    while (!timers_.empty() || live_ > 0) {
      const Clock::time_point now = Clock::now();
      Clock::time_point wake = now + std::chrono::milliseconds(100);
      if (!timers_.empty()) wake = std::min(wake, timers_.top().at);
      void* tag = nullptr;
      bool ok = false;
      const auto deadline = std::chrono::system_clock::now() +
                            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                std::max(Clock::duration::zero(), wake - now));
      const grpc::CompletionQueue::NextStatus got = cq_.AsyncNext(&tag, &ok, deadline);
      if (got == grpc::CompletionQueue::GOT_EVENT) {
        Op* op = static_cast<Op*>(tag);
        --op->stream->pending;
        OnOp(op->stream, op->kind, ok);
      }
      FireTimers();
    }
    cpu_s_ = CpuSeconds(RUSAGE_THREAD) - cpu0;
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  LatencyHistogram chunk_latency, final_latency, send_lag;
  StreamTally tally;                  // Every stream that ended here.
  std::vector<StreamRecord> records;  // With LoadOptions::keep_records.
  int64_t messages = 0;
  double cpu_s() const { return cpu_s_; }

 private:
  const LoadOptions& options() const { return *run_->options; }

  void FireTimers() {
    while (!timers_.empty() && timers_.top().at <= Clock::now()) {
      const Timer timer = timers_.top();
      timers_.pop();
      if (timer.kind == TimerKind::kSlotStart) {
        StartStream(timer.slot);
        continue;
      }
      Stream* s = timer.stream;
      --s->pending;
      if (!s->finished) {
        switch (timer.kind) {
          case TimerKind::kSend:
            MaybeSend(s);
            break;
          case TimerKind::kEvent:
            OnBehaviourEvent(s);
            break;
          case TimerKind::kStallEnd:
            s->stalled = false;
            if (s->read_owed) {
              s->read_owed = false;
              IssueRead(s);
            }
            break;
          case TimerKind::kSlotStart:
            break;
        }
      }
      MaybeRelease(s);
    }
  }

  void AddTimer(Stream* s, TimerKind kind, Clock::time_point at) {
    ++s->pending;
    timers_.push({at, kind, s, s->slot});
  }

  // By a low-discrepancy sequence over the stream index, so that every run
  // of n streams holds each behaviour's fraction of them to within a few.
  StreamBehaviour PickBehaviour(int64_t index) const {
    const double offset = static_cast<double>(options().seed % 1000) / 1000.0;
    const double u = std::fmod(offset + static_cast<double>(index) * 0.6180339887498949, 1.0);
    const LoadOptions& o = options();
    if (u < o.cancel_fraction) return StreamBehaviour::kCancel;
    if (u < o.cancel_fraction + o.stall_fraction) return StreamBehaviour::kStall;
    if (u < o.cancel_fraction + o.stall_fraction + o.vanish_fraction) {
      return StreamBehaviour::kVanish;
    }
    return StreamBehaviour::kNormal;
  }

  void StartStream(int slot) {
    const LoadOptions& o = options();
    const Clock::time_point now = Clock::now();
    if (o.duration_s > 0 && now >= run_->stop_starting) return;
    const int64_t index = run_->next_index.fetch_add(1);
    if (o.max_streams > 0 && index >= o.max_streams) return;
    StreamRecord record;
    record.index = index;
    record.behaviour = PickBehaviour(index);
    auto* s = new Stream(std::move(record));
    s->slot = slot;
    const size_t clip = static_cast<size_t>(index) % run_->audio.size();
    const size_t rate_index = run_->rates.empty() ? 0
                                                  : std::uniform_int_distribution<size_t>(
                                                        0, run_->rates.size() - 1)(random_);
    s->audio = &run_->audio[clip][rate_index];
    s->record.rate = s->audio->rate;
    double seconds = static_cast<double>(s->audio->samples.size()) / s->audio->rate;
    if (o.max_seconds > 0) {
      seconds = std::uniform_real_distribution<double>(o.min_seconds, o.max_seconds)(random_);
    }
    s->total_samples = std::max<int64_t>(1, std::llround(seconds * s->audio->rate));
    s->step = std::max<int64_t>(1, static_cast<int64_t>(s->audio->rate) * o.chunk_ms / 1000);
    s->messages = (s->total_samples + s->step - 1) / s->step;
    s->record.start_s = Seconds(now - run_->begin);
    if (s->record.behaviour != StreamBehaviour::kNormal) {
      // Somewhere in the middle 80 % of its audio.
      s->event_at_s = seconds * std::uniform_real_distribution<double>(0.1, 0.9)(random_);
    }
    ++live_;
    s->context.set_deadline(std::chrono::system_clock::now() +
                            std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000)));
    AddBearerToken(o.token, &s->context);
    auto stub =
        asr::v1::Speech::NewStub(o.channels[static_cast<size_t>(index) % o.channels.size()]);
    s->call = stub->PrepareAsyncStreamingRecognize(&s->context, &cq_);
    ++s->pending;
    s->call->StartCall(&s->start_op);
  }

  void OnOp(Stream* s, OpKind kind, bool ok) {
    switch (kind) {
      case OpKind::kStart:
        if (!ok) {
          s->reads_done = true;
          break;
        }
        s->t0 = Clock::now();
        *s->request.mutable_streaming_config() = options().config;
        s->request.mutable_streaming_config()->mutable_config()->set_sample_rate_hertz(
            s->audio->rate);
        s->write_in_flight = true;
        ++s->pending;
        s->call->Write(s->request, &s->write_op);
        IssueRead(s);
        if (s->event_at_s >= 0) {
          AddTimer(s, TimerKind::kEvent,
                   s->t0 + std::chrono::microseconds(static_cast<int64_t>(s->event_at_s * 1e6)));
        }
        break;
      case OpKind::kWrite:
        s->write_in_flight = false;
        s->config_sent = true;
        if (!ok) {
          s->silent = true;  // The call is over; its status says why.
          break;
        }
        MaybeSend(s);
        break;
      case OpKind::kWritesDone:
        s->write_in_flight = false;
        break;
      case OpKind::kRead:
        if (!ok) {
          s->reads_done = true;
          break;
        }
        OnResponse(s);
        if (s->stalled) {
          s->read_owed = true;
        } else {
          IssueRead(s);
        }
        break;
      case OpKind::kFinish:
        s->finished = true;
        s->record.code = s->status.error_code();
        if (!s->status.ok()) s->record.error = s->status.error_message();
        s->record.end_s = Seconds(Clock::now() - run_->begin);
        break;
    }
    MaybeFinish(s);
    MaybeRelease(s);
  }

  Clock::time_point Due(const Stream* s, int64_t message) const {
    return s->t0 + std::chrono::microseconds(
                       static_cast<int64_t>((message + 1) * options().chunk_ms * 1000));
  }

  // Sends the next message when it is due and nothing is being written;
  // otherwise arms its timer (or, after the last, half-closes).
  void MaybeSend(Stream* s) {
    if (s->write_in_flight || s->silent || s->half_closed || !s->config_sent || s->reads_done) {
      return;
    }
    if (s->next_message >= s->messages) {
      s->half_closed = true;
      s->half_closed_at = Clock::now();
      s->write_in_flight = true;
      ++s->pending;
      s->call->WritesDone(&s->writes_done_op);
      return;
    }
    const Clock::time_point now = Clock::now();
    if (options().realtime) {
      const Clock::time_point due = Due(s, s->next_message);
      if (due > now) {
        AddTimer(s, TimerKind::kSend, due);
        return;
      }
      // Stalled and vanished clients' lateness is the server's flow
      // control, not the generator's.
      if (s->record.behaviour == StreamBehaviour::kNormal ||
          s->record.behaviour == StreamBehaviour::kCancel) {
        send_lag.Add(Ms(now - due));
      }
    }
    const int64_t begin = s->next_message * s->step;
    const int64_t count = std::min(s->step, s->total_samples - begin);
    const std::vector<int16_t>& clip = s->audio->samples;
    std::string* bytes = s->request.mutable_audio_content();
    bytes->resize(static_cast<size_t>(count) * 2);
    // The clip repeated: copy it in runs.
    int64_t written = 0;
    while (written < count) {
      const size_t at = static_cast<size_t>((begin + written) % static_cast<int64_t>(clip.size()));
      const int64_t run =
          std::min<int64_t>(count - written, static_cast<int64_t>(clip.size() - at));
      std::memcpy(bytes->data() + written * 2, clip.data() + at, static_cast<size_t>(run) * 2);
      written += run;
    }
    s->sent_at.push_back(now);
    ++s->next_message;
    ++messages;
    s->record.audio_sent_s = static_cast<double>(begin + count) / s->audio->rate;
    s->write_in_flight = true;
    ++s->pending;
    s->call->Write(s->request, &s->write_op);
  }

  void IssueRead(Stream* s) {
    if (s->reads_done) return;
    ++s->pending;
    s->call->Read(&s->response, &s->read_op);
  }

  void OnResponse(Stream* s) {
    const Clock::time_point now = Clock::now();
    ++s->record.responses;
    if (s->silent && s->record.behaviour == StreamBehaviour::kVanish) return;  // Not listening.
    double processed = -1;
    for (const asr::v1::StreamingRecognitionResult& result : s->response.results()) {
      processed = std::max<double>(processed, result.audio_processed());
      if (result.is_final() && result.alternatives_size() > 0 &&
          !result.alternatives(0).transcript().empty()) {
        if (!s->record.transcript.empty()) s->record.transcript += ' ';
        s->record.transcript += result.alternatives(0).transcript();
      }
      if (!result.finish_reason().empty()) {
        s->record.final_result = true;
        s->record.finish_reason = result.finish_reason();
        if (s->half_closed) {
          s->record.final_latency_ms = Ms(now - s->half_closed_at);
          // A stalled client's final waits for it to read again.
          if (s->record.behaviour == StreamBehaviour::kNormal) {
            final_latency.Add(s->record.final_latency_ms);
          }
        }
      }
    }
    if (processed < 0) return;
    s->record.audio_processed_s = std::max(s->record.audio_processed_s, processed);
    const int64_t covered = std::llround(processed * s->audio->rate);
    if (covered <= s->covered_samples) return;
    s->covered_samples = covered;
    // The message that completed the audio this response needed.
    const int64_t needed = covered + std::llround(options().lookahead_s * s->audio->rate);
    const int64_t message = std::min<int64_t>((needed - 1) / s->step, s->next_message - 1);
    if (message >= s->sent_base &&
        message - s->sent_base < static_cast<int64_t>(s->sent_at.size())) {
      if (s->record.behaviour == StreamBehaviour::kNormal && !s->half_closed) {
        chunk_latency.Add(Ms(now - s->sent_at[static_cast<size_t>(message - s->sent_base)]));
      }
      const int64_t drop = message + 1 - s->sent_base;
      s->sent_at.erase(s->sent_at.begin(), s->sent_at.begin() + drop);
      s->sent_base = message + 1;
    }
  }

  void OnBehaviourEvent(Stream* s) {
    switch (s->record.behaviour) {
      case StreamBehaviour::kCancel:
        s->context.TryCancel();
        break;
      case StreamBehaviour::kStall:
        s->stalled = true;
        AddTimer(s, TimerKind::kStallEnd,
                 Clock::now() + std::chrono::milliseconds(
                                    static_cast<int64_t>(options().stall_seconds * 1000)));
        break;
      case StreamBehaviour::kVanish:
        s->silent = true;
        break;
      case StreamBehaviour::kNormal:
        break;
    }
  }

  // Asks for the status once nothing more will be read or written.
  void MaybeFinish(Stream* s) {
    if (s->finish_called || !s->reads_done || s->write_in_flight) return;
    s->finish_called = true;  // Also after a failed StartCall: Finish says why.
    ++s->pending;
    s->call->Finish(&s->status, &s->finish_op);
  }

  void MaybeRelease(Stream* s) {
    if (!s->finished || s->pending > 0) return;
    tally.Add(s->record, options().frame_s);
    if (options().keep_records) records.push_back(std::move(s->record));
    const int slot = s->slot;
    delete s;
    --live_;
    const LoadOptions& o = options();
    if (o.duration_s > 0 && Clock::now() < run_->stop_starting) {
      timers_.push({Clock::now(), TimerKind::kSlotStart, nullptr, slot});
    }
  }

  Run* run_;
  std::mt19937_64 random_;
  grpc::CompletionQueue cq_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  int64_t live_ = 0;
  double cpu_s_ = 0;
};

}  // namespace

void LatencyHistogram::Add(double ms) {
  const double v = std::max(ms, kHistogramMinMs);
  const int bucket =
      std::min(kBuckets - 1, static_cast<int>(std::log(v / kHistogramMinMs) / kLogGrowth));
  ++buckets_[static_cast<size_t>(bucket)];
  ++count_;
  sum_ += ms;
  max_ = std::max(max_, ms);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  max_ = std::max(max_, other.max_);
}

double LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0.0;
  const auto rank = static_cast<int64_t>(std::ceil(std::clamp(p, 0.0, 1.0) * count_));
  int64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= std::max<int64_t>(rank, 1)) {
      return std::min(max_, kHistogramMinMs * std::exp((i + 1) * kLogGrowth));
    }
  }
  return max_;
}

const char* StreamBehaviourName(StreamBehaviour behaviour) {
  switch (behaviour) {
    case StreamBehaviour::kNormal:
      return "normal";
    case StreamBehaviour::kCancel:
      return "cancel";
    case StreamBehaviour::kStall:
      return "stall";
    case StreamBehaviour::kVanish:
      return "vanish";
  }
  return "?";
}

absl::Status LoadOptions::Validate() const {
  if (channels.empty()) return absl::InvalidArgumentError("channels: none given");
  if (clips.empty()) return absl::InvalidArgumentError("clips: none given");
  for (const LoadClip& clip : clips) {
    if (clip.samples.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("clips: '", clip.name, "' has no audio"));
    }
  }
  if (concurrency < 1 || concurrency > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("concurrency: ", concurrency, " is outside [1, 1000000]"));
  }
  if (threads < 1 || threads > 256) {
    return absl::InvalidArgumentError(absl::StrCat("threads: ", threads, " is outside [1, 256]"));
  }
  if (chunk_ms < 10 || chunk_ms > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_ms: ", chunk_ms, " is outside [10, 1000]"));
  }
  if (!(duration_s >= 0) || !(ramp_s >= 0) || !(timeout_s > 0) || max_streams < 0) {
    return absl::InvalidArgumentError(
        "duration_s, ramp_s, max_streams: must not be negative; timeout_s: must be positive");
  }
  if (!(min_seconds >= 0) || max_seconds < min_seconds || (max_seconds > 0 && min_seconds <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("min_seconds, max_seconds: ", min_seconds, ", ",
                                                   max_seconds, " are not 0 < min <= max"));
  }
  for (int rate : rates) {
    if (rate < 8000 || rate > 48000) {
      return absl::InvalidArgumentError(
          absl::StrCat("rates: ", rate, " Hz is outside [8000, 48000]"));
    }
  }
  const double behaviours = cancel_fraction + stall_fraction + vanish_fraction;
  if (cancel_fraction < 0 || stall_fraction < 0 || vanish_fraction < 0 || behaviours > 1.0 + 1e-9) {
    return absl::InvalidArgumentError(
        absl::StrCat("cancel_fraction, stall_fraction, vanish_fraction: each at least 0 and "
                     "their sum at most 1 (it is ",
                     behaviours, ")"));
  }
  if (!(stall_seconds >= 0) || !(frame_s >= 0) || !(lookahead_s >= 0) || !(latency_bound_ms > 0)) {
    return absl::InvalidArgumentError(
        "stall_seconds, frame_s, lookahead_s: must not be negative; latency_bound_ms: must be "
        "positive");
  }
  return absl::OkStatus();
}

int DefaultLoadChannels(int threads, int concurrency) {
  constexpr int kStreamsPerChannel = 40, kMaxChannels = 4096;
  const int by_streams = (std::max(concurrency, 0) + kStreamsPerChannel - 1) / kStreamsPerChannel;
  return std::clamp(std::max(threads, by_streams), 1, kMaxChannels);
}

absl::StatusOr<LoadReport> RunLoad(const LoadOptions& options) {
  if (absl::Status valid = options.Validate(); !valid.ok()) return valid;
  // As the server does: no lock-graph bookkeeping in gRPC's every operation.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Run run;
  run.options = &options;
  run.rates = options.rates;
  for (const LoadClip& clip : options.clips) {
    std::vector<Audio> at_rates;
    if (run.rates.empty()) {
      at_rates.push_back({clip.rate, clip.samples});
    } else {
      for (int rate : run.rates) {
        absl::StatusOr<Audio> audio = Resample(clip, rate);
        if (!audio.ok()) return audio.status();
        at_rates.push_back(std::move(*audio));
      }
    }
    run.audio.push_back(std::move(at_rates));
  }

  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < options.threads; ++t) workers.push_back(std::make_unique<Worker>(&run, t));
  const double cpu0 = CpuSeconds(RUSAGE_SELF);
  run.begin = Clock::now();
  run.stop_starting =
      run.begin + std::chrono::microseconds(static_cast<int64_t>(options.duration_s * 1e6));
  for (int slot = 0; slot < options.concurrency; ++slot) {
    const double offset = options.concurrency > 1
                              ? options.ramp_s * slot / static_cast<double>(options.concurrency)
                              : 0.0;
    workers[static_cast<size_t>(slot % options.threads)]->AddSlot(
        slot, run.begin + std::chrono::microseconds(static_cast<int64_t>(offset * 1e6)));
  }
  std::vector<std::thread> threads;
  for (auto& worker : workers) {
    threads.emplace_back([w = worker.get()] {
      SetThreadName("oasr-load");
      w->Loop();
    });
  }
  for (std::thread& t : threads) t.join();

  LoadReport report;
  report.wall_s = Seconds(Clock::now() - run.begin);
  report.cpu_s = CpuSeconds(RUSAGE_SELF) - cpu0;
  StreamTally tally;
  for (auto& worker : workers) {
    report.chunk_latency.Merge(worker->chunk_latency);
    report.final_latency.Merge(worker->final_latency);
    report.send_lag.Merge(worker->send_lag);
    report.messages += worker->messages;
    report.busiest_thread = std::max(report.busiest_thread, worker->cpu_s() / report.wall_s);
    tally.Merge(worker->tally);
    for (StreamRecord& r : worker->records) report.records.push_back(std::move(r));
  }
  std::sort(report.records.begin(), report.records.end(),
            [](const StreamRecord& a, const StreamRecord& b) { return a.index < b.index; });
  report.streams = tally.streams;
  report.codes = std::move(tally.codes);
  report.behaviours = std::move(tally.behaviours);
  report.audio_sent_s = tally.audio_sent_s;
  report.audio_processed_s = tally.audio_processed_s;
  report.failed_streams = tally.failed;
  report.audio_lost_streams = tally.audio_lost;
  report.no_final_streams = tally.no_final;

  // What limited the run.
  if (report.failed_streams > 0) {
    std::vector<std::string> errors;
    for (const auto& [index, error] : tally.errors) errors.push_back(error);
    report.warnings.push_back(absl::StrCat(
        report.failed_streams, " streams failed (", report.audio_lost_streams,
        " with audio not accounted for, ", report.no_final_streams, " without a final result)",
        errors.empty() ? "" : "; e.g. ", absl::StrJoin(errors, "; ")));
  }
  const double p99 = report.chunk_latency.Percentile(0.99);
  if (p99 > options.latency_bound_ms) {
    report.warnings.push_back(
        absl::StrFormat("the server is behind real time: chunk latency p99 %.0f ms is above the "
                        "%.0f ms bound",
                        p99, options.latency_bound_ms));
  }
  const double lag99 = report.send_lag.Percentile(0.99);
  if (options.realtime &&
      (lag99 > std::max(20.0, 0.5 * options.chunk_ms) || report.busiest_thread > 0.9)) {
    report.warnings.push_back(absl::StrFormat(
        "the load generator fell behind real time: send lag p99 %.1f ms, busiest thread %.0f %% "
        "of a core (add --threads, or run it on another machine)",
        lag99, 100 * report.busiest_thread));
  }
  return report;
}

std::string LoadReport::Summary(const LoadOptions& options) const {
  std::string out = absl::StrFormat(
      "load: %d concurrent %s streams, %d-ms messages, %d threads, %zu channels; %.1f s wall\n",
      options.concurrency, options.realtime ? "real-time" : "as-fast-as-possible", options.chunk_ms,
      options.threads, options.channels.size(), wall_s);
  std::vector<std::string> parts;
  for (const auto& [name, n] : behaviours) parts.push_back(absl::StrCat(n, " ", name));
  absl::StrAppendFormat(&out, "  streams        %d (%s), %d failed\n", streams,
                        absl::StrJoin(parts, ", "), failed_streams);
  parts.clear();
  for (const auto& [name, n] : codes) parts.push_back(absl::StrCat(name, " x", n));
  absl::StrAppendFormat(&out, "  statuses       %s\n", absl::StrJoin(parts, ", "));
  absl::StrAppendFormat(&out,
                        "  audio          %.1f s sent, %.1f s processed (%.1fx real time over "
                        "the run); %d streams lost audio\n",
                        audio_sent_s, audio_processed_s, audio_sent_s / std::max(wall_s, 1e-9),
                        audio_lost_streams);
  auto line = [&](const char* name, const LatencyHistogram& h, const char* what) {
    absl::StrAppendFormat(
        &out, "  %-14s p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  max %.1f ms  (%d %s)\n", name,
        h.Percentile(0.5), h.Percentile(0.9), h.Percentile(0.99), h.max(), h.count(), what);
  };
  line("chunk latency", chunk_latency, "responses");
  line("final latency", final_latency, "after half-close");
  line("send lag", send_lag, "messages");
  absl::StrAppendFormat(&out, "  client cpu     %.0f %% of a core (busiest thread %.0f %%)\n",
                        100 * cpu_s / std::max(wall_s, 1e-9), 100 * busiest_thread);
  if (warnings.empty()) {
    out += "  verdict        held\n";
  } else {
    for (const std::string& w : warnings) absl::StrAppend(&out, "  WARNING        ", w, "\n");
  }
  return out;
}

bool GetModelClock(const std::shared_ptr<grpc::Channel>& channel, const std::string& model,
                   const std::string& token, ModelClock* clock) {
  auto stub = asr::v1::Speech::NewStub(channel);
  asr::v1::ListModelsResponse models;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  AddBearerToken(token, &context);
  if (!stub->ListModels(&context, {}, &models).ok()) return false;
  for (const asr::v1::ModelInfo& m : models.models()) {
    if ((model.empty() || m.name() == model) && m.chunk_frames() > 0 && m.chunk_ms() > 0) {
      clock->frame_s = m.chunk_ms() / 1000.0 / m.chunk_frames();
      clock->lookahead_s = m.lookahead_ms() / 1000.0;
      return true;
    }
  }
  return false;
}

std::string RecordsToJsonLines(const std::vector<StreamRecord>& records) {
  std::string out;
  for (const StreamRecord& r : records) {
    const nlohmann::json j = {{"index", r.index},
                              {"behaviour", StreamBehaviourName(r.behaviour)},
                              {"rate", r.rate},
                              {"start_s", r.start_s},
                              {"end_s", r.end_s},
                              {"audio_sent_s", r.audio_sent_s},
                              {"audio_processed_s", r.audio_processed_s},
                              {"responses", r.responses},
                              {"final_result", r.final_result},
                              {"finish_reason", r.finish_reason},
                              {"final_latency_ms", r.final_latency_ms},
                              {"code", GrpcCodeName(static_cast<int>(r.code))},
                              {"error", r.error},
                              {"transcript", r.transcript}};
    out += j.dump();
    out += '\n';
  }
  return out;
}

std::string LoadReport::ToJson() const {
  auto histogram = [](const LatencyHistogram& h) {
    return nlohmann::json{{"count", h.count()},
                          {"mean_ms", h.mean()},
                          {"p50_ms", h.Percentile(0.5)},
                          {"p90_ms", h.Percentile(0.9)},
                          {"p95_ms", h.Percentile(0.95)},
                          {"p99_ms", h.Percentile(0.99)},
                          {"max_ms", h.max()}};
  };
  nlohmann::json j = {{"wall_s", wall_s},
                      {"streams", streams},
                      {"codes", codes},
                      {"behaviours", behaviours},
                      {"failed_streams", failed_streams},
                      {"audio_lost_streams", audio_lost_streams},
                      {"no_final_streams", no_final_streams},
                      {"audio_sent_s", audio_sent_s},
                      {"audio_processed_s", audio_processed_s},
                      {"messages", messages},
                      {"chunk_latency", histogram(chunk_latency)},
                      {"final_latency", histogram(final_latency)},
                      {"send_lag", histogram(send_lag)},
                      {"cpu_s", cpu_s},
                      {"busiest_thread", busiest_thread},
                      {"warnings", warnings}};
  return j.dump(2);
}

}  // namespace oasr::server
