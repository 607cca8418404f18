// Forward redundant computation (FRC) off the stage's own thread. FRC is only
// ever used if the successor dies, so it must not delay the stage: it runs on a
// thread of its own at SCHED_IDLE, which Linux gives only core time no other
// thread wants (the 1F1B bubbles, the waits on peers, on whichever core they
// fall). At the end of the step the stage settles it: the thread is raised to
// normal priority, and what is still queued (the spill: FRC that did not fit
// the idle time) is either finished, by the worker and the caller together,
// or dropped (stage_executor::run says when). Dropping also stops the task
// that runs: it is told to stop and gives up at its next check (between
// layers, and inside a transformer block), so a completed step waits for a few
// ms of FRC, not for a whole forward that would never be used.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace bamboo {

class frc_worker {
public:
  // Returns whether it ran to its end; false: it saw `stop` set and gave up.
  using task = std::function<bool(const std::atomic<bool>& stop)>;

  struct settled {
    std::vector<int> done;    // micro-batches whose FRC ran, in the order they ran
    int dropped = 0;          // queued and not begun (settle without finish)
    int stopped = 0;          // begun, then stopped (settle without finish)
    double spill_seconds = 0; // the caller's time in settle
    std::string error;        // a task threw (LibTorch): its message
  };

  // `threads`: LibTorch's and OpenBLAS's threads for the worker (the stage's).
  explicit frc_worker(int threads);
  ~frc_worker();
  frc_worker(const frc_worker&) = delete;
  frc_worker& operator=(const frc_worker&) = delete;

  // Queues FRC of `micro_batch`: one task at a time in submission order while
  // the step runs; tasks must allow two at once (settle runs the spill so).
  void submit(int micro_batch, task t);
  // Returns once no task runs. finish: the queued tasks run first, on the
  // worker at normal priority and on the calling thread; else they are dropped. Either
  // way the worker goes back to idle priority for the next step.
  settled settle(bool finish);

private:
  void loop();
  // "" or what it threw; `finished` says whether it ran to its end.
  std::string run_task(const task& work, bool& finished);
  void note(int micro_batch, bool finished, const std::string& error); // under mu_
  void set_idle_priority(bool idle);

  int threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int, task>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::atomic<bool> stop_task_{false}; // settle without finish: the running task gives up
  settled record_;
  int tid_ = 0; // the worker's kernel thread id, for its priority
  std::thread thread_;
};

} // namespace bamboo
