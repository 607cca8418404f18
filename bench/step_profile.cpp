// Where the time of one training step goes: the S=1 step of the benchmark GPT
// (4 blocks, d 256, 8 heads, seq 128, G=32 in micro-batches of 4, dropout 0.1,
// one thread), run through the stage executor on this thread under LibTorch's
// profiler, every operator's self time summed into categories (matmuls,
// attention, layer norms, dropout, the optimizer, ...), next to the achieved
// GFLOPS over a one-thread sgemm measured in the same run.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/bench_util.hpp"
#include "model/allocator.hpp"
#include "model/model.hpp"
#include "model/schedule.hpp"
#include "model/stage_executor.hpp"
#include "transport/transport_registry.hpp"

namespace bamboo::bench::step_bench {
namespace {

extern "C" void openblas_set_num_threads(int) __attribute__((weak));
namespace prof = torch::autograd::profiler;

// Forward + backward multiply-adds x 2 of the step: 6 x (matmul parameters) x
// tokens, plus attention's two T x T products per head, forward and backward.
double step_flop(const train_config& c) {
  const double d = c.model.d_model, t = c.model.seq_len, v = c.model.vocab;
  const double tokens = double(c.global_batch) * t;
  const double block_params = 4 * d * d + 2 * c.model.mlp_ratio * d * d;
  const double params = c.model.layers * block_params + d * v;
  const double attention = 3 * 4 * t * d * c.model.layers * tokens; // 4 T d per token
  return 6 * params * tokens + attention;
}

// A one-thread sgemm of `n` x `n`: GFLOPS.
double sgemm_gflops(int n) {
  auto a = at::randn({n, n}), b = at::randn({n, n});
  auto out = at::mm(a, b);
  std::vector<double> runs;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    at::mm_out(out, a, b);
    runs.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * n * n * n / bench::median(runs) / 1e9;
}

// The category an operator's self time counts in.
std::string category(const std::string& op) {
  auto has = [&](const char* s) { return op.find(s) != std::string::npos; };
  if (has("bamboo::"))
    return op.substr(op.find("::") + 2);
  if (has("addmm") || has("aten::mm") || has("bmm") || has("matmul") || has("linear"))
    return "matmuls";
  if (has("softmax") || has("masked_fill") || has("tril") || has("triu"))
    return "attention softmax and mask";
  if (has("layer_norm"))
    return "layer norms";
  if (has("dropout") || has("bernoulli") || has("uniform"))
    return "dropout and its generators";
  if (has("gelu"))
    return "gelu";
  if (has("embedding") || has("index"))
    return "embeddings";
  if (has("nll_loss") || has("cross_entropy"))
    return "loss";
  if (has("copy") || has("contiguous") || has("clone") || has("cat") || has("empty") ||
      has("zeros") || has("fill"))
    return "copies and allocations";
  if (has("add") || has("mul") || has("div") || has("sub") || has("sum") || has("sqrt"))
    return "elementwise";
  // The engine's own scopes before the views: "autograd::engine::evaluate_function:
  // MmBackward0" is the engine's time around a backward node, not a view's.
  if (has("autograd") || has("Backward") || has("AccumulateGrad"))
    return "autograd engine";
  if (has("view") || has("reshape") || has("transpose") || has("permute") ||
      has("expand") || has("slice") || has("select") || has("split") || has("chunk") ||
      has("unsqueeze") || has("squeeze") || op == "aten::t" || has("as_strided") ||
      has("detach") || has("alias"))
    return "views";
  return "other (" + op + ")";
}

// Self time (inclusive minus children) per category, from one thread's events;
// per operator too (outside our scopes), into `by_op`.
void add_self_times(const std::vector<prof::LegacyEvent>& events,
                    std::map<std::string, double>& us,
                    std::map<std::string, double>& by_op) {
  struct open {
    const prof::LegacyEvent* push;
    double children = 0;
    std::string scope; // the innermost bamboo:: scope around it
  };
  std::vector<open> stack;
  for (const auto& e : events) {
    if (e.kind() == prof::EventKind::PushRange) {
      const std::string name = e.name();
      std::string scope = stack.empty() ? "" : stack.back().scope;
      if (name.rfind("bamboo::", 0) == 0)
        scope = name;
      stack.push_back({&e, 0, scope});
    } else if (e.kind() == prof::EventKind::PopRange && !stack.empty()) {
      const auto o = stack.back();
      stack.pop_back();
      const double inclusive = o.push->cpuElapsedUs(e);
      // Inside one of our scopes everything counts for it (the optimizer's
      // elementwise ops are the optimizer's); elsewhere by operator.
      const std::string where =
          o.scope.empty() ? category(o.push->name()) : category(o.scope);
      us[where] += inclusive - o.children;
      if (o.scope.empty())
        by_op[o.push->name()] += inclusive - o.children;
      if (!stack.empty())
        stack.back().children += inclusive;
    }
  }
}

} // namespace

int bench_main(int argc, char** argv) {
  CLI::App app{"bamboo-bench-step: where the S=1 training step's time goes"};
  int steps = 5, top_ops = 0;
  app.add_option("--steps", steps, "profiled steps (after 2 warm-up steps)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--ops", top_ops,
                 "also print the N operators with the most self time (outside our "
                 "named scopes), to compare with another profile")
      ->check(CLI::Range(0, 1000));
  CLI11_PARSE(app, argc, argv);

  keep_freed_memory(); // as every stage thread does
  at::set_num_threads(1);
  if (openblas_set_num_threads)
    openblas_set_num_threads(1);
  const auto cfg = bench::benchmark_gpt(1);
  std::string error;
  auto corpus = token_corpus::load(cfg.data, cfg.model, cfg.seed, error);
  if (!corpus) {
    std::fprintf(stderr, "bench: %s\n", error.c_str());
    return 1;
  }
  const stage_range all{0, cfg.model.pipeline_layers(), 1.0, 1.0};
  stage_executor ex(cfg, 0, all, corpus);
  transport_registry registry(transport_kind::local, 1);
  auto transport = registry.connect(0, 1, error);
  if (!transport) {
    std::fprintf(stderr, "bench: %s\n", error.c_str());
    return 1;
  }
  const auto ops = make_schedule(0, 1, cfg.micro_batches(), cfg.redundancy);
  auto step = [&](std::int64_t k) {
    const auto t0 = std::chrono::steady_clock::now();
    auto out = ex.run(k, ops, *transport);
    if (!out.status) {
      std::fprintf(stderr, "bench: step %lld failed\n", static_cast<long long>(k));
      std::exit(1);
    }
    const double norm = std::sqrt(out.grad_squares);
    ex.clip_gradients(std::min(1.0, cfg.optim.clip_norm / (norm + 1e-6)));
    ex.apply_update(k);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::int64_t k = 0;
  for (; k < 2; ++k)
    step(k);
  std::vector<double> plain;
  for (int i = 0; i < steps; ++i)
    plain.push_back(step(k++));

  prof::enableProfilerLegacy(
      torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i)
    step(k++);
  const double profiled =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto lists = prof::disableProfilerLegacy();
  std::map<std::string, double> us, by_op;
  for (const auto& l : lists)
    add_self_times(l, us, by_op);

  double total_us = 0;
  for (const auto& [c, t] : us)
    total_us += t;
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [c, t] : us)
    rows.push_back({t, c});
  std::sort(rows.rbegin(), rows.rend());
  std::printf("S=1 step, gpt 4 x d%d, seq %d, G=%d m=%d, dropout %.1f, 1 thread\n",
              cfg.model.d_model, cfg.model.seq_len, cfg.global_batch, cfg.micro_batch,
              cfg.model.dropout);
  std::printf("step time, unprofiled: %s\n", bench::spread(plain).c_str());
  std::printf("profiled steps: %.3f s each (the profiler's own cost included)\n",
              profiled / steps);
  std::printf("%-40s %10s %7s\n", "self time by category", "ms/step", "share");
  for (const auto& [t, c] : rows)
    if (t / total_us >= 0.002)
      std::printf("%-40s %10.1f %6.1f%%\n", c.c_str(), t / 1e3 / steps,
                  100 * t / total_us);
  std::printf("%-40s %10.1f %6.1f%%  (of the profiled step: %.0f%%)\n", "total",
              total_us / 1e3 / steps, 100.0, 100 * total_us / 1e6 / profiled);
  std::vector<std::pair<double, std::string>> ops_rows;
  for (const auto& [op, t] : by_op)
    ops_rows.push_back({t, op});
  std::sort(ops_rows.rbegin(), ops_rows.rend());
  for (int i = 0; i < top_ops && i < static_cast<int>(ops_rows.size()); ++i)
    std::printf("  %-38s %10.1f %6.1f%%\n", ops_rows[i].second.c_str(),
                ops_rows[i].first / 1e3 / steps, 100 * ops_rows[i].first / total_us);
  const double gflop = step_flop(cfg) / 1e9;
  const double achieved = gflop / bench::median(plain);
  const double peak = sgemm_gflops(1024);
  std::printf("step work: %.1f GFLOP; achieved %.1f GFLOPS, one-thread sgemm 1024^2 %.1f "
              "GFLOPS: ratio %.2f (goal >= 0.60, %s)\n",
              gflop, achieved, peak, achieved / peak,
              achieved / peak >= 0.6 ? "met" : "MISSED");
  return 0;
}

} // namespace bamboo::bench::step_bench
