// Pipeline overhead and speed-up, measured in one run (this machine is noisy, so
// 5 rounds are interleaved, warm-up steps are left out, and each figure is a
// median, printed with its min and max):
//   1. S=1 embedded step time over a plain LibTorch training loop of the same
//      model with the same optimizer (bamboo's fused AdamW, the same schedule
//      and global-norm clipping): what the actors and the pipeline machinery cost;
//   2. the same over a plain loop with torch::optim::AdamW and
//      torch::nn::utils::clip_grad_norm_, what users would write;
//   3. S=2 throughput (one thread per stage) over the like-for-like plain loop's,
//      next to the ideal 1F1B speed-up M/(M+S-1)*S.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/adamw.h>
// After adamw.h, which brings the torch::Tensor it uses.
#include <torch/nn/utils/clip_grad.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"
#include "bench/bench_util.hpp"
#include "log/log.hpp"
#include "model/allocator.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"

namespace bamboo::bench::pipeline_bench {
namespace {

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

constexpr int warmup_steps = 2;

train_config bench_config(int stages) {
  return bench::benchmark_gpt(stages);
}

enum class plain_optimizer { bamboo_adamw, torch_adamw };

// A plain LibTorch loop: one module list, autograd over the whole model,
// gradient accumulation over the same micro-batches, global-norm clipping, and
// either bamboo's AdamW (with its schedule: like for like) or torch's.
double plain_step_seconds(const train_config& c, plain_optimizer which) {
  at::set_num_threads(1);
  std::string err;
  auto corpus = token_corpus::load(c.data, c.model, c.seed, err);
  sample_order order(c.seed, sample_count(*corpus, c.model));
  auto layers = build_layers(c.model, c.seed, 0, c.model.pipeline_layers());
  std::vector<named_tensor> named;
  std::vector<at::Tensor> params;
  for (auto& l : layers)
    for (auto& p : l->params()) {
      named.push_back(p);
      params.push_back(p.tensor);
    }
  adamw ours(named, c.optim, c.steps);
  torch::optim::AdamW theirs(params, torch::optim::AdamWOptions(c.optim.lr)
                                         .betas({c.optim.beta1, c.optim.beta2})
                                         .eps(c.optim.eps)
                                         .weight_decay(c.optim.weight_decay));
  std::vector<double> times;
  for (int k = 0; k < c.steps; ++k) {
    auto start = std::chrono::steady_clock::now();
    for (int j = 0; j < c.micro_batches(); ++j) {
      auto mb = make_micro_batch(c, *corpus, order, k, j);
      at::Tensor x = mb.input;
      layer_ctx ctx{c.seed, k, j, true};
      for (auto& l : layers)
        x = l->forward(x, ctx);
      (compute_loss(x, mb.target) / double(c.micro_batches())).backward();
    }
    if (which == plain_optimizer::bamboo_adamw) {
      const double norm = std::sqrt(ours.grad_squares());
      const double coef =
          c.optim.clip_norm > 0 ? std::min(1.0, c.optim.clip_norm / (norm + 1e-6)) : 1.0;
      ours.step(k, coef); // clears the gradients
    } else {
      if (c.optim.clip_norm > 0)
        torch::nn::utils::clip_grad_norm_(params, c.optim.clip_norm);
      theirs.step();
      theirs.zero_grad();
    }
    if (k >= warmup_steps)
      times.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
              .count());
  }
  return median(times);
}

double embedded_step_seconds(const train_config& c) {
  auto r = run_embedded(c);
  if (!r) {
    std::fprintf(stderr, "bench: %s\n", describe(r.error()).c_str());
    std::exit(1);
  }
  std::vector<double> times;
  for (auto& s : r->steps)
    if (s.step >= warmup_steps)
      times.push_back(s.seconds);
  return median(times);
}

// P=2 x S=2 against P=1 x S=2 on the benchmark GPT (G=32, M=8): twice the
// stage threads for the same samples. With no more cores than one pipeline's
// stages, a second pipeline can only fill the first one's idle time: its 1F1B
// bubble (worth (M+S-1)/M) and what the stages' uneven costs leave idle.
int compare_pipelines(int rounds) {
  auto one = bench_config(2);
  one.steps = 8;
  auto two = one;
  two.pipelines = 2;
  std::vector<double> t1, t2, ratio;
  for (int round = 0; round < rounds; ++round) {
    t1.push_back(embedded_step_seconds(one));
    t2.push_back(embedded_step_seconds(two));
    ratio.push_back(t1.back() / t2.back());
  }
  const int m = one.micro_batches(), s = one.stages;
  const unsigned cores = std::thread::hardware_concurrency();
  std::printf("model: gpt, %d blocks, d_model %d, seq %d; G=%d m=%d (M=%d); 1 thread per "
              "stage; %u cores\n",
              one.model.layers, one.model.d_model, one.model.seq_len, one.global_batch,
              one.micro_batch, m, cores);
  std::printf("step times, warm-up excluded, medians of each run's steps:\n");
  std::printf("  P=1 x S=2 (2 stage threads):   %s\n", bench::spread(t1).c_str());
  std::printf("  P=2 x S=2 (4 stage threads):   %s\n", bench::spread(t2).c_str());
  std::printf("per round P=2 / P=1 throughput: %s\n", bench::spread(ratio, "").c_str());
  // The bubble is not all the idle time: the stages' cost split (the layers
  // are coarse) leaves the lighter stage idle too, which a second pipeline fills.
  std::printf(
      "ratio P=2 / P=1 throughput:     %.3f  (filling the 1F1B bubble alone gives "
      "(M+S-1)/M = %.3f on %u cores, the stages' imbalance more; 1F1B with a core "
      "per stage thread: (M+S-1)/(M/2+S-1) = %.3f)\n",
      median(ratio), double(m + s - 1) / m, cores, double(m + s - 1) / (m / 2 + s - 1));
  return 0;
}

} // namespace

int bench_main(int argc, char** argv) {
  // The plain loops get the allocator setting every bamboo stage thread makes.
  keep_freed_memory();
  CLI::App app{"bamboo-bench-pipeline: pipeline overhead and speed-up"};
  std::string profile_out;
  app.add_option("--profile-out", profile_out,
                 "write the measured S=2 step time as a bamboo-sim profile");
  bool pipelines = false;
  app.add_flag("--pipelines", pipelines,
               "instead: the throughput of 2 data-parallel pipelines of 2 stages over "
               "one pipeline of 2 stages, same global batch");
  int rounds = 5;
  app.add_option("--rounds", rounds, "interleaved rounds")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  log::set_level("warn");
  if (openblas_set_num_threads)
    openblas_set_num_threads(1);
  if (pipelines)
    return compare_pipelines(rounds);
  const auto c1 = bench_config(1), c2 = bench_config(2);
  std::vector<double> plain, torch_plain, s1, s2;
  for (int round = 0; round < rounds; ++round) {
    plain.push_back(plain_step_seconds(c1, plain_optimizer::bamboo_adamw));
    torch_plain.push_back(plain_step_seconds(c1, plain_optimizer::torch_adamw));
    s1.push_back(embedded_step_seconds(c1));
    s2.push_back(embedded_step_seconds(c2));
  }
  const double p = median(plain), tp = median(torch_plain), e1 = median(s1),
               e2 = median(s2);
  const int m = c2.micro_batches(), s = c2.stages;
  const double ideal = double(m) / (m + s - 1) * s;
  std::printf(
      "model: gpt, %d blocks, d_model %d, seq %d; G=%d m=%d (M=%d); 1 thread per stage\n",
      c1.model.layers, c1.model.d_model, c1.model.seq_len, c1.global_batch,
      c1.micro_batch, m);
  std::printf("step times, warm-up excluded, medians of each run's steps:\n");
  std::printf("  plain loop, bamboo AdamW + clip:  %s\n", bench::spread(plain).c_str());
  std::printf("  plain loop, torch AdamW + clip:   %s\n",
              bench::spread(torch_plain).c_str());
  std::printf("  embedded S=1:                     %s\n", bench::spread(s1).c_str());
  std::printf("  embedded S=2:                     %s\n", bench::spread(s2).c_str());
  std::printf("ratio S=1 / plain step time (same optimizer):  %.3f  (goal <= 1.03)\n",
              e1 / p);
  std::printf("ratio S=1 / plain step time (torch's AdamW):   %.3f\n", e1 / tp);
  std::printf(
      "ratio S=2 / plain throughput:      %.3f  (ideal 1F1B M/(M+S-1)*S = %.3f)\n",
      p / e2, ideal);
  if (!profile_out.empty()) {
    // One pipeline measured; more pipelines are data-parallel copies of it.
    std::ofstream out(profile_out);
    out << "name,bench-gpt-s2\nstages,2\nsamples_per_step," << c2.global_batch
        << "\nstep_s," << e2 << "\nlocal_rendezvous_ms,20000\non_demand_instances,2\n"
        << "on_demand_step_s," << e2 << "\ntarget_steps,100000\n";
    std::printf("profile written to %s\n", profile_out.c_str());
  }
  return 0;
}

} // namespace bamboo::bench::pipeline_bench
