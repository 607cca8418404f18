// Signals as users and schedulers send them: SIGTERM or SIGINT to bamboo-train
// (embedded, or the --processes launcher) finishes the step in flight,
// checkpoints that boundary and exits 143 or 130; the run resumed from there
// ends with the uninterrupted run's losses, bit for bit. Every run with a
// checkpoint directory ends with a checkpoint of its last step.
// LibTorch first: its glog macros would replace Catch's CHECK otherwise.
#include <ATen/ATen.h>

#include "tests/examples/process_run.hpp"

#include <filesystem>

#include "model/checkpoint.hpp"
#include "tests/run_command.hpp"
#include "tests/scratch_dir.hpp"

using namespace bamboo;
using namespace bamboo::test;

namespace {

// A small GPT on S stages: steps of a few ms to tens of ms here.
std::vector<std::string> small_run(int stages, int steps, const std::string& metrics) {
  return {BAMBOO_TRAIN_BIN,
          "--stages",
          std::to_string(stages),
          "--layers",
          "4",
          "--d-model",
          "32",
          "--heads",
          "2",
          "--seq-len",
          "16",
          "--micro-batch",
          "2",
          "--global-batch",
          "8",
          "--steps",
          std::to_string(steps),
          "--seed",
          "17",
          "--threads",
          "1",
          "--metrics",
          metrics};
}

std::vector<std::string> with(std::vector<std::string> a,
                              const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

std::string line_with(const std::string& log, const std::string& needle) {
  const auto at = log.find(needle);
  if (at == std::string::npos)
    return "";
  return log.substr(at, log.find('\n', at) - at);
}

// The stopped run's rows, then the resumed run's, equal the straight run's.
void check_resumed(const metrics_rows& straight, const metrics_rows& stopped,
                   const metrics_rows& resumed) {
  REQUIRE_FALSE(stopped.steps.empty());
  REQUIRE_FALSE(resumed.steps.empty());
  CHECK(resumed.steps.front() == stopped.steps.back() + 1);
  CHECK(resumed.steps.back() == straight.steps.back());
  for (const auto* part : {&stopped, &resumed})
    for (std::size_t i = 0; i < part->steps.size(); ++i) {
      const auto k = static_cast<std::size_t>(part->steps[i]);
      REQUIRE(k < straight.losses.size());
      INFO("step " << k);
      CHECK(part->losses[i] == straight.losses[k]);
    }
}

} // namespace

TEST_CASE("SIGTERM or SIGINT to an embedded run finishes the step in flight - "
          "checkpoints it - exits 143 or 130 - and the resumed run has the "
          "uninterrupted losses bit for bit",
          "[examples]") {
  no_leftovers guard;
  const int sig = GENERATE(SIGTERM, SIGINT);
  INFO("signal " << sig);
  scratch_dir work;
  const int steps = 400;
  const auto straight_csv = work.file("straight.csv");
  {
    child straight(work, "straight", small_run(2, steps, straight_csv), test_token);
    REQUIRE(straight.wait_exit(300s) == 0);
  }
  const auto ckpt = work.file("ckpt");
  const auto stopped_csv = work.file("stopped.csv");
  child run(work, "stopped",
            with(small_run(2, steps, stopped_csv), {"--checkpoint-dir", ckpt}),
            test_token);
  REQUIRE_FALSE(run.wait_for(R"(\(20/)", 60s).empty());
  const auto t0 = clock_type::now();
  REQUIRE(run.signal(sig));
  const int status = run.wait_exit(30s);
  const double took = std::chrono::duration<double>(clock_type::now() - t0).count();
  const auto log = run.log();
  INFO(log);
  INFO("exit " << status << " " << took << " s after the signal");
  CHECK(status == 128 + sig);
  CHECK(took < 10);
  const auto said =
      line_with(log, "bamboo-train: stopped by signal " + std::to_string(sig));
  REQUIRE_FALSE(said.empty());
  const auto stopped = read_metrics(stopped_csv);
  REQUIRE_FALSE(stopped.steps.empty());
  CHECK(stopped.steps.back() < steps - 1);
  const auto dir = checkpoint_step_dir(ckpt, stopped.steps.back() + 1);
  CHECK(said.find("its checkpoint: " + dir) != std::string::npos);
  CHECK(std::filesystem::exists(dir + "/manifest.json"));

  const auto resumed_csv = work.file("resumed.csv");
  child again(
      work, "resumed",
      with(small_run(2, steps, resumed_csv), {"--checkpoint-dir", ckpt, "--resume"}),
      test_token);
  REQUIRE(again.wait_exit(300s) == 0);
  check_resumed(read_metrics(straight_csv), stopped, read_metrics(resumed_csv));
  // The end of the run is a checkpoint too.
  CHECK(std::filesystem::exists(checkpoint_step_dir(ckpt, steps) + "/manifest.json"));
}

TEST_CASE("a second signal ends an embedded run at once - and its token files go with it",
          "[examples]") {
  no_leftovers guard;
  scratch_dir work;
  // Steps of about a second here: the second signal lands while the first
  // waits for the step in flight.
  std::vector<std::string> args{BAMBOO_TRAIN_BIN,
                                "--stages",
                                "2",
                                "--layers",
                                "4",
                                "--d-model",
                                "384",
                                "--heads",
                                "4",
                                "--seq-len",
                                "128",
                                "--micro-batch",
                                "8",
                                "--global-batch",
                                "32",
                                "--steps",
                                "1000",
                                "--threads",
                                "1",
                                "--inspect-port",
                                "0",
                                "--checkpoint-dir",
                                work.file("ckpt")};
  child run(work, "twice", args, test_token);
  const auto token = run.wait_for(R"(--token-file (\S+) )", 60s);
  REQUIRE_FALSE(token.empty());
  REQUIRE_FALSE(run.wait_for(R"(\(2/)", 120s).empty());
  REQUIRE(std::filesystem::exists(token));
  REQUIRE(run.signal(SIGTERM));
  REQUIRE_FALSE(run.wait_for("signal 15: the run stops after step", 10s).empty());
  REQUIRE(run.signal(SIGTERM));
  const int status = run.wait_exit(10s);
  const auto log = run.log();
  INFO(log);
  CHECK(status == 128 + SIGTERM);
  CHECK(log.find("stopped by signal") == std::string::npos); // it did not wait
  CHECK_FALSE(std::filesystem::exists(token));
}

TEST_CASE("SIGTERM to the --processes launcher stops the manager after the step in "
          "flight with a checkpoint - every worker leaves - and the resumed run has the "
          "uninterrupted losses bit for bit",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(131);
  cfg.steps = 300;
  const auto expected = embedded_reference(cfg);
  scratch_dir work;
  const auto ckpt = work.file("ckpt");
  metrics_rows stopped, resumed;
  {
    process_run run(cfg, "stopped", {"--checkpoint-dir", ckpt});
    run.wait_steps(10);
    REQUIRE(run.proc.signal(SIGTERM));
    const int status = run.proc.wait_exit(60s);
    const auto log = run.proc.log();
    INFO(log);
    CHECK(status == 128 + SIGTERM);
    const auto said = line_with(log, "bamboo-manager: stopped by signal 15");
    REQUIRE_FALSE(said.empty());
    stopped = read_metrics(run.metrics);
    REQUIRE_FALSE(stopped.steps.empty());
    const auto dir = checkpoint_step_dir(ckpt, stopped.steps.back() + 1);
    CHECK(said.find("its checkpoint: " + dir) != std::string::npos);
    CHECK(std::filesystem::exists(dir + "/manifest.json"));
  }
  {
    process_run run(cfg, "resumed", {"--checkpoint-dir", ckpt, "--resume"});
    REQUIRE(run.proc.wait_exit(300s) == 0);
    resumed = read_metrics(run.metrics);
  }
  metrics_rows straight;
  for (std::size_t k = 0; k < expected.losses.size(); ++k) {
    straight.steps.push_back(static_cast<long>(k));
    straight.losses.push_back(expected.losses[k]);
  }
  check_resumed(straight, stopped, resumed);
}

TEST_CASE("an embedded run stopped with kill -STOP for 5 s loses no node and completes "
          "with the uninterrupted losses bit for bit (default deadlines)",
          "[examples]") {
  no_leftovers guard;
  scratch_dir work;
  const int steps = 300;
  const auto straight_csv = work.file("straight.csv");
  {
    child straight(work, "straight", small_run(4, steps, straight_csv), test_token);
    REQUIRE(straight.wait_exit(300s) == 0);
  }
  const auto paused_csv = work.file("paused.csv");
  child run(work, "paused", small_run(4, steps, paused_csv), test_token);
  REQUIRE_FALSE(run.wait_for(R"(\(20/)", 60s).empty());
  REQUIRE(run.signal(SIGSTOP));
  std::this_thread::sleep_for(5s);
  REQUIRE(run.signal(SIGCONT));
  const int status = run.wait_exit(300s);
  const auto log = run.log();
  INFO(notable_lines(log));
  INFO(log);
  CHECK(status == 0);
  CHECK(log.find("lost in step") == std::string::npos);
  // Seen as a pause: the manager's late tick, or every node of the process
  // silent together while the manager ticks.
  CHECK((log.find("tick came") != std::string::npos ||
         log.find("a stall (a loaded machine)") != std::string::npos));
  const auto straight = read_metrics(straight_csv);
  const auto paused = read_metrics(paused_csv);
  REQUIRE(paused.losses.size() == straight.losses.size());
  for (std::size_t k = 0; k < straight.losses.size(); ++k) {
    INFO("step " << k);
    CHECK(paused.losses[k] == straight.losses[k]);
  }
}

TEST_CASE("the manager of a --processes run stopped with kill -STOP for 2 s loses no "
          "worker and the run completes with the fault-free losses bit for bit (default "
          "deadlines)",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(132);
  cfg.steps = 200;
  const auto expected = embedded_reference(cfg);
  process_run run(cfg, "manager_paused");
  const auto manager = run.proc.wait_for(R"(bamboo-manager \(pid (\d+)\) listens)", 20s);
  REQUIRE_FALSE(manager.empty());
  run.wait_steps(10);
  REQUIRE(::kill(std::stoi(manager), SIGSTOP) == 0);
  std::this_thread::sleep_for(2s);
  REQUIRE(::kill(std::stoi(manager), SIGCONT) == 0);
  const int status = run.proc.wait_exit(300s);
  const auto log = run.proc.log();
  INFO(notable_lines(log));
  INFO(log);
  CHECK(status == 0);
  CHECK(log.find("lost in step") == std::string::npos);
  CHECK(log.find("node_lost") == std::string::npos);
  check_losses(read_metrics(run.metrics), expected);
}
