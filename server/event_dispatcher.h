// Where the calls handle the engine's events: a small fixed pool of threads
// owned by the server, so the engine's scheduler thread never takes a call's
// lock nor builds a protobuf (issue #15).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace oasr::server {

// Runs posted tasks on its threads. A task is queued at most once at a time
// and runs on one thread at a time: a Post while it is queued only counts,
// and a Post while it runs makes it run once more afterwards (at the back of
// the queue, so a busy call cannot keep a thread to itself). So a call whose
// handling is slow holds at most one of the threads, whatever its engine
// stream keeps producing, and a burst of events costs one run.
//
// Why a pool of our own rather than gRPC's callback executor (a grpc::Alarm
// set to fire at once): an Alarm costs a timer insertion and an allocation
// per wake-up inside gRPC, and its callback would run beside every reaction
// of every call on gRPC's threads, where a call whose lock is briefly held
// would hold up gRPC's own work; here it holds up one of our threads, and
// the queue is intrusive, so posting allocates nothing.
//
// Thread-safe. Destroying the dispatcher runs what is queued, then joins its
// threads; nothing may Post after that starts.
class EventDispatcher {
 public:
  // What the dispatcher runs. Derive from it and Post a shared_ptr to it;
  // the dispatcher holds a reference while the task is queued or running,
  // so a task outlives its owner as long as it has work.
  class Task {
   public:
    Task() = default;
    Task(const Task&) = delete;
    Task& operator=(const Task&) = delete;
    virtual ~Task() = default;

   protected:
    // Runs on a dispatcher thread, never on two at once; starts after every
    // Post of this task (one run may answer many Posts). Must not block for
    // long: it holds one of the dispatcher's threads.
    virtual void Run() = 0;

   private:
    friend class EventDispatcher;
    // Posts not yet answered by a run; nonzero while queued or running.
    std::atomic<uint64_t> posts_{0};
    // The intrusive queue (guarded by the dispatcher's mutex): the next task,
    // and the reference that keeps this one alive while it is queued.
    Task* next_ = nullptr;
    std::shared_ptr<Task> queued_self_;
    int64_t queued_at_ns_ = 0;  // When it was queued (steady clock), for on_run.
  };

  // Starts `threads` (at least 1) threads. `on_run(wait_ns, run_ns)`, when
  // given, is called after each run with how long the task waited in the
  // queue and how long it ran (the server's per-stage figures).
  explicit EventDispatcher(int threads,
                           std::function<void(int64_t wait_ns, int64_t run_ns)> on_run = {});
  ~EventDispatcher();
  EventDispatcher(const EventDispatcher&) = delete;
  EventDispatcher& operator=(const EventDispatcher&) = delete;

  // Makes sure task->Run() starts after this call. Non-blocking: an atomic
  // increment, and when the task is idle a few pointer writes under the
  // queue's own mutex and a wake-up; never allocates, never runs the task
  // inline. `task` must not be null. Any thread (the engine's scheduler
  // thread calls it from a stream's notify).
  void Post(const std::shared_ptr<Task>& task);

  // The size the server uses: the work per event is microseconds (build a
  // response, start a write), so a few threads serve thousands of streams;
  // at least two, so one call whose lock is busy (a reaction of its own, or
  // a slow task) does not delay the others; at most four, so wake-ups do not
  // compete with the engine for cores.
  static int DefaultThreads();

  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  // Appends `task` (posts_ already nonzero); takes the reference.
  void Enqueue(std::shared_ptr<Task> task);
  void Work();

  const std::function<void(int64_t, int64_t)> on_run_;
  std::mutex mu_;
  std::condition_variable cv_;
  Task* head_ = nullptr;  // Oldest queued task.
  Task* tail_ = nullptr;
  int idle_ = 0;  // Threads waiting on cv_ (only they need a wake-up).
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace oasr::server
