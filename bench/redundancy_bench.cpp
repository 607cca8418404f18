// What redundancy costs and what failover takes, measured in one run (5
// interleaved rounds, warm-up steps left out, medians with min and max):
//   1. fault-free throughput of lazy and eager over off;
//   2. failover latency, from the kill to the completion of the step it hit,
//      next to the fault-free step time of the same runs;
//   3. what a background checkpoint every 2 steps costs a lazy run's step.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"
#include "bench/bench_util.hpp"
#include "log/log.hpp"

using namespace bamboo;
using bench::median;

namespace {

constexpr int warmup_steps = 2;

train_config bench_config(redundancy_mode mode) {
  train_config c;
  c.model.layers = 4;
  c.model.d_model = 256;
  c.model.heads = 8;
  c.model.seq_len = 128;
  c.stages = 2;
  c.micro_batch = 4;
  c.global_batch = 32;
  c.steps = 8;
  c.threads = 1;
  c.redundancy = mode;
  return c;
}

run_result run(const train_config& c, const run_options& o = {}) {
  auto r = run_embedded(c, o);
  if (!r) {
    std::fprintf(stderr, "bench: %s\n", describe(r.error()).c_str());
    std::exit(1);
  }
  return std::move(*r);
}

double median_step(const run_result& r) {
  std::vector<double> t;
  for (const auto& s : r.steps)
    if (s.step >= warmup_steps && s.event.empty())
      t.push_back(s.seconds);
  return median(t);
}

} // namespace

int main() {
  log::set_level("warn");
  constexpr int rounds = 5;
  std::vector<double> off, lazy, eager, checkpointed;
  std::string dir =
      (std::filesystem::temp_directory_path() / "bamboo_bench_XXXXXX").string();
  if (!mkdtemp(dir.data()))
    return 1;
  run_options ck;
  ck.checkpoints.dir = dir;
  ck.checkpoints.every = 2;
  ck.checkpoints.keep = 1;
  for (int round = 0; round < rounds; ++round) {
    off.push_back(median_step(run(bench_config(redundancy_mode::off))));
    lazy.push_back(median_step(run(bench_config(redundancy_mode::lazy))));
    eager.push_back(median_step(run(bench_config(redundancy_mode::eager))));
    checkpointed.push_back(median_step(run(bench_config(redundancy_mode::lazy), ck)));
  }
  std::filesystem::remove_all(dir);
  const double t_off = median(off), t_lazy = median(lazy), t_eager = median(eager);
  const auto c = bench_config(redundancy_mode::lazy);
  std::printf("model: gpt, %d blocks, d_model %d, seq %d; S=%d, G=%d m=%d; 1 thread per "
              "stage\n",
              c.model.layers, c.model.d_model, c.model.seq_len, c.stages, c.global_batch,
              c.micro_batch);
  std::printf("fault-free step, off:   %s\n", bench::spread(off).c_str());
  std::printf("fault-free step, lazy:  %s\n", bench::spread(lazy).c_str());
  std::printf("fault-free step, eager: %s\n", bench::spread(eager).c_str());
  std::printf("throughput lazy / off:   %.3f  (goal >= 0.97)\n", t_off / t_lazy);
  std::printf("throughput eager / off:  %.3f  (goal >= 0.90)\n", t_off / t_eager);
  std::printf("fault-free step, lazy, checkpoint every 2 steps: %s\n",
              bench::spread(checkpointed).c_str());
  std::printf("throughput lazy+checkpoints / lazy: %.3f  (goal >= 0.98)\n",
              t_lazy / median(checkpointed));

  for (auto mode : {redundancy_mode::lazy, redundancy_mode::eager}) {
    auto cfg = bench_config(mode);
    std::vector<double> detect, latency, step;
    for (int round = 0; round < rounds; ++round) {
      // Node 1 (the last stage) dies before its 4th instruction of step 4.
      run_options o;
      o.preemptions = {{1, 4, 4}};
      auto r = run(cfg, o);
      if (r.failovers.size() != 1) {
        std::fprintf(stderr, "bench: expected one failover\n");
        return 1;
      }
      detect.push_back(r.failovers[0].detect_s);
      latency.push_back(r.failovers[0].latency_s);
      step.push_back(median_step(r));
    }
    const double l = median(latency), st = median(step);
    std::printf("failover (%s): kill -> detected %s\n", to_string(mode),
                bench::spread(detect).c_str());
    std::printf("failover (%s): kill -> step complete %s\n", to_string(mode),
                bench::spread(latency).c_str());
    std::printf("failover (%s): fault-free step %s; ratio %.2f step times\n",
                to_string(mode), bench::spread(step).c_str(), l / st);
  }
  return 0;
}
