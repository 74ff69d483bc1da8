// The front-end pool: each stream's features come out as if its audio had
// gone through its pipeline inline, in order, and closing a stream while a
// worker holds its work is safe.
#include "scheduler/stream_front_end.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/pcm16.h"
#include "encoder/fbank.h"
#include "encoder/feature_pipeline.h"
#include "encoder/pcm_source.h"

namespace oasr::scheduler {
namespace {

using encoder::Fbank;

std::vector<int16_t> Tone(std::mt19937& rng, size_t n, int rate) {
  std::uniform_real_distribution<double> freq(100, 3000);
  std::normal_distribution<double> noise(0, 300);
  const double f = freq(rng);
  std::vector<int16_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<int16_t>(
        std::clamp(4000 * std::sin(2 * M_PI * f * i / rate) + noise(rng), -32768.0, 32767.0));
  }
  return out;
}

std::unique_ptr<encoder::FeaturePipeline> Pipeline(int rate) {
  auto p = encoder::FeaturePipeline::Create({rate}, nullptr);
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(*p);
}

// Counts on_done calls per tag and lets a test wait for a stream's flush.
struct Done {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> calls;
  void operator()(int64_t tag) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++calls[tag];
    }
    cv.notify_all();
  }
  void WaitFlushed(const StreamFrontEnd& f) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return f.flushed() || !f.error().ok(); });
  }
};

TEST(StreamFrontEndTest, PoolKeepsEachStreamsAudioInOrder) {
  constexpr int kStreams = 6;
  Done done;
  done.calls.assign(kStreams, 0);
  FrontEndPool pool(3, [&](int64_t tag) { done(tag); });
  std::mt19937 rng(21);
  const int rates[] = {8000, 16000, 44100};
  std::vector<std::shared_ptr<StreamFrontEnd>> pooled;
  std::vector<std::unique_ptr<encoder::FeaturePipeline>> reference;
  std::vector<std::vector<int16_t>> audio;
  std::vector<size_t> sent(kStreams, 0);
  for (int i = 0; i < kStreams; ++i) {
    const int rate = rates[i % 3];
    pooled.push_back(std::make_shared<StreamFrontEnd>(Pipeline(rate), &pool, i));
    reference.push_back(Pipeline(rate));
    audio.push_back(Tone(rng, static_cast<size_t>(rate * 1.5), rate));
  }
  // Small pieces of every stream, interleaved: a piece applied out of order
  // or by two workers at once would change that stream's frames.
  for (bool more = true; more;) {
    more = false;
    for (int i = 0; i < kStreams; ++i) {
      const size_t n = std::min<size_t>(audio[i].size() - sent[i], 40 + rng() % 600);
      if (n == 0) continue;
      more = true;
      std::vector<int16_t> piece(audio[i].begin() + sent[i], audio[i].begin() + sent[i] + n);
      ASSERT_TRUE(reference[i]->AcceptPcm16(piece.data(), static_cast<int64_t>(n)).ok());
      ASSERT_TRUE(pooled[i]->Push(std::move(piece)).ok());
      sent[i] += n;
    }
  }
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(pooled[i]->End().ok());
    ASSERT_TRUE(reference[i]->InputFinished().ok());
  }
  for (int i = 0; i < kStreams; ++i) {
    done.WaitFlushed(*pooled[i]);
    ASSERT_TRUE(pooled[i]->error().ok()) << pooled[i]->error();
    const int64_t frames = reference[i]->NumFramesReady();
    ASSERT_EQ(pooled[i]->NumFramesReady(), frames) << "stream " << i;
    std::vector<float> got(frames * Fbank::kNumBins), want(frames * Fbank::kNumBins);
    ASSERT_TRUE(pooled[i]->GetFrames(0, frames, got.data()).ok());
    ASSERT_TRUE(reference[i]->GetFrames(0, frames, want.data()).ok());
    EXPECT_EQ(got, want) << "stream " << i;
    // Discarding keeps later frames readable and earlier ones refused.
    pooled[i]->DiscardFramesBefore(frames / 2);
    EXPECT_EQ(pooled[i]->GetFrames(0, 1, got.data()).code(), absl::StatusCode::kOutOfRange);
    ASSERT_TRUE(pooled[i]->GetFrames(frames / 2, frames - frames / 2, got.data()).ok());
    EXPECT_TRUE(std::equal(got.begin(), got.begin() + (frames - frames / 2) * Fbank::kNumBins,
                           want.begin() + frames / 2 * Fbank::kNumBins));
    // Windows read while the frames before them are dropped a few at a time
    // (the buffer compacts only now and then) are still the reference's.
    for (int64_t start = frames / 2; start < frames; start += 7) {
      pooled[i]->DiscardFramesBefore(start);
      const int64_t count = std::min<int64_t>(11, frames - start);
      ASSERT_TRUE(pooled[i]->GetFrames(start, count, got.data()).ok()) << "frame " << start;
      EXPECT_TRUE(std::equal(got.begin(), got.begin() + count * Fbank::kNumBins,
                             want.begin() + start * Fbank::kNumBins))
          << "stream " << i << " frame " << start;
      EXPECT_EQ(pooled[i]->GetFrames(start - 1, 1, got.data()).code(),
                absl::StatusCode::kOutOfRange);
    }
  }
}

// A device front end's source (16 kHz PCM in rows, several rows a frame)
// through the pool: its frames and windows -- overlapping, as consecutive
// chunks' are -- are the inline source's.
TEST(StreamFrontEndTest, PoolPublishesPcmWindowsInFrames) {
  Done done;
  done.calls.assign(2, 0);
  FrontEndPool pool(2, [&](int64_t tag) { done(tag); });
  std::mt19937 rng(8);
  for (int rate : {16000, 8000}) {
    auto pooled_source = encoder::PcmSource::Create({rate});
    auto inline_source = encoder::PcmSource::Create({rate});
    ASSERT_TRUE(pooled_source.ok() && inline_source.ok());
    auto pooled = std::make_shared<StreamFrontEnd>(std::move(*pooled_source), &pool, 0);
    StreamFrontEnd direct(std::move(*inline_source), nullptr, 1);
    EXPECT_EQ(pooled->layout(), encoder::PcmSource::kLayout);
    const std::vector<int16_t> audio = Tone(rng, static_cast<size_t>(rate * 2), rate);
    for (size_t sent = 0; sent < audio.size();) {
      const size_t n = std::min<size_t>(audio.size() - sent, 50 + rng() % 900);
      std::vector<int16_t> piece(audio.begin() + sent, audio.begin() + sent + n);
      ASSERT_TRUE(direct.Push(piece).ok());
      ASSERT_TRUE(pooled->Push(std::move(piece)).ok());
      sent += n;
    }
    ASSERT_TRUE(pooled->End().ok());
    ASSERT_TRUE(direct.End().ok());
    done.WaitFlushed(*pooled);
    ASSERT_TRUE(pooled->error().ok()) << pooled->error();
    const int64_t frames = direct.NumFramesReady();
    ASSERT_EQ(pooled->NumFramesReady(), frames);
    ASSERT_GT(frames, 150);
    // 67-frame windows every 64 frames, the earlier input dropped first.
    for (int64_t start = 0; start < frames; start += 64) {
      const int64_t count = std::min<int64_t>(67, frames - start);
      const size_t samples = static_cast<size_t>(encoder::PcmSource::WindowSamples(count));
      std::vector<float> got(samples), want(samples);
      pooled->DiscardFramesBefore(start);
      direct.DiscardFramesBefore(start);
      ASSERT_TRUE(pooled->GetFrames(start, count, got.data()).ok()) << "frame " << start;
      ASSERT_TRUE(direct.GetFrames(start, count, want.data()).ok()) << "frame " << start;
      EXPECT_EQ(got, want) << rate << " Hz, frame " << start;
      if (start > 0) {
        EXPECT_EQ(pooled->GetFrames(start - 1, 1, got.data()).code(),
                  absl::StatusCode::kOutOfRange);
      }
    }
  }
}

// Waits (bounded) until `ready` holds.
template <typename Fn>
bool Eventually(const Fn& ready) {
  for (int i = 0; i < 5000 && !ready(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return ready();
}

// Ring mode (the device front end without a staging copy): nothing is
// published before the ring is bound; then the windows read straight from
// the ring, as the device reads them, are the inline source's, the ring
// never holds rows past the first one the owner still reads plus its size,
// and the rest follows as the owner discards -- the whole audio sent before
// binding, as a client far ahead of real time sends it.
TEST(StreamFrontEndTest, RingHoldsTheWindowsTheOwnerReadsAndTheRestFollows) {
  Done done;
  done.calls.assign(1, 0);
  FrontEndPool pool(2, [&](int64_t tag) { done(tag); });
  std::mt19937 rng(31);
  constexpr encoder::RowLayout kRows = encoder::PcmSource::kLayout;
  constexpr int64_t kWindow = 67, kStride = 64;
  const int64_t ring_rows = kRows.WindowRows(kWindow) + kRows.FirstRow(kStride);
  for (int rate : {16000, 8000}) {
    auto ring_source = encoder::PcmSource::Create({rate});
    auto inline_source = encoder::PcmSource::Create({rate});
    ASSERT_TRUE(ring_source.ok() && inline_source.ok());
    auto ringed = std::make_shared<StreamFrontEnd>(std::move(*ring_source), &pool, 0, true);
    StreamFrontEnd direct(std::move(*inline_source), nullptr, 1);
    const std::vector<int16_t> audio = Tone(rng, static_cast<size_t>(rate * 3), rate);
    for (size_t sent = 0; sent < audio.size();) {
      const size_t n = std::min<size_t>(audio.size() - sent, 50 + rng() % 1500);
      std::vector<int16_t> piece(audio.begin() + sent, audio.begin() + sent + n);
      ASSERT_TRUE(direct.Push(piece).ok());
      if (sent % 2 == 0) {
        ringed->PushFromClient(piece);
      } else {
        ASSERT_TRUE(ringed->Push(std::move(piece)).ok());
      }
      sent += n;
    }
    ASSERT_TRUE(ringed->End().ok());
    ASSERT_TRUE(direct.End().ok());
    const int64_t frames = direct.NumFramesReady();
    ASSERT_GT(frames, 4 * kStride);
    // Not bound: nothing published, not flushed.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(ringed->NumFramesReady(), 0);
    EXPECT_FALSE(ringed->flushed());

    // 16-bit samples: the pipeline's rows rounded (exact at 16 kHz, where
    // they are the client's samples).
    std::vector<int16_t> ring(ring_rows * kRows.width, 0);
    ringed->BindRing(ring.data(), ring_rows);
    for (int64_t start = 0; start < frames; start += kStride) {
      const int64_t count = std::min(kWindow, frames - start);
      ASSERT_TRUE(Eventually([&] { return ringed->NumFramesReady() >= start + count; }))
          << rate << " Hz: frame " << start << ", " << ringed->NumFramesReady() << " ready";
      // Never more than the ring's rows past the owner's first row.
      EXPECT_LE(kRows.FirstRow(ringed->NumFramesReady()), kRows.FirstRow(start) + ring_rows);
      const int64_t rows = kRows.WindowRows(count);
      std::vector<float> got(rows * kRows.width), want(rows * kRows.width);
      ASSERT_TRUE(direct.GetFrames(start, count, want.data()).ok());
      std::vector<int16_t> rounded(want.size());
      RoundToPcm16(want.data(), static_cast<int64_t>(want.size()), rounded.data());
      if (rate == 16000) {
        for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(rounded[i], want[i]) << i;
      }
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_LE(std::fabs(rounded[i] - want[i]), 0.5f) << i;
        want[i] = rounded[i];
      }
      const int64_t first = ringed->RingRow(start);
      for (int64_t r = 0; r < rows; ++r) {
        Pcm16ToFloat(ring.data() + ((first + r) % ring_rows) * kRows.width, kRows.width,
                     got.data() + r * kRows.width);
      }
      EXPECT_EQ(got, want) << rate << " Hz, frame " << start;
      std::vector<float> copied(rows * kRows.width);
      ASSERT_TRUE(ringed->GetFrames(start, count, copied.data()).ok());
      EXPECT_EQ(copied, want);
      // The chunk is read: its rows before the next window are free.
      ringed->DiscardFramesBefore(start + kStride);
      EXPECT_EQ(ringed->GetFrames(start, 1, copied.data()).code(), absl::StatusCode::kOutOfRange);
    }
    ASSERT_TRUE(Eventually([&] { return ringed->flushed(); })) << rate << " Hz";
    EXPECT_EQ(ringed->NumFramesReady(), frames);
    EXPECT_TRUE(ringed->error().ok()) << ringed->error();
  }
}

TEST(StreamFrontEndTest, WorkSubmittedWhileHeldRunsOnRelease) {
  constexpr int kStreams = 5;  // More jobs than workers, then fewer.
  Done done;
  done.calls.assign(kStreams, 0);
  FrontEndPool pool(3, [&](int64_t tag) { done(tag); });
  std::mt19937 rng(23);
  for (int jobs : {kStreams, 2}) {
    std::vector<std::shared_ptr<StreamFrontEnd>> pooled;
    std::vector<std::unique_ptr<encoder::FeaturePipeline>> reference;
    pool.Hold();
    for (int i = 0; i < jobs; ++i) {
      pooled.push_back(std::make_shared<StreamFrontEnd>(Pipeline(16000), &pool, i));
      reference.push_back(Pipeline(16000));
      std::vector<int16_t> audio = Tone(rng, 8000, 16000);
      ASSERT_TRUE(reference[i]->AcceptPcm16(audio.data(), 8000).ok());
      ASSERT_TRUE(reference[i]->InputFinished().ok());
      ASSERT_TRUE(pooled[i]->Push(std::move(audio)).ok());
      ASSERT_TRUE(pooled[i]->End().ok());
    }
    // Held: no worker has the work yet.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int i = 0; i < jobs; ++i) {
      EXPECT_EQ(pooled[i]->NumFramesReady(), 0) << "stream " << i;
      EXPECT_FALSE(pooled[i]->flushed()) << "stream " << i;
    }
    pool.Release();
    for (int i = 0; i < jobs; ++i) {
      done.WaitFlushed(*pooled[i]);
      ASSERT_TRUE(pooled[i]->error().ok()) << pooled[i]->error();
      EXPECT_EQ(pooled[i]->NumFramesReady(), reference[i]->NumFramesReady()) << "stream " << i;
    }
  }
}

TEST(StreamFrontEndTest, InlineRunsOnTheCallersThread) {
  std::mt19937 rng(2);
  StreamFrontEnd f(Pipeline(16000), nullptr, 0);
  ASSERT_TRUE(f.Push(Tone(rng, 16000, 16000)).ok());
  const int64_t frames = f.NumFramesReady();  // Published before Push returns.
  EXPECT_GT(frames, 90);                      // 1 s: about 98 frames of 10 ms.
  EXPECT_FALSE(f.flushed());
  ASSERT_TRUE(f.End().ok());
  EXPECT_TRUE(f.flushed());
  EXPECT_GE(f.NumFramesReady(), frames);
}

TEST(StreamFrontEndTest, ClosingWhileAWorkerHoldsTheStreamIsSafe) {
  // One worker, held inside on_done after the stream's first piece: the
  // owner then queues more, closes and lets go while the worker still has
  // the stream and the queue holds it again.
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> calls{0};
  std::weak_ptr<StreamFrontEnd> watch;
  {
    FrontEndPool pool(1, [&](int64_t) {
      if (calls.fetch_add(1) == 0) {
        entered.set_value();
        released.wait();
      }
    });
    std::mt19937 rng(4);
    auto f = std::make_shared<StreamFrontEnd>(Pipeline(8000), &pool, 0);
    watch = f;
    ASSERT_TRUE(f->Push(Tone(rng, 4000, 8000)).ok());
    entered.get_future().wait();
    const int64_t published = f->NumFramesReady();
    EXPECT_GT(published, 0);
    ASSERT_TRUE(f->Push(Tone(rng, 4000, 8000)).ok());
    ASSERT_TRUE(f->End().ok());
    f->Close();
    f.reset();
    EXPECT_FALSE(watch.expired());  // The worker (and the queue) still hold it.
    release.set_value();
    // The pool's destructor joins the worker; whatever it still held is freed.
  }
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(calls.load(), 1);  // Nothing was published after Close.
}

// Audio from the client's thread (PushFromClient) goes through the pipeline
// in order, stamped; once armed, the pool notifies only when the wanted
// frames are published (once), and always at the flush.
TEST(StreamFrontEndTest, ClientPushesNotifyAtTheArmedFramesOnceAndAtTheFlush) {
  Done done;
  done.calls.assign(1, 0);
  FrontEndPool pool(2, [&](int64_t tag) { done(tag); });
  std::mt19937 rng(13);
  constexpr int kRate = 16000;
  auto f = std::make_shared<StreamFrontEnd>(Pipeline(kRate), &pool, 0);
  auto reference = Pipeline(kRate);
  const std::vector<int16_t> audio = Tone(rng, kRate * 2, kRate);
  auto wait_for = [&](auto pred) {
    std::unique_lock<std::mutex> lock(done.mu);
    return done.cv.wait_for(lock, std::chrono::seconds(10), pred);
  };
  auto calls = [&] {
    std::lock_guard<std::mutex> lock(done.mu);
    return done.calls[0];
  };
  // Never armed: every publication notifies.
  const auto before = std::chrono::steady_clock::now();
  f->PushFromClient(std::span<const int16_t>(audio.data(), 1600));  // 100 ms
  ASSERT_TRUE(reference->AcceptPcm16(audio.data(), 1600).ok());
  ASSERT_TRUE(wait_for([&] { return done.calls[0] == 1; }));
  EXPECT_GE(f->published_audio_time(), before);
  EXPECT_LE(f->published_audio_time(), std::chrono::steady_clock::now());
  // Armed 30 frames ahead: 100 ms pieces (10 frames each) publish without
  // notifying until the threshold is crossed, then once.
  const int64_t want = f->NumFramesReady() + 30;
  f->NotifyWhenFrames(want);
  size_t sent = 1600;
  while (f->NumFramesReady() < want + 20) {
    ASSERT_LT(sent + 1600, audio.size());
    f->PushFromClient(std::span<const int16_t>(audio.data() + sent, 1600));
    ASSERT_TRUE(reference->AcceptPcm16(audio.data() + sent, 1600).ok());
    sent += 1600;
    // Wait (polling: no notification is due) until the worker published it.
    const int64_t expect = reference->NumFramesReady();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (f->NumFramesReady() != expect && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(f->NumFramesReady(), expect);
    if (f->NumFramesReady() < want) EXPECT_EQ(calls(), 1) << "notified below the threshold";
  }
  ASSERT_TRUE(wait_for([&] { return done.calls[0] == 2; }));
  EXPECT_EQ(calls(), 2) << "notified more than once for one threshold";
  // The end's flush notifies though nothing was armed since.
  ASSERT_TRUE(f->End().ok());
  ASSERT_TRUE(reference->InputFinished().ok());
  done.WaitFlushed(*f);
  EXPECT_EQ(calls(), 3);
  // In order: the same frames as the inline pipeline.
  const int64_t frames = reference->NumFramesReady();
  ASSERT_EQ(f->NumFramesReady(), frames);
  std::vector<float> got(frames * Fbank::kNumBins), expected(frames * Fbank::kNumBins);
  ASSERT_TRUE(f->GetFrames(0, frames, got.data()).ok());
  ASSERT_TRUE(reference->GetFrames(0, frames, expected.data()).ok());
  EXPECT_EQ(got, expected);
}

// A pipeline that only copies its input (16 kHz PCM for the device front
// end) runs on the client's thread: its rows are published and the owner
// notified before PushFromClient returns, on that thread, and the stream's
// rows come out in order, then the owner's End flushes them. Resampling
// input is not such a pipeline.
TEST(StreamFrontEndTest, CopyingPipelineRunsOnTheClientsThread) {
  auto resampling = encoder::PcmSource::Create({8000});
  ASSERT_TRUE(resampling.ok());
  EXPECT_FALSE((*resampling)->CopiesInput());
  EXPECT_FALSE(Pipeline(16000)->CopiesInput());

  std::mutex mu;
  std::vector<std::thread::id> notified_on;
  FrontEndPool pool(2, [&](int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    notified_on.push_back(std::this_thread::get_id());
  });
  std::mt19937 rng(21);
  constexpr int kRate = 16000;
  auto source = encoder::PcmSource::Create({kRate});
  auto reference = encoder::PcmSource::Create({kRate});
  ASSERT_TRUE(source.ok() && reference.ok());
  ASSERT_TRUE((*source)->CopiesInput());
  auto f = std::make_shared<StreamFrontEnd>(std::move(*source), &pool, 0);
  const std::vector<int16_t> audio = Tone(rng, kRate * 2, kRate);
  constexpr size_t kPiece = 1600;  // 100 ms.
  const size_t half = audio.size() / 2 / kPiece * kPiece;
  for (size_t sent = 0; sent < half; sent += kPiece) {
    f->PushFromClient(std::span<const int16_t>(audio.data() + sent, kPiece));
    ASSERT_TRUE((*reference)->AcceptPcm16(audio.data() + sent, kPiece).ok());
    // Published before the return: no worker involved.
    EXPECT_EQ(f->NumFramesReady(), f->layout().FramesIn((*reference)->NumRowsReady()));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_FALSE(notified_on.empty());
    for (std::thread::id id : notified_on) EXPECT_EQ(id, std::this_thread::get_id());
  }
  // The rest from another client thread (a stream's reads move between
  // threads), then the owner's End: nothing lost or reordered.
  std::thread client([&] {
    for (size_t sent = half; sent + kPiece <= audio.size(); sent += kPiece) {
      f->PushFromClient(std::span<const int16_t>(audio.data() + sent, kPiece));
    }
  });
  client.join();
  ASSERT_TRUE(f->End().ok());
  for (size_t sent = half; sent + kPiece <= audio.size(); sent += kPiece) {
    ASSERT_TRUE((*reference)->AcceptPcm16(audio.data() + sent, kPiece).ok());
  }
  ASSERT_TRUE((*reference)->InputFinished().ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!f->flushed() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(f->flushed());
  const int64_t rows = (*reference)->NumRowsReady();
  const int64_t frames = f->layout().FramesIn(rows);
  ASSERT_EQ(f->NumFramesReady(), frames);
  std::vector<float> got(f->layout().WindowRows(frames) * f->layout().width);
  std::vector<float> expected(got.size());
  ASSERT_TRUE(f->GetFrames(0, frames, got.data()).ok());
  ASSERT_TRUE((*reference)->GetRows(0, f->layout().WindowRows(frames), expected.data()).ok());
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace oasr::scheduler
