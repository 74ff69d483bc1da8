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

  // Posts made on one thread, handed to the dispatcher together by Flush:
  // one lock of the queue and at most one wake-up per idle thread for the
  // whole batch, where Post takes the lock and may wake a thread (a futex
  // call) each time. The engine's scheduler thread posts a cohort's events
  // through one (the streams' notify) and flushes after each batch of them
  // (EngineConfig::after_notify), so it no longer waits on the dispatcher's
  // threads once per event. Not thread-safe: one thread Posts and Flushes;
  // the dispatcher must outlive it, and a task posted here starts only after
  // the next Flush.
  class Batch {
   public:
    explicit Batch(EventDispatcher* dispatcher) : dispatcher_(dispatcher) {}
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;

    // EventDispatcher::Post, but an idle task is queued at the next Flush.
    void Post(const std::shared_ptr<Task>& task);
    // Queues what was posted since the last Flush. Cheap when nothing was.
    void Flush();

   private:
    EventDispatcher* const dispatcher_;
    std::vector<std::shared_ptr<Task>> pending_;  // Idle when posted; in order.
  };

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
  // Appends every task of `tasks` in order (each one's posts_ nonzero, its
  // queued_at_ns_ set), taking the references; empties `tasks`.
  void EnqueueAll(std::vector<std::shared_ptr<Task>>& tasks);
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
