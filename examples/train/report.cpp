#include "examples/train/report.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "actors/errors.hpp"
#include "actors/plan/sample_ledger.hpp"
#include "examples/cluster/status.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/safetensors.hpp"

namespace bamboo::app {

// Each line is written at once: a failed write shows at once.
void run_report::put(record_file& f, const std::string& line, const char* what,
                     const std::string& file) {
  if (f.write(line) || !write_error_.empty())
    return;
  write_error_ = std::string("cannot write ") + what + " file '" + file +
                 "': " + std::strerror(errno);
  status::say(std::string(program_) + ": error: " + write_error_);
}

bool run_report::open(const char* program) {
  program_ = program;
  if (!open_ledger(program))
    return false;
  if (o_.metrics.empty())
    return true;
  // A resumed run goes on with the rows of the run it resumes.
  std::string error;
  if (!metrics_.open(o_.metrics, o_.run.checkpoints.resume, error)) {
    std::cerr << program << ": error: cannot write metrics file '" << o_.metrics
              << "': " << error << "\n";
    return false;
  }
  if (metrics_.size_at_open() == 0 &&
      !metrics_.write(
          "step,loss,samples_per_s,generation,lr,grad_norm,seconds,event\n")) {
    std::cerr << program << ": error: cannot write metrics file '" << o_.metrics
              << "': " << std::strerror(errno) << "\n";
    return false;
  }
  return true;
}

// The header names what the verifier needs to recompute the sample order.
// A new run starts a new ledger; a resumed one appends to its own.
bool run_report::open_ledger(const char* program) {
  if (o_.ledger.empty())
    return true;
  const auto& cfg = o_.cfg;
  std::string problem;
  auto corpus = token_corpus::load(cfg.data, cfg.model, cfg.seed, problem);
  if (!corpus) {
    std::cerr << program << ": error: " << problem << "\n";
    return false;
  }
  // A resumed run goes on with the ledger of the run it resumes.
  std::string error;
  if (!ledger_.open(o_.ledger, o_.run.checkpoints.resume, error)) {
    std::cerr << program << ": error: cannot write ledger file '" << o_.ledger
              << "': " << error << "\n";
    return false;
  }
  ledger_header h{cfg.seed, sample_count(*corpus, cfg.model), cfg.global_batch};
  if (!ledger_.write(format_header(h) + "\n")) {
    std::cerr << program << ": error: cannot write ledger file '" << o_.ledger
              << "': " << std::strerror(errno) << "\n";
    return false;
  }
  return true;
}

void run_report::on_step(const step_record& r) {
  // A resumed run undoes what its predecessor committed after the checkpoint.
  if (o_.run.checkpoints.resume && !resumed_) {
    resumed_ = true;
    if (ledger_.is_open())
      put(ledger_,
          format_rollback(
              {r.step, "resumed from the checkpoint of step " + std::to_string(r.step)}) +
              "\n",
          "ledger", o_.ledger);
  }
  elapsed_ += r.seconds;
  if (ledger_.is_open()) {
    const std::int64_t g = o_.cfg.global_batch;
    ledger_commit c{r.step,           r.generation, r.step * g,
                    (r.step + 1) * g, r.owners,     r.shadows};
    put(ledger_, format_commit(c) + "\n", "ledger", o_.ledger);
  }
  if (metrics_.is_open()) {
    char line[256];
    std::snprintf(line, sizeof(line), "%lld,%.17g,%.3f,%llu,%.6g,%.6g,%.6f,%s\n",
                  static_cast<long long>(r.step), r.loss, r.samples_per_s,
                  static_cast<unsigned long long>(r.generation), r.lr, r.grad_norm,
                  r.seconds, r.event.c_str());
    put(metrics_, line, "metrics", o_.metrics);
  }
  if (!o_.quiet) {
    const auto& cfg = o_.cfg;
    const double eta = elapsed_ / (r.step + 1) * (cfg.steps - r.step - 1);
    // Steps count from 0 everywhere (logs, the CSV, --preempt); "(16/60)" says
    // how far the run is.
    std::printf("step %lld (%lld/%d)  loss %.4f  samples/s %.1f  eta %.1fs%s%s\n",
                static_cast<long long>(r.step), static_cast<long long>(r.step + 1),
                cfg.steps, r.loss, r.samples_per_s, eta, r.event.empty() ? "" : "  ",
                r.event.c_str());
    std::fflush(stdout);
  }
}

void run_report::on_rollback(std::int64_t to_step, const std::string& why) {
  if (ledger_.is_open()) {
    put(ledger_, format_rollback({to_step, why}) + "\n", "ledger", o_.ledger);
  }
  std::printf("rolled back to the checkpoint of step %lld: %s\n",
              static_cast<long long>(to_step), why.c_str());
  std::fflush(stdout);
}

void run_report::on_replan(std::int64_t step, const std::string& why) {
  std::printf("a new plan from step %lld: %s\n", static_cast<long long>(step),
              why.c_str());
  std::fflush(stdout);
}

void run_report::summary(const run_result& r) const {
  const auto& cfg = o_.cfg;
  const auto& steps = r.steps;
  if (steps.empty())
    return;
  int fwd = 0, bwd = 0;
  std::string latencies;
  for (const auto& f : r.failovers) {
    fwd += f.recomputed_forwards;
    bwd += f.recomputed_backwards;
    char buf[320];
    std::snprintf(buf, sizeof(buf), "%s%.3f s (node %d, step %lld, %s)",
                  latencies.empty() ? "" : ", ", f.latency_s, f.node,
                  static_cast<long long>(f.step), describe(f).c_str());
    latencies += buf;
  }
  const double mean_step = elapsed_ / steps.size();
  std::printf("summary: %zu steps, loss %.4f -> %.4f, %.1f samples/s overall\n",
              steps.size(), steps.front().loss, steps.back().loss,
              elapsed_ > 0 ? cfg.global_batch * steps.size() / elapsed_ : 0.0);
  const std::string by_rollback =
      r.rollback_losses > 0
          ? " (" + std::to_string(r.failovers.size()) + " by failover, " +
                std::to_string(r.rollback_losses) + " by rollback)"
          : "";
  std::printf("summary: redundancy %s, %zu preemption(s) survived%s, %d forwards + %d "
              "backwards recomputed (micro-batch passes), mean step %.3f s\n",
              to_string(cfg.redundancy),
              r.failovers.size() + static_cast<std::size_t>(r.rollback_losses),
              by_rollback.c_str(), fwd, bwd, mean_step);
  for (const auto& f : r.checkpoint_failures)
    std::printf("summary: checkpoint not written: %s\n", f.c_str());
  const auto& last = steps.back();
  if (!last.owners.empty()) {
    std::string where;
    for (std::size_t s = 0; s < last.owners.size(); ++s) {
      // Several pipelines: owners are listed p*S+s.
      const std::size_t per = static_cast<std::size_t>(cfg.stages);
      const bool many = (cfg.pipelines > 1 || o_.auto_pipelines) &&
                        last.owners.size() > per && last.owners.size() % per == 0;
      where += (s ? ", " : "") +
               (many ? "pipeline " + std::to_string(s / per) + " stage " +
                           std::to_string(s % per)
                     : "stage " + std::to_string(s)) +
               " on node " + std::to_string(last.owners[s]);
      if (s < last.shadows.size() && last.shadows[s] >= 0)
        where += " (shadow on " + std::to_string(last.shadows[s]) + ")";
    }
    std::printf("summary: at the end, %s\n", where.c_str());
  }
  if (r.rollbacks > 0)
    std::printf("summary: %d rollback(s) to a checkpoint, for losses shadows could not "
                "cover\n",
                r.rollbacks);
  if (r.replans > 0)
    std::printf("summary: %d new plan(s) at step boundaries, to take in standby "
                "workers\n",
                r.replans);
  if (!r.failovers.empty())
    std::printf("summary: failover latency, loss to step completion: %s\n",
                latencies.c_str());
  std::fflush(stdout);
}

bool run_report::write_digests(const char* program, const run_result& r) const {
  if (o_.digests.empty())
    return true;
  std::string out = "role,name,count,digest\n";
  auto rows = [&](const char* role, const std::vector<schema::tensor_digest>& ds) {
    char hex[17];
    for (const auto& d : ds) {
      std::snprintf(hex, sizeof(hex), "%016llx",
                    static_cast<unsigned long long>(d.digest));
      out += std::string(role) + ',' + d.name + ',' + std::to_string(d.count) + ',' +
             hex + '\n';
    }
  };
  rows("owner", r.digests);
  rows("shadow", r.shadow_digests);
  // A new file renamed into place: a link planted at the name is replaced,
  // never followed.
  std::string error;
  if (!write_file_atomically(o_.digests,
                             std::vector<std::uint8_t>(out.begin(), out.end()), error)) {
    std::cerr << program << ": error: cannot write state digests to '" << o_.digests
              << "': " << error << "\n";
    return false;
  }
  return true;
}

int failure_status(const char* program, const caf::error& err) {
  const auto code = static_cast<errc>(err.code());
  const bool ours = err.category() == error_category;
  if (ours && code == errc::unrecoverable_failure) {
    status::say(std::string(program) + ": fatal: " + describe(err));
    return 3;
  }
  const bool bad_input =
      ours && (code == errc::invalid_config || code == errc::invalid_data);
  status::say(std::string(program) + ": error: " + describe(err));
  return bad_input ? 2 : 1;
}

int stopped_status(const char* program, const run_result& r,
                   const std::string& checkpoint_dir) {
  const std::int64_t next = r.steps.empty() ? 0 : r.steps.back().step + 1;
  std::string where = "no checkpoint (no --checkpoint-dir)";
  if (!checkpoint_dir.empty()) {
    const auto dir = checkpoint_step_dir(checkpoint_dir, next);
    where = std::filesystem::exists(std::filesystem::path(dir) / "manifest.json")
                ? "its checkpoint: " + dir + " (--resume goes on from there)"
                : "no checkpoint of that step; --resume takes the newest in " +
                      checkpoint_dir;
  }
  status::say(
      std::string(program) + ": stopped by signal " + std::to_string(r.stopped_by) +
      (r.stopped_abandoned ? " (the step in flight did not finish in time)" : "") +
      " after step " + std::to_string(next - 1) + "; " + where);
  return 128 + r.stopped_by;
}

} // namespace bamboo::app
