// What the multi-process training tests share: a local cluster of processes
// (bamboo-train --processes) in a scratch directory, the embedded fault-free
// reference it must equal bit for bit, and readers of its metrics and state
// digests. Include it after LibTorch's headers (their glog macros would
// replace Catch's CHECK otherwise).
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "tests/examples/child_process.hpp"

namespace bamboo::test {

// GPT, 4 blocks of d_model 64, S=4, G=8 m=2, 16 steps, one thread.
train_config small_gpt(std::uint64_t seed);

// The embedded fault-free run: its losses, and a digest of every final tensor
// (parameters, both AdamW moments, step counters) by name.
struct reference {
  std::vector<double> losses;
  std::map<std::string, std::string> digests;
};

reference embedded_reference(const train_config& cfg);

struct metrics_rows {
  std::vector<long> steps;
  std::vector<double> losses;
  std::vector<long> generations;
  std::vector<std::string> events;
  // A step redone after a rollback has two rows: the last one stands.
  metrics_rows standing() const {
    std::map<long, std::size_t> last;
    for (std::size_t i = 0; i < steps.size(); ++i)
      last[steps[i]] = i;
    metrics_rows out;
    for (auto [k, i] : last) {
      out.steps.push_back(k);
      out.losses.push_back(losses[i]);
      out.generations.push_back(generations[i]);
      out.events.push_back(events[i]);
    }
    return out;
  }
};

// The metrics CSV (losses printed with 17 digits: they read back exactly).
metrics_rows read_metrics(const std::string& path);

// Every step's loss equals the embedded run's, bit for bit.
void check_losses(const metrics_rows& m, const reference& ref);

// The --state-digests file of a process run: every owner's final tensor equals
// the embedded run's, and every live shadow (some are left unless a run loses
// them all) equals its owner, bit for bit.
// A run re-planned to fewer stages has other per-stage step counters
// ("stage1#steps"): `same_stages` false leaves those out.
void check_state(const std::string& path, const reference& ref, bool shadows_left = true,
                 bool same_stages = true);

// A local cluster of processes training `cfg`, in a scratch directory of its own.
struct process_run {
  scratch_dir dir;
  std::string metrics, digests;
  child proc;
  process_run(const train_config& c, const std::string& name,
              std::vector<std::string> extra = {})
      : metrics(dir.file(name + ".csv")), digests(dir.file(name + "_digests.csv")),
        proc(dir, name, args(c, metrics, digests, std::move(extra)), test_token) {}

  static std::vector<std::string> args(const train_config& c, const std::string& metrics,
                                       const std::string& digests,
                                       std::vector<std::string> extra) {
    std::vector<std::string> a{BAMBOO_TRAIN_BIN,  "--processes",
                               "--stages",        std::to_string(c.stages),
                               "--layers",        std::to_string(c.model.layers),
                               "--d-model",       std::to_string(c.model.d_model),
                               "--heads",         std::to_string(c.model.heads),
                               "--seq-len",       std::to_string(c.model.seq_len),
                               "--micro-batch",   std::to_string(c.micro_batch),
                               "--global-batch",  std::to_string(c.global_batch),
                               "--steps",         std::to_string(c.steps),
                               "--seed",          std::to_string(c.seed),
                               "--threads",       "1",
                               "--clip",          std::to_string(c.optim.clip_norm),
                               "--metrics",       metrics,
                               "--state-digests", digests};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // bamboo-manager's command line for the same run (bamboo-train --processes
  // without the launcher), plus `extra`: for tests that start workers themselves.
  static std::vector<std::string> manager_args(const train_config& c,
                                               const std::string& metrics,
                                               const std::string& digests,
                                               std::vector<std::string> extra) {
    auto a = args(c, metrics, digests, std::move(extra));
    a[0] = BAMBOO_MANAGER_BIN;
    a.erase(a.begin() + 1); // --processes
    return a;
  }
  pid_t pid_of(int node) const {
    auto pid = proc.wait_for(
        "joined as node " + std::to_string(node) + R"( \(pid (\d+)\))", 20s);
    REQUIRE_FALSE(pid.empty());
    return static_cast<pid_t>(std::stoi(pid));
  }
  // Waits until `done` steps have completed.
  void wait_steps(int done) const {
    REQUIRE_FALSE(proc.wait_for(" \\(" + std::to_string(done) + "/", 30s).empty());
  }
  int finish() {
    int status = proc.wait_exit(60s);
    INFO(proc.log());
    REQUIRE(status == 0);
    return status;
  }
};

// Exited (a zombie until the launcher reaps it) or reaped.
bool gone(pid_t pid);

} // namespace bamboo::test
