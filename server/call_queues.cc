#include "server/call_queues.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "common/check.h"
#include "common/thread_name.h"
#include "spdlog/spdlog.h"

namespace oasr::server {
namespace {

// How long Stop waits for the cancelled calls to go before it shuts the
// queues down anyway (they are cancelled, so this is a backstop).
constexpr std::chrono::seconds kMaxCallDrain{10};

// Runs each of the queue's operations until it is shut down and empty.
void Drain(grpc::ServerCompletionQueue* queue) {
  void* tag = nullptr;
  bool ok = false;
  while (queue->Next(&tag, &ok)) static_cast<CallTag*>(tag)->Proceed(ok);
}

}  // namespace

CallQueues::CallQueues(grpc::ServerBuilder* builder, int threads) {
  OASR_CHECK(threads >= 1, "CallQueues needs at least one queue");
  for (int i = 0; i < threads; ++i) queues_.push_back(builder->AddCompletionQueue());
}

CallQueues::~CallQueues() { Stop(); }

int CallQueues::DefaultThreads() {
  // Five eighths of the hardware threads: each of them reads, decodes and
  // pushes messages and takes gRPC's completions, and at tens of thousands
  // of streams they are the busiest threads of the server (on a 16-core
  // H200 box 20,000 streams of 100 ms messages held with 10, not with 6:
  // bench/results/load/grpc-h200.md). A thread waiting on its queue costs
  // nothing.
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()) * 5 / 8, 2, 32);
}

void CallQueues::Start(const std::function<void(grpc::ServerCompletionQueue*)>& arm) {
  for (auto& queue : queues_) arm(queue.get());
  for (int i = 0; i < static_cast<int>(queues_.size()); ++i) {
    threads_.emplace_back([this, i] { Poll(i); });
  }
}

void CallQueues::Poll(int index) {
  const std::string name = "oasr-grpc-" + std::to_string(index);
  SetThreadName(name.c_str());
  Drain(queues_[index].get());
}

bool CallQueues::PostIfRunning(const std::function<void()>& post) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  post();
  return true;
}

void CallQueues::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  // The server is shut down: pending requests fail and calls are cancelled,
  // and each goes once its last operation is back. An operation may not
  // start on a queue that is shut down, so the queues wait for them.
  if (!threads_.empty()) {
    const auto deadline = std::chrono::steady_clock::now() + kMaxCallDrain;
    while (live() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (live() > 0) spdlog::warn("{} streaming calls still open at shutdown", live());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  for (auto& queue : queues_) queue->Shutdown();
  for (std::thread& thread : threads_) thread.join();
  // Without threads (Start never ran) the queues still have to be drained.
  if (threads_.empty()) {
    for (auto& queue : queues_) Drain(queue.get());
  }
  threads_.clear();
}

}  // namespace oasr::server
