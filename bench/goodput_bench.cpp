// Goodput under preemptions across real processes: committed samples per
// second of wall time, for lazy and eager redundancy and for the
// checkpoint-restart baseline (redundancy off: every loss rolls back to the
// newest checkpoint, and a replacement worker comes 5 s after the kill), with
// a checkpoint every 10 steps and a kill -9 every 20 steps. One run each, on
// the same model, steps and kills; the ratios are to the fault-free run's
// throughput measured in the same invocation.
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench/bench_util.hpp"
#include "bench/watched_child.hpp"

namespace {

using namespace bamboo::bench;

constexpr int steps = 50, global_batch = 8, every = 10;

struct row {
  long step;
  double seconds;
  std::string event;
};

std::vector<row> read_rows(const std::string& csv) {
  std::vector<row> out;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    const auto cells = csv_cells(line);
    if (cells.size() >= 8)
      out.push_back({std::stol(cells[0]), std::stod(cells[6]), cells[7]});
  }
  return out;
}

struct outcome {
  bool ok = false;
  double wall = 0, goodput = 0;
  double detect = 0, recover = 0, redo = 0; // seconds, summed over the kills
  int kills = 0, rollbacks = 0;
};

double seconds(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

outcome run(const char* train_bin, const std::string& redundancy, bool kills) {
  const std::string tag = "/tmp/bamboo_bench_goodput_" + std::to_string(getpid());
  const std::string csv = tag + ".csv", dir = tag + "_ckpt";
  std::vector<std::string> args{train_bin,
                                "--processes",
                                "--stages",
                                "4",
                                "--layers",
                                "4",
                                "--d-model",
                                "64",
                                "--heads",
                                "4",
                                "--seq-len",
                                "64",
                                "--micro-batch",
                                "2",
                                "--global-batch",
                                std::to_string(global_batch),
                                "--steps",
                                std::to_string(steps),
                                "--threads",
                                "1",
                                "--log-level",
                                "warn",
                                "--redundancy",
                                redundancy,
                                "--metrics",
                                csv,
                                "--checkpoint-dir",
                                dir,
                                "--checkpoint-every",
                                std::to_string(every),
                                "--keep",
                                "2"};
  if (kills)
    for (const char* k : {"node=1@step=15", "node=3@step=35"})
      args.insert(args.end(), {"--preempt", k});
  if (redundancy == "off")
    args.insert(args.end(), {"--replace-after-s", "5", "--replacement-wait-s", "60"});
  outcome o;
  {
    watched_child child(args);
    if (child.wait_exit(std::chrono::seconds(600)) != 0)
      return o;
    // Wall time from the manager's first listening (the same start-up for all).
    const auto end = clock_type::now();
    const auto listening =
        child.matches(std::regex(R"(bamboo-manager \(pid \d+\) listens)"));
    if (listening.empty())
      return o;
    o.wall = seconds(listening.front().first, end);
    const auto killed = child.matches(std::regex("kill -9 of node"));
    const auto lost = child.matches(
        std::regex(R"(\[bamboo.manager\] \[warning\] node \d+ lost in step)"));
    const auto rolled = child.matches(std::regex("rolled back to the checkpoint"));
    const auto steps_printed = child.matches(std::regex(R"(^step \d+ \()"));
    o.kills = static_cast<int>(killed.size());
    o.rollbacks = static_cast<int>(rolled.size());
    for (std::size_t i = 0; i < killed.size() && i < lost.size(); ++i)
      o.detect += seconds(killed[i].first, lost[i].first);
    // The baseline's recovery: from the loss to the first step of the new plan
    // (the replacement's wait, the restart and the load from the checkpoint).
    for (std::size_t i = 0; i < rolled.size() && i < lost.size(); ++i)
      for (const auto& [t, text] : steps_printed)
        if (t > rolled[i].first) {
          o.recover += seconds(lost[i].first, t);
          break;
        }
  }
  const auto rows = read_rows(csv);
  std::vector<double> normal;
  std::map<long, int> seen;
  for (const auto& r : rows)
    ++seen[r.step];
  std::map<long, int> first;
  for (const auto& r : rows) {
    if (r.event.empty() && r.step >= 2)
      normal.push_back(r.seconds);
    // Steps that ran twice: the first run was undone and redone.
    if (seen[r.step] > 1 && first[r.step]++ == 0)
      o.redo += r.seconds;
  }
  const double step = median(normal);
  for (const auto& r : rows)
    if (r.event == "failover") // lazy/eager: the failover step's extra time
      o.recover += std::max(0.0, r.seconds - step);
  o.goodput = steps * global_batch / o.wall;
  o.ok = true;
  std::remove(csv.c_str());
  std::system(("rm -rf " + dir).c_str());
  return o;
}

} // namespace

int main() {
  std::printf("goodput across processes: GPT, S=4, %d steps of %d samples, a "
              "checkpoint every %d steps, kill -9 of a worker in steps 15 and 35 "
              "(one run each)\n",
              steps, global_batch, every);
  run(BAMBOO_TRAIN_BIN, "lazy", false); // warm-up: the page cache, the first start
  const auto clean = run(BAMBOO_TRAIN_BIN, "lazy", false);
  if (!clean.ok) {
    std::printf("the fault-free run failed\n");
    return 1;
  }
  std::printf("  fault-free (lazy)    %7.2f samples/s over %.1f s of wall time (after a "
              "warm-up run)\n",
              clean.goodput, clean.wall);
  bool ok = true;
  std::map<std::string, double> goodput;
  for (const auto& [name, mode] : std::vector<std::pair<std::string, std::string>>{
           {"lazy", "lazy"}, {"eager", "eager"}, {"checkpoint-restart", "off"}}) {
    const auto o = run(BAMBOO_TRAIN_BIN, mode, true);
    if (!o.ok) {
      std::printf("  %-20s failed\n", name.c_str());
      ok = false;
      continue;
    }
    goodput[name] = o.goodput;
    std::printf("  %-20s %7.2f samples/s, ratio %.3f to fault-free; %d kills, %d "
                "rollbacks; detecting %.2f s, recovering %.2f s, redoing %.2f s\n",
                name.c_str(), o.goodput, o.goodput / clean.goodput, o.kills, o.rollbacks,
                o.detect, o.recover, o.redo);
  }
  if (goodput.count("lazy") && goodput.count("checkpoint-restart"))
    std::printf("  lazy / checkpoint-restart %.2f, eager / checkpoint-restart %.2f\n"
                "  (on 2 cores, fewer worker processes after a kill contend less: a "
                "ratio above 1 to fault-free is that, not a gain)\n",
                goodput["lazy"] / goodput["checkpoint-restart"],
                goodput["eager"] / goodput["checkpoint-restart"]);
  return ok ? 0 : 1;
}
