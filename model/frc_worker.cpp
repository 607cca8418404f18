#include "model/frc_worker.hpp"

#include <chrono>
#include <exception>

#include <ATen/Parallel.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log/log.hpp"

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace bamboo {

namespace {

bool set_policy(int tid, int policy) {
  sched_param param{};
  return sched_setscheduler(tid, policy, &param) == 0;
}

} // namespace

frc_worker::frc_worker(int threads) : threads_(threads) {
  std::unique_lock<std::mutex> lk(mu_);
  thread_ = std::thread([this] { loop(); });
  cv_.wait(lk, [this] { return tid_ != 0; });
}

frc_worker::~frc_worker() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    queue_.clear();
  }
  stop_task_ = true; // a task still running gives up at its next check
  cv_.notify_all();
  set_idle_priority(false); // and must not starve the join
  thread_.join();
}

void frc_worker::submit(int micro_batch, task t) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.emplace_back(micro_batch, std::move(t));
  }
  cv_.notify_all();
}

void frc_worker::set_idle_priority(bool idle) {
  // Lowering is always allowed; raising back from SCHED_IDLE needs RLIMIT_NICE
  // or root. Checked once at start: without it the worker stays at normal
  // priority (FRC then competes with the stages, as when it ran inline).
  static const bool can_raise = [] {
    const int tid = static_cast<int>(::syscall(SYS_gettid));
    const bool ok = set_policy(tid, SCHED_IDLE) && set_policy(tid, SCHED_OTHER);
    if (!ok)
      log::get("bamboo.stage")
          ->warn("FRC runs at normal priority: this process may not raise a thread "
                 "back from SCHED_IDLE (RLIMIT_NICE)");
    return ok;
  }();
  if (can_raise)
    set_policy(tid_, idle ? SCHED_IDLE : SCHED_OTHER);
}

void frc_worker::loop() {
  at::set_num_threads(threads_);
  if (openblas_set_num_threads)
    openblas_set_num_threads(threads_);
  {
    std::lock_guard<std::mutex> lk(mu_);
    tid_ = static_cast<int>(::syscall(SYS_gettid));
  }
  cv_.notify_all();
  set_idle_priority(true);
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    if (stop_)
      return;
    auto [micro_batch, work] = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    bool finished = false;
    const auto error = run_task(work, finished);
    lk.lock();
    busy_ = false;
    note(micro_batch, finished, error);
    cv_.notify_all();
  }
}

std::string frc_worker::run_task(const task& work, bool& finished) {
  try {
    finished = work(stop_task_);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

void frc_worker::note(int micro_batch, bool finished, const std::string& error) {
  if (error.empty() && finished)
    record_.done.push_back(micro_batch);
  else if (error.empty())
    ++record_.stopped;
  else if (record_.error.empty())
    record_.error = "FRC of micro-batch " + std::to_string(micro_batch) + ": " + error;
}

frc_worker::settled frc_worker::settle(bool finish) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lk(mu_);
  if (!finish) {
    record_.dropped += static_cast<int>(queue_.size());
    queue_.clear();
    stop_task_ = true;
  }
  const bool waiting = busy_ || !queue_.empty();
  if (waiting) {
    // The spill runs on two threads, the worker raised to normal priority and
    // the caller: at the step's end the other stages are often done, so the
    // cores they leave are there to take it.
    set_idle_priority(false);
    while (!queue_.empty()) {
      auto [micro_batch, work] = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      bool finished = false;
      const auto error = run_task(work, finished);
      lk.lock();
      note(micro_batch, finished, error);
    }
    cv_.wait(lk, [this] { return !busy_ && queue_.empty(); });
    set_idle_priority(true);
  }
  stop_task_ = false;
  settled out = std::move(record_);
  record_ = settled{};
  if (waiting)
    out.spill_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

} // namespace bamboo
