// bamboo-sim: replays spot-instance traces (or generated ones) through a policy and
// reports steps, throughput, failures, instances, cost and value. Several
// policies, redundancy modes and seeds form a grid that runs in parallel.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <regex>
#include <thread>

#include <CLI/CLI.hpp>

#include "examples/sim/report.hpp"
#include "examples/sim/simulator.hpp"

using namespace bamboo::sim;

namespace {

int bad(const std::string& msg) {
  std::cerr << "bamboo-sim: error: " << msg << "\n";
  return 2;
}

// "12h", "30m", "90s", "1500ms", or a number of hours.
bool parse_duration(const std::string& text, std::int64_t& ms) {
  static const std::regex re(R"(([0-9]*\.?[0-9]+)(ms|s|m|h)?)");
  std::smatch m;
  if (!std::regex_match(text, m, re))
    return false;
  const double v = std::stod(m[1]);
  const std::string unit = m[2].matched ? m[2].str() : "h";
  const double scale = unit == "ms" ? 1 : unit == "s" ? 1e3 : unit == "m" ? 6e4 : 3.6e6;
  ms = static_cast<std::int64_t>(v * scale);
  return true;
}

struct run_spec {
  policy_kind policy;
  sim_redundancy redundancy;
  std::uint64_t seed;
  std::string bamboo_suffix; // the S range and zones, when given
  std::string label() const {
    std::string l = to_string(policy);
    if (policy == policy_kind::bamboo)
      l += std::string("/") + to_string(redundancy) + bamboo_suffix;
    return l;
  }
};

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"bamboo-sim: spot-trace simulator driving bamboo's planner"};
  std::string trace_path, generate, model = "gpt2", profile_path, duration, seeds = "1";
  std::string summary_path, series_path, plot_path;
  std::string ckpt_interval = "30m", restart = "60s", ckpt_cost;
  std::vector<std::string> policies{"bamboo-nsdi23"}, redundancies{"lazy"};
  int capacity = 48, threads = 0, min_stages = 0, zones = 1;
  bool timing = false;
  auto* trace_opt =
      app.add_option("--trace", trace_path, "event or instance-count trace file");
  app.add_option("--generate", generate,
                 "generated trace: hourly (diurnal), random (per-hour draws), removal=P")
      ->excludes(trace_opt);
  app.add_option("--capacity", capacity,
                 "generated traces: desired instances (default 48; on-demand runs "
                 "the profile's on-demand baseline)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seeds", seeds, "generated traces: seed or range A..B (default 1)");
  app.add_option("--policy", policies,
                 "bamboo-nsdi23 (default), bamboo, checkpoint-restart, on-demand")
      ->check(
          CLI::IsMember({"bamboo-nsdi23", "bamboo", "checkpoint-restart", "on-demand"}));
  app.add_option("--redundancy", redundancies,
                 "bamboo policy: off, lazy, eager, adaptive")
      ->check(CLI::IsMember({"off", "lazy", "eager", "adaptive"}));
  auto* model_opt =
      app.add_option("--model", model,
                     "gpt2 (default; gpt, as bamboo-train says, is the same) or bert: "
                     "the original simulator's profiles")
          ->check(CLI::IsMember({"gpt2", "gpt", "bert"}));
  app.add_option("--profile", profile_path,
                 "a profile file (e.g. from bamboo-bench-pipeline), instead of --model")
      ->excludes(model_opt);
  app.add_option("--duration", duration,
                 "simulated time: 12h, 30m, 90s, 1500ms, or a bare number of hours; "
                 "default: until the target steps");
  app.add_option("--checkpoint-interval", ckpt_interval,
                 "checkpoint period (bamboo, c-r)");
  app.add_option("--restart-cost", restart, "time to restart from a checkpoint");
  app.add_option("--checkpoint-cost", ckpt_cost,
                 "time a checkpoint stops training (default 0 for bamboo, 10s for c-r)");
  app.add_option("--min-stages", min_stages,
                 "bamboo policy: with fewer ready nodes than the profile's stages, one "
                 "shallower pipeline (down to this many stages) trains instead of none")
      ->check(CLI::PositiveNumber);
  app.add_option("--zones", zones,
                 "bamboo policy: instance i is in zone i mod K; each pipeline's ring "
                 "keeps a stage and its replica in different zones")
      ->check(CLI::PositiveNumber);
  app.add_option("--summary", summary_path, "summary JSON file");
  app.add_option("--series", series_path, "time series CSV file (first run)");
  app.add_option("--plot", plot_path, "SVG plot of instances, throughput and cost");
  app.add_option("--threads", threads, "parallel runs (default: cores)");
  app.add_flag("--time", timing, "print how long the runs took");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return bad(e.what());
  }

  // Options that would be silently ignored are refused.
  const bool grid_has_bamboo =
      std::find(policies.begin(), policies.end(), "bamboo") != policies.end();
  if (app.count("--redundancy") > 0 && !grid_has_bamboo)
    return bad("--redundancy applies to --policy bamboo only (bamboo-nsdi23 is the "
               "original's fixed lazy redundancy)");
  if ((app.count("--min-stages") > 0 || app.count("--zones") > 0) && !grid_has_bamboo)
    return bad("--min-stages and --zones apply to --policy bamboo only");
  if (app.count("--seeds") > 0 && !trace_path.empty())
    return bad("--seeds applies to generated traces (--generate); a --trace file has "
               "no seed");
  if (app.count("--capacity") > 0 && generate.empty())
    return bad("--capacity applies to generated traces (--generate): a --trace file "
               "says how many instances there are, and on-demand runs the profile's "
               "baseline");
  if (model == "gpt")
    model = "gpt2";

  sim_options base;
  if (!profile_path.empty()) {
    std::string err;
    auto p = load_profile(profile_path, err);
    if (!p)
      return bad(err);
    base.prof = *p;
  } else {
    base.prof = *builtin_profile(model);
  }
  if (min_stages > base.prof.stages)
    return bad("--min-stages " + std::to_string(min_stages) + " is above the profile's " +
               std::to_string(base.prof.stages) + " stages");
  base.min_stages = min_stages;
  base.zones = zones;
  std::string suffix;
  if (min_stages > 0 && min_stages < base.prof.stages)
    suffix += " S" + std::to_string(min_stages) + "-" + std::to_string(base.prof.stages);
  if (zones > 1)
    suffix += " zones " + std::to_string(zones);
  if (!duration.empty()) {
    std::int64_t ms = 0;
    if (!parse_duration(duration, ms) || ms <= 0)
      return bad("--duration '" + duration + "' is not a duration like 12h, 30m or 90s");
    base.duration_ms = ms;
  }
  std::int64_t v = 0;
  if (!parse_duration(ckpt_interval, v) || v <= 0)
    return bad("--checkpoint-interval '" + ckpt_interval + "' is not a duration");
  base.checkpoint_interval_ms = v;
  if (!parse_duration(restart, v))
    return bad("--restart-cost '" + restart + "' is not a duration");
  base.restart_ms = v;
  std::optional<std::int64_t> ckpt_cost_ms;
  if (!ckpt_cost.empty()) {
    if (!parse_duration(ckpt_cost, v))
      return bad("--checkpoint-cost '" + ckpt_cost + "' is not a duration");
    ckpt_cost_ms = v;
  }

  std::uint64_t seed_lo = 1, seed_hi = 1;
  {
    static const std::regex range(R"((\d+)(\.\.(\d+))?)");
    std::smatch m;
    if (!std::regex_match(seeds, m, range))
      return bad("--seeds '" + seeds + "' is not N or A..B");
    seed_lo = std::stoull(m[1]);
    seed_hi = m[3].matched ? std::stoull(m[3]) : seed_lo;
    if (seed_hi < seed_lo)
      return bad("--seeds range " + seeds + " is empty");
  }

  std::vector<trace_event> fixed_trace;
  generate_options gen;
  gen.capacity = capacity;
  gen.hours = base.duration_ms ? *base.duration_ms / 3.6e6 : 12;
  if (!trace_path.empty()) {
    auto t = load_trace(trace_path);
    if (!t)
      return bad(t.error);
    fixed_trace = std::move(t.events);
    seed_hi = seed_lo; // a file trace has no seed
  } else if (generate == "hourly" || generate == "random") {
    gen.random_hours = generate == "random";
  } else if (generate.rfind("removal=", 0) == 0) {
    try {
      gen.removal_per_hour = std::stod(generate.substr(8));
    } catch (const std::exception&) {
      return bad("--generate '" + generate + "': removal=P needs a probability");
    }
    if (gen.removal_per_hour < 0 || gen.removal_per_hour > 1)
      return bad("--generate removal=P needs 0 <= P <= 1");
  } else if (!generate.empty()) {
    return bad("--generate '" + generate + "' is not hourly, random or removal=P");
  } else if (!(policies.size() == 1 && policies[0] == "on-demand")) {
    return bad("give --trace FILE or --generate ...");
  }

  std::vector<run_spec> runs;
  for (std::uint64_t s = seed_lo; s <= seed_hi; ++s)
    for (const auto& p : policies) {
      auto kind = p == "bamboo"               ? policy_kind::bamboo
                  : p == "checkpoint-restart" ? policy_kind::checkpoint_restart
                  : p == "on-demand"          ? policy_kind::on_demand
                                              : policy_kind::nsdi23;
      if (kind != policy_kind::bamboo) {
        runs.push_back({kind, sim_redundancy::lazy, s, ""});
        continue;
      }
      for (const auto& r : redundancies)
        runs.push_back({kind,
                        r == "off"        ? sim_redundancy::off
                        : r == "eager"    ? sim_redundancy::eager
                        : r == "adaptive" ? sim_redundancy::adaptive
                                          : sim_redundancy::lazy,
                        s, suffix});
    }

  std::vector<sim_result> results(runs.size());
  const bool want_series = !series_path.empty() || !plot_path.empty();
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < runs.size();) {
      sim_options o = base;
      o.policy = runs[i].policy;
      o.redundancy = runs[i].redundancy;
      o.checkpoint_cost_ms = ckpt_cost_ms                                  ? *ckpt_cost_ms
                             : o.policy == policy_kind::checkpoint_restart ? 10000
                                                                           : 0;
      o.record_series = want_series && runs[i].seed == seed_lo;
      if (trace_path.empty() && o.policy != policy_kind::on_demand) {
        auto g = gen;
        g.seed = runs[i].seed;
        results[i] = simulate(generate_trace(g), o);
      } else {
        results[i] = simulate(fixed_trace, o);
      }
    }
  };
  const auto start = std::chrono::steady_clock::now();
  const int n_threads =
      threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int t = 0; t < n_threads; ++t)
    pool.emplace_back(worker);
  for (auto& t : pool)
    t.join();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("%-28s %6s %8s %10s %10s %6s %6s %9s %8s %10s %12s\n", "policy", "seed",
              "hours", "steps", "samples/s", "preempt", "fatal", "instances", "$/h",
              "value", "samples/$");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& s = results[i].summary;
    std::printf("%-28s %6llu %8.2f %10lld %10.3f %6d %6d %9.2f %8.2f %10.4f %12.1f\n",
                runs[i].label().c_str(), static_cast<unsigned long long>(runs[i].seed),
                s.hours, static_cast<long long>(s.steps), s.samples_per_s, s.preemptions,
                s.fatal_failures, s.mean_instances, s.cost_per_h, s.value,
                s.samples_per_dollar);
  }
  std::printf("value: the original simulator's time average of (samples/s) / ($/h), "
              "redone work included; samples/$: samples kept per dollar spent\n");
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (results[i].summary.steps == 0)
      std::fprintf(stderr,
                   "bamboo-sim: note: %s (seed %llu) trained no step: the trace never "
                   "held a whole pipeline of %d instances long enough\n",
                   runs[i].label().c_str(), static_cast<unsigned long long>(runs[i].seed),
                   base.prof.stages);
  if (timing)
    std::printf("timing: %zu runs in %.3f s on %d threads\n", runs.size(), took,
                n_threads);

  if (!summary_path.empty()) {
    // Always an array, one object per run, whatever the grid's size.
    std::string text = "[\n";
    for (std::size_t i = 0; i < runs.size(); ++i) {
      auto one =
          summary_json(results[i].summary, runs[i].label(), base.prof.name, runs[i].seed);
      one.pop_back(); // its newline: the comma goes after the brace
      text += one + (i + 1 < runs.size() ? ",\n" : "\n");
    }
    text += "]\n";
    if (!write_file(summary_path, text))
      return bad("cannot write '" + summary_path + "'");
  }
  if (!series_path.empty() && !write_file(series_path, series_csv(results[0].series)))
    return bad("cannot write '" + series_path + "'");
  if (!plot_path.empty()) {
    std::vector<plot_line> lines;
    // One time axis: the spot runs' span (on-demand, which has no trace to
    // end it, runs to its step target and is cut there).
    double hours = 0, on_demand_hours = 0;
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (runs[i].seed == seed_lo) {
        lines.push_back({runs[i].label(), &results[i].series});
        auto& h = runs[i].policy == policy_kind::on_demand ? on_demand_hours : hours;
        h = std::max(h, results[i].summary.hours);
      }
    if (hours <= 0)
      hours = on_demand_hours;
    if (!write_file(plot_path, plot_svg(lines, hours)))
      return bad("cannot write '" + plot_path + "'");
  }
  return 0;
}
