#include "examples/train/local_cluster.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "examples/cluster/child_process.hpp"
#include "examples/cluster/status.hpp"
#include "examples/train/token_file.hpp"
#include "examples/train/trace_replay.hpp"
#include "model/checkpoint.hpp"

namespace bamboo::app {

namespace {

// The first SIGINT or SIGTERM is passed on to the manager (it stops after the
// step in flight, with a checkpoint); a second one ends everything at once.
volatile sig_atomic_t interrupted = 0, interrupts = 0;
extern "C" void on_interrupt(int sig) {
  interrupted = sig;
  interrupts = interrupts + 1;
}
// How long a stopping manager gets: the step in flight (10 s at most), the
// checkpoint's files and the workers' leave.
constexpr std::chrono::seconds stop_grace{30};

// Whole lines from a descriptor, as they come.
class line_reader {
public:
  explicit line_reader(int fd) : fd_(fd) {}
  int fd() const { return fd_; }
  template <class F>
  void drain(F&& on_line) {
    char buf[4096];
    const ssize_t n = read(fd_, buf, sizeof(buf));
    if (n > 0)
      pending_.append(buf, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
      on_line(pending_.substr(0, nl + 1));
      pending_.erase(0, nl + 1);
    }
  }
  const std::string& rest() const { return pending_; }

private:
  int fd_;
  std::string pending_;
};

struct pipe_pair {
  int read = -1, write = -1;
  pipe_pair() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) == 0) {
      read = fds[0];
      write = fds[1];
    }
  }
  ~pipe_pair() {
    for (int fd : {read, write})
      if (fd >= 0)
        close(fd);
  }
};

// Committed samples over wall time, from the status channel: the run's goodput,
// next to the rate of its undisturbed steps (the median interval between
// consecutive commits, so the few steps a loss or re-plan slowed hardly count).
class goodput_meter {
public:
  using time_point = std::chrono::steady_clock::time_point;
  void started(time_point t) {
    if (!started_) {
      start_ = t;
      started_ = true;
    }
    last_ = t;
    last_step_ = -1;
  }
  void committed(long step, time_point t) {
    if (first_step_ < 0)
      first_step_ = step;
    if (last_step_ >= 0 && step == last_step_ + 1)
      intervals_.push_back(std::chrono::duration<double>(t - last_).count());
    last_step_ = step;
    top_step_ = std::max(top_step_, step);
    last_ = end_ = t;
  }
  void rolled_back(time_point t) {
    last_ = t;
    last_step_ = -1;
  }
  // "goodput 41.2 samples/s over 62.3 s, 0.871 of the undisturbed rate (median
  // step interval 0.171 s)", or empty before any commit.
  std::string summary(int global_batch) const {
    if (first_step_ < 0 || intervals_.size() < 5 || global_batch <= 0)
      return {};
    auto iv = intervals_;
    std::nth_element(iv.begin(), iv.begin() + iv.size() / 2, iv.end());
    const double median = iv[iv.size() / 2];
    const double wall = std::chrono::duration<double>(end_ - start_).count();
    const double samples =
        static_cast<double>(top_step_ + 1 - first_step_) * global_batch;
    const double goodput = wall > 0 ? samples / wall : 0;
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "goodput %.1f samples/s over %.1f s, %.3f of the undisturbed rate "
                  "(median step interval %.3f s)",
                  goodput, wall, median > 0 ? goodput / (global_batch / median) : 0,
                  median);
    return buf;
  }

private:
  bool started_ = false;
  time_point start_, last_, end_;
  long first_step_ = -1, last_step_ = -1, top_step_ = -1;
  std::vector<double> intervals_;
};

// How long a manager may outlive all its workers before it counts as stopped,
// and how long the workers of a lost manager get to notice and say so.
constexpr std::chrono::seconds manager_grace{3};
constexpr std::chrono::seconds worker_grace{10};

} // namespace

int run_local_cluster(const local_cluster_options& lo) {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // Every child writes its output into one pipe (short lines arrive whole),
  // relayed to our stdout; its events into another (status.hpp).
  pipe_pair out, events;
  if (out.read < 0 || events.read < 0) {
    std::perror("bamboo-train: pipe");
    return 1;
  }
  auto tokens = run_tokens(lo.token_file, lo.operator_token_file);
  if (!tokens)
    return 2;
  const token_file& token = *tokens;
  const std::vector<std::pair<std::string, std::string>> env{
      {status::fd_variable, std::to_string(events.write)}};
  auto start = [&](std::vector<std::string> args) {
    proc::child_options o;
    o.args = std::move(args);
    o.env = env;
    o.stdout_fd = out.write;
    o.pass_fds = {events.write};
    return std::make_unique<proc::child>(std::move(o));
  };
  auto relay = [](const std::string& line) {
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  };
  line_reader out_lines(out.read), event_lines(events.read);
  const std::string dir = proc::program_dir();
  const auto& kills = lo.kills;
  std::vector<bool> fired(kills.size(), false); // once each, restarts or not
  goodput_meter meter;
  using clock = std::chrono::steady_clock;
  std::vector<bool> joined(lo.joins.size(), false);
  int code = -1; // the manager's exit status; -1 while it runs
  for (int attempt = 0;; ++attempt) {
    auto margs = lo.manager_program.empty()
                     ? std::vector<std::string>{dir + "/bamboo-manager"}
                     : lo.manager_program;
    margs.insert(margs.end(), {"--port", "0", "--token-file", token.path(),
                               "--operator-token-file", token.operator_path()});
    if (!token.user_given())
      margs.emplace_back("--unkeyed-checkpoints");
    margs.insert(margs.end(), lo.manager_args.begin(), lo.manager_args.end());
    for (std::size_t i = 0; i < kills.size(); ++i) // the manager calls them preemptions
      if (!fired[i])
        margs.insert(margs.end(),
                     {"--announced-kill", "node=" + std::to_string(kills[i].node) +
                                              "@step=" + std::to_string(kills[i].step)});
    if (attempt > 0 && !lo.resume && has_complete_checkpoint(lo.checkpoint_dir))
      margs.emplace_back("--resume");
    auto manager = start(margs);
    std::vector<std::unique_ptr<proc::child>> workers;
    std::map<long, pid_t> pid_of_node;
    // Kills for step k fire as it begins: when step k-1 committed (or the run
    // started), or during it if the node's pid comes later (lines from different
    // processes race in the pipe).
    long begun = -1; // the step under way, -1 before the run starts
    long port = -1;  // the manager's, once it listens
    std::vector<std::chrono::steady_clock::time_point> replacements; // when due
    auto start_worker = [&] {
      auto wargs = lo.worker_program.empty()
                       ? std::vector<std::string>{dir + "/bamboo-worker"}
                       : lo.worker_program;
      wargs.insert(wargs.end(),
                   {"--manager", "127.0.0.1:" + std::to_string(port), "--token-file",
                    token.path(), "--log-level", lo.log_level});
      if (!lo.zones.empty())
        wargs.insert(wargs.end(), {"--zone", lo.zones[workers.size() % lo.zones.size()]});
      wargs.insert(wargs.end(), lo.worker_tls.begin(), lo.worker_tls.end());
      workers.push_back(start(wargs));
      return workers.back().get();
    };
    // The trace's instances: slot -> its worker; kills due after a notice.
    std::map<int, proc::child*> slot_worker;
    std::vector<std::pair<clock::time_point, proc::child*>> notice_kills;
    std::optional<clock::time_point> replay_start;
    auto replay = [&](clock::time_point now) {
      if (!lo.trace || !replay_start)
        return;
      for (const auto& a : lo.trace->due(now - *replay_start)) {
        const double at_s = static_cast<double>(a.trace_ms) / 1e3;
        if (a.start) {
          slot_worker[a.slot] = start_worker();
          std::printf("bamboo-train: trace t=%.0f s: %s added, a new worker (slot %d)\n",
                      at_s, a.instance.c_str(), a.slot);
        } else if (auto* w = slot_worker[a.slot]) {
          const bool notice = lo.notice.count() > 0;
          std::string node = "not joined";
          for (const auto& [member, pid] : pid_of_node)
            if (pid == w->pid())
              node = "node " + std::to_string(member);
          std::printf("bamboo-train: trace t=%.0f s: %s removed, %s of its worker (%s, "
                      "pid %d)\n",
                      at_s, a.instance.c_str(), notice ? "SIGTERM" : "kill -9",
                      node.c_str(), static_cast<int>(w->pid()));
          w->signal(notice ? SIGTERM : SIGKILL);
          if (notice)
            notice_kills.push_back({now + lo.notice, w});
          slot_worker[a.slot] = nullptr;
        }
        std::fflush(stdout);
      }
      for (auto it = notice_kills.begin(); it != notice_kills.end();)
        if (now >= it->first) {
          it->second->signal(SIGKILL);
          it = notice_kills.erase(it);
        } else {
          ++it;
        }
    };
    auto fire = [&](long step) {
      for (std::size_t i = 0; i < lo.joins.size(); ++i)
        if (!joined[i] && lo.joins[i].step <= step) {
          joined[i] = true;
          std::printf("bamboo-train: %d new worker(s) start in step %ld\n",
                      lo.joins[i].count, step);
          std::fflush(stdout);
          for (int n = 0; n < lo.joins[i].count; ++n)
            start_worker();
        }
      for (std::size_t i = 0; i < kills.size(); ++i)
        if (!fired[i] && kills[i].step == step && pid_of_node.count(kills[i].node)) {
          fired[i] = true;
          const pid_t pid = pid_of_node[kills[i].node];
          std::printf("bamboo-train: kill -9 of node %d (pid %d) in step %ld\n",
                      kills[i].node, static_cast<int>(pid), step);
          std::fflush(stdout);
          for (auto& w : workers)
            if (w->pid() == pid)
              w->signal(SIGKILL);
          if (lo.replace_after.count() >= 0)
            replacements.push_back(std::chrono::steady_clock::now() + lo.replace_after);
        }
    };
    bool silenced = false; // a worker of this attempt left on the manager's silence
    auto on_event = [&](const std::string& line) {
      auto e = status::parse(line);
      if (!e)
        return;
      if (e->kind == "listening" && workers.empty()) {
        std::printf(
            "bamboo-train: bamboo-manager (pid %d) listens on port %ld; watch it "
            "with: bamboo-inspect --token-file %s --watch 127.0.0.1:%ld (commands "
            "need --operator-token-file %s)\n",
            static_cast<int>(manager->pid()), e->values[0], token.path().c_str(),
            e->values[0], token.operator_path().c_str());
        std::fflush(stdout);
        port = e->values[0];
        // With zones, one at a time: worker i joins as node i, in zone i.
        for (int n = 0; n < (lo.zones.empty() ? lo.workers : 1); ++n)
          slot_worker[n] = start_worker();
      } else if (e->kind == "orphaned") {
        silenced = true; // the manager was stopped or cut off: as good as lost
      } else if (e->kind == "joined") {
        pid_of_node[e->values[0]] = static_cast<pid_t>(e->values[1]);
        const int started = static_cast<int>(workers.size());
        if (!lo.zones.empty() && started < lo.workers &&
            static_cast<int>(pid_of_node.size()) == started)
          slot_worker[started] = start_worker();
      } else if (e->kind == "started") {
        begun = 0;
        replay_start = clock::now();
        meter.started(*replay_start);
      } else if (e->kind == "committed") {
        begun = e->values[0] + 1;
        meter.committed(e->values[0], clock::now());
      } else if (e->kind == "rollback") {
        meter.rolled_back(clock::now());
      }
      if (begun >= 0)
        fire(begun);
    };
    // A manager that is stopped (not dead) shows in its workers: they all
    // leave when its heartbeats stop. It is then as good as lost.
    bool orphaned = false; // since orphaned_at
    std::chrono::steady_clock::time_point orphaned_at;
    bool unresponsive = false;
    code = -1;
    std::optional<clock::time_point> stopping; // since the signal was passed on
    for (;;) {
      if (interrupted && !stopping) {
        stopping = clock::now();
        std::printf("bamboo-train: signal %d: bamboo-manager stops after the step in "
                    "flight (a second signal ends every process at once)\n",
                    static_cast<int>(interrupted));
        std::fflush(stdout);
        manager->signal(SIGTERM);
      }
      if (interrupts >= 2 || (stopping && clock::now() - *stopping > stop_grace))
        break; // the manager is killed below
      if (auto st = manager->poll()) {
        code = *st;
        break;
      }
      if (stopping) { // no more faults nor workers: drain the output
        pollfd pfds[2] = {{out.read, POLLIN, 0}, {events.read, POLLIN, 0}};
        if (poll(pfds, 2, 50) > 0) {
          if (pfds[0].revents & POLLIN)
            out_lines.drain(relay);
          if (pfds[1].revents & POLLIN)
            event_lines.drain([](const std::string&) {});
        }
        continue;
      }
      replay(std::chrono::steady_clock::now());
      for (auto it = replacements.begin(); it != replacements.end();)
        if (std::chrono::steady_clock::now() >= *it) {
          std::printf("bamboo-train: a replacement worker starts\n");
          std::fflush(stdout);
          start_worker();
          it = replacements.erase(it);
        } else {
          ++it;
        }
      if (!workers.empty()) {
        bool all_gone = true;
        for (auto& w : workers)
          all_gone = all_gone && w->poll().has_value();
        const auto now = std::chrono::steady_clock::now();
        if (!all_gone) {
          orphaned = false;
        } else if (!orphaned) {
          orphaned = true;
          orphaned_at = now;
        } else if (now - orphaned_at > manager_grace) {
          std::printf("bamboo-train: every worker left and bamboo-manager (pid %d) "
                      "still runs: it is unresponsive, kill -9\n",
                      static_cast<int>(manager->pid()));
          std::fflush(stdout);
          manager->kill_group();
          unresponsive = true;
        }
      }
      pollfd pfds[2] = {{out.read, POLLIN, 0}, {events.read, POLLIN, 0}};
      if (poll(pfds, 2, 50) <= 0)
        continue;
      if (pfds[0].revents & POLLIN)
        out_lines.drain(relay);
      if (pfds[1].revents & POLLIN)
        event_lines.drain(on_event);
    }
    manager.reset(); // killed and reaped if still running (interrupted)
    // Workers of a lost manager notice on their own (a dropped connection,
    // missed heartbeats) and say so; what is left after that goes.
    const auto deadline = std::chrono::steady_clock::now() + worker_grace;
    for (auto& w : workers)
      w->wait(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::max(deadline - std::chrono::steady_clock::now(),
                   std::chrono::steady_clock::duration::zero())));
    workers.clear();
    for (pollfd pfd{out.read, POLLIN, 0}; poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN);)
      out_lines.drain(relay);
    // A manager that every worker left, or that any worker left on its silence
    // (it was stopped, or cut off), is as good as lost even if it came back and
    // ended the run itself: restarted too (workers that joined meanwhile do not
    // hide it).
    const bool lost =
        unresponsive || code >= 128 || ((orphaned || silenced) && code != 0);
    if (interrupted || !lost || attempt >= lo.restarts)
      break;
    std::printf("bamboo-train: bamboo-manager lost (%s); restart %d of %d, from %s\n",
                unresponsive ? "unresponsive"
                             : ("status " + std::to_string(code)).c_str(),
                attempt + 1, lo.restarts,
                has_complete_checkpoint(lo.checkpoint_dir) ? "the newest checkpoint"
                                                           : "the start (no checkpoint)");
    std::fflush(stdout);
  }
  std::fputs(out_lines.rest().c_str(), stdout);
  if (lo.trace)
    std::printf("bamboo-train: trace replay: %d instance(s) removed and %d added on "
                "workers, %d event(s) left out (beyond the worker slots); trace time "
                "%.0f of %.0f s replayed; %s\n",
                lo.trace->removals(), lo.trace->starts(), lo.trace->left_out(),
                static_cast<double>(lo.trace->replayed_ms()) / 1e3,
                static_cast<double>(lo.trace->trace_ms()) / 1e3,
                meter.summary(lo.global_batch).c_str());
  else if (auto g = meter.summary(lo.global_batch); !g.empty())
    std::printf("bamboo-train: %s\n", g.c_str());
  // A signal the manager got after its last step leaves a complete run: 0.
  if (interrupted && code != 0)
    return 128 + interrupted;
  return code < 0 ? 1 : code;
}

} // namespace bamboo::app
