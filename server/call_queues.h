// The completion queues the streaming calls run on (gRPC's async API): a
// few queues, each polled by one thread of its own that also runs the
// calls' reactions, so a message is read, decoded and pushed to the engine
// on the thread that polled it, with no hand-off between threads. gRPC 1.51's
// callback API instead has cores/2 threads share one queue and hand each
// event on, which cost ~60 us per message, mostly in task switches
// (bench/results/load/grpc-h200.md).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace oasr::server {

// What a completion queue's tag points at: an operation of a call. Proceed
// runs on the queue's thread with the operation's result.
class CallTag {
 public:
  virtual ~CallTag() = default;
  virtual void Proceed(bool ok) = 0;
};

// Owns the queues and their threads. Lifecycle: construct with the builder
// before BuildAndStart (the queues are the builder's), Start after it,
// Stop after grpc::Server::Shutdown. Thread-safe after Start.
class CallQueues {
 public:
  // Adds `threads` (at least 1) completion queues to `builder`.
  CallQueues(grpc::ServerBuilder* builder, int threads);
  ~CallQueues();
  CallQueues(const CallQueues&) = delete;
  CallQueues& operator=(const CallQueues&) = delete;

  // Starts one thread per queue (named oasr-grpc-N), after `arm(queue)` has
  // posted the first call requests on every queue.
  void Start(const std::function<void(grpc::ServerCompletionQueue*)>& arm);

  // After the server's Shutdown (which fails every pending request and
  // cancels every call): waits until the last call is gone, then shuts the
  // queues down, drains them and joins the threads. Idempotent.
  void Stop();

  // A call's lifetime, for Stop: Enter when a call object (or a pending
  // request for one) is made, Leave when it is deleted.
  void Enter() { live_.fetch_add(1, std::memory_order_relaxed); }
  void Leave() { live_.fetch_sub(1, std::memory_order_acq_rel); }
  int64_t live() const { return live_.load(std::memory_order_acquire); }

  // Runs `post` (which posts a request for the next call on a queue) unless
  // the queues are stopping; returns whether it ran. A request may not be
  // posted on a queue that is shut down.
  bool PostIfRunning(const std::function<void()>& post);

  int threads() const { return static_cast<int>(queues_.size()); }

  // The size the server uses: five eighths of the hardware threads (the
  // rest run the engine, its front end and decoding), at least 2, at most 32.
  static int DefaultThreads();

 private:
  void Poll(int index);

  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  std::atomic<int64_t> live_{0};
  std::mutex mu_;  // Guards stopping_ against posts.
  bool stopping_ = false;
  bool stopped_ = false;
};

}  // namespace oasr::server
