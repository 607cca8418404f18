#include "examples/train/cli.hpp"

#include "actors/net/network.hpp"

#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>

#include "model/model_definition.hpp"

namespace bamboo::app {

struct train_options::strings {
  std::string model = "gpt";
  std::string redundancy = "lazy";
  std::string transport = "local";
  std::vector<std::string> preempt;
  std::string pipelines = "1";
  int heartbeat_ms = 0;
  double progress_timeout_s = 30;
  double manager_timeout_s = 10;
};

train_options::train_options(CLI::App& app, cli_options& o)
    : app_(app), o_(o), s_(std::make_unique<strings>()) {
  auto& c = o.cfg;
  auto& m = c.model;
  auto& model = s_->model;
  // A later option overrides an earlier one (.ci/demo passes defaults that a
  // user's own options replace); only --preempt collects every value.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--model", model, "gpt or bert")
      ->check(CLI::IsMember({"gpt", "bert"}))
      ->capture_default_str();
  app.add_option("--stages", c.stages, "pipeline stages S")->capture_default_str();
  app.add_option("--pipelines", s_->pipelines,
                 "data-parallel pipelines P, or auto (as many as --nodes hold); each "
                 "runs G/P of every step's samples and the stages sum their gradients")
      ->capture_default_str();
  app.add_option("--nodes", o.nodes,
                 "embedded: nodes, a stage of one pipeline each (default P x S)")
      ->check(CLI::PositiveNumber);
  app.add_option("--micro-batch", c.micro_batch, "samples per micro-batch m")
      ->capture_default_str();
  app.add_option("--global-batch", c.global_batch, "samples per step G")
      ->capture_default_str();
  app.add_option("--steps", c.steps, "optimizer steps")->capture_default_str();
  app.add_option("--seed", c.seed, "seed of data order, init and dropout")
      ->capture_default_str();
  app.add_option("--data", c.data, "synthetic, a uint16 .bin token file, or a text file")
      ->capture_default_str();
  app.add_option("--threads", c.threads, "intra-op threads per stage")
      ->capture_default_str();
  app.add_option("--metrics", o.metrics, "per-step metrics CSV file");
  app.add_option("--ledger", o.ledger,
                 "append each committed step (plan, sample range) to this file, for "
                 "bamboo-ledger verify");
  app.add_option("--state-digests", o.digests,
                 "write a digest of every final tensor (owners and shadows) to this CSV");
  app.add_option("--layers", m.layers, "transformer blocks")->capture_default_str();
  app.add_option("--d-model", m.d_model, "model width")->capture_default_str();
  app.add_option("--heads", m.heads, "attention heads")->capture_default_str();
  app.add_option("--seq-len", m.seq_len, "tokens per sample")->capture_default_str();
  app.add_option("--vocab", m.vocab, "vocabulary size")->capture_default_str();
  app.add_option("--dropout", m.dropout, "dropout probability")->capture_default_str();
  app.add_option("--lr", c.optim.lr, "peak learning rate")->capture_default_str();
  app.add_option("--warmup", c.optim.warmup_steps, "warm-up steps")
      ->capture_default_str();
  app.add_option("--weight-decay", c.optim.weight_decay, "AdamW weight decay")
      ->capture_default_str();
  app.add_option("--clip", c.optim.clip_norm, "global gradient-norm clip, 0 = off")
      ->capture_default_str();
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  app.add_flag("--quiet", o.quiet, "no progress lines");
  app.add_option("--redundancy", s_->redundancy, "off, lazy or eager")
      ->check(CLI::IsMember({"off", "lazy", "eager"}))
      ->capture_default_str();
  app.add_option("--transport", s_->transport,
                 "local (in-process hand-off) or gloo (c10d Gloo over 127.0.0.1)")
      ->check(CLI::IsMember({"local", "gloo"}))
      ->capture_default_str();
  app.add_option(
         "--preempt", s_->preempt,
         "inject a preemption: node=N@step=K[.op=J] or rate=R (kills per 100 steps)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--print-schedule", o.print_schedule,
               "print each stage's instruction timeline for one step and exit");
  s_->heartbeat_ms = static_cast<int>(o.run.heartbeats.period.count());
  app.add_option("--heartbeat-ms", s_->heartbeat_ms, "failure detector heartbeat period")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--heartbeat-misses", o.run.heartbeats.misses,
                 "missed heartbeats before a node is declared lost")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s_->progress_timeout_s =
      std::chrono::duration<double>(o.run.heartbeats.progress).count();
  app.add_option("--progress-timeout-s", s_->progress_timeout_s,
                 "during a recovery, how long a live node may take to report what it "
                 "has done of the step before it is declared lost")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s_->manager_timeout_s =
      std::chrono::duration<double>(o.run.heartbeats.manager_timeout).count();
  app.add_option("--manager-timeout-s", s_->manager_timeout_s,
                 "how long a worker waits on a silent manager (stopped, or cut off) "
                 "before it leaves; a closed connection is noticed at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--checkpoint-dir", o.run.checkpoints.dir,
                 "directory of checkpoints (one step-NNNNNNNN/ each)");
  app.add_option("--checkpoint-every", o.run.checkpoints.every,
                 "write a checkpoint every N steps, in the background")
      ->check(CLI::PositiveNumber);
  app.add_option("--keep", o.run.checkpoints.keep,
                 "keep the newest K complete checkpoints (default: all; --resume skips a "
                 "damaged newest one for the one before)")
      ->check(CLI::PositiveNumber);
  app.add_option("--replacement-wait-s", o.replacement_wait_s,
                 "across processes: a rollback to a checkpoint waits up to this long "
                 "for new workers to bring the cluster back to --stages")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--replace-after-s", o.replace_after_s,
                 "a killed node's replacement (a new spot instance) is ready this long "
                 "after the kill: a new worker process with --processes, a new node "
                 "embedded; it takes a stage at the next step boundary")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--workers", o.workers,
                 "across processes: workers to wait for before the first step (default "
                 "--stages; the others are standby and take a stage at a step boundary "
                 "when a node runs two)")
      ->check(CLI::PositiveNumber);
  app.add_option("--min-stages", o.run.depths.min,
                 "re-partition the layers over fewer stages (down to this many) when a "
                 "failover leaves a node running two and no node is standby (default "
                 "--stages: never)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-stages", o.run.depths.max,
                 "the deepest pipeline a new plan may have when standby workers "
                 "return (default --stages)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--resume", o.run.checkpoints.resume,
               "start from the newest complete checkpoint in --checkpoint-dir (any "
               "number of stages)");
}

train_options::~train_options() = default;

std::optional<std::string> train_options::finish() {
  auto& c = o_.cfg;
  c.model.kind = s_->model == "bert" ? model_kind::bert : model_kind::gpt;
  c.redundancy = s_->redundancy == "off"     ? redundancy_mode::off
                 : s_->redundancy == "eager" ? redundancy_mode::eager
                                             : redundancy_mode::lazy;
  o_.run.heartbeats.period = std::chrono::milliseconds(s_->heartbeat_ms);
  o_.run.heartbeats.progress =
      std::chrono::milliseconds(static_cast<long>(s_->progress_timeout_s * 1000));
  if (o_.replace_after_s >= 0)
    o_.run.replace_after =
        std::chrono::milliseconds(static_cast<long>(o_.replace_after_s * 1000));
  o_.run.heartbeats.manager_timeout =
      std::chrono::milliseconds(static_cast<long>(s_->manager_timeout_s * 1000));
  o_.run.collect_digests = !o_.digests.empty();
  o_.run.transport =
      s_->transport == "gloo" ? transport_kind::gloo : transport_kind::local;
  for (const auto& p : s_->preempt)
    if (auto problem = parse_preempt(p, o_.run.preemptions, o_.run.preempt_rate))
      return problem;
  if (c.steps < 1)
    return "--steps must be 1 or more (got " + std::to_string(c.steps) + ")";
  if (c.custom_model) // the trainer's model has its own sizes and data
    for (const char* o : {"--model", "--layers", "--d-model", "--heads", "--seq-len",
                          "--vocab", "--dropout", "--data"})
      if (app_.count(o) > 0)
        return std::string(o) + " is for the built-in models: this program trains its " +
               "own model '" + c.custom_model->name() + "'";
  if (auto problem = resolve_pipelines())
    return problem;
  if (o_.run.checkpoints.keep == 1)
    o_.warnings.push_back("--keep 1 leaves a single checkpoint: one damaged file then "
                          "leaves --resume nothing to resume from (2 or more is safer)");
  // A warning, not an error: the demo's kills stay valid with a shorter --steps.
  for (const auto& k : o_.run.preemptions)
    if (k.step >= c.steps)
      o_.warnings.push_back("--preempt node=" + std::to_string(k.node) +
                            "@step=" + std::to_string(k.step) + ": step " +
                            std::to_string(k.step) + " is past the run (" +
                            std::to_string(c.steps) + " steps, 0 to " +
                            std::to_string(c.steps - 1) + "): it will not happen");
  if (auto problem = check(o_.run.checkpoints))
    return problem;
  if (o_.workers > 0 && o_.workers < c.stages)
    return "--workers " + std::to_string(o_.workers) + " is below --stages " +
           std::to_string(c.stages) + ": every stage needs a worker";
  if (auto problem = validate(c))
    return problem;
  if (c.pipelines > 1 && (o_.run.depths.min > 0 || o_.run.depths.max > 0))
    return std::string("--min-stages and --max-stages re-partition one pipeline: they "
                       "cannot be combined with --pipelines above 1");
  return check_depths(o_.run.depths, c.stages, c.model_layers(), 1);
}

std::optional<std::string> train_options::resolve_pipelines() {
  auto& c = o_.cfg;
  const auto& given = s_->pipelines;
  const auto n = [](int v) { return std::to_string(v); };
  o_.auto_pipelines = given == "auto";
  if (!o_.auto_pipelines) {
    std::size_t used = 0;
    int p = 0;
    try {
      p = std::stoi(given, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != given.size() || p < 1)
      return "--pipelines '" + given + "': a positive number or auto";
    c.pipelines = p;
  }
  if (c.stages < 1)
    return std::nullopt; // validate() says so
  if (o_.auto_pipelines) {
    // Embedded: --nodes; across processes: the workers of the first plan.
    const int nodes = o_.nodes > 0 ? o_.nodes : o_.workers > 0 ? o_.workers : c.stages;
    const std::string given_nodes = o_.nodes > 0 ? "--nodes " : "--workers ";
    c.pipelines = nodes / c.stages;
    if (c.pipelines < 1)
      return given_nodes + n(nodes) + " cannot hold one pipeline of --stages " +
             n(c.stages);
    if (o_.nodes > 0 && nodes % c.stages != 0)
      o_.warnings.push_back("--pipelines auto: " + n(c.pipelines) + " pipeline(s) of " +
                            n(c.stages) + " stages on --nodes " + n(nodes) + "; " +
                            n(nodes % c.stages) +
                            " node(s) stay idle (embedded mode has no standby nodes)");
    return std::nullopt;
  }
  if (c.pipelines > 1 && o_.workers > 0 && o_.workers < c.coordinates())
    return "--workers " + n(o_.workers) + " cannot hold --pipelines " + n(c.pipelines) +
           " x --stages " + n(c.stages);
  if (o_.nodes > 0 && o_.nodes != c.coordinates())
    return "--nodes " + n(o_.nodes) + " does not hold --pipelines " + n(c.pipelines) +
           " x --stages " + n(c.stages) + " (a node per stage of each pipeline; " +
           "--pipelines auto takes as many as fit)";
  return std::nullopt;
}

namespace {

// "step=K[,count=C]": C new workers as step K begins.
std::optional<std::string> parse_join(const std::string& text, long steps,
                                      std::vector<cli_options::join>& out) {
  cli_options::join j;
  long step = -1, count = 1;
  char tail = 0;
  const int n = std::sscanf(text.c_str(), "step=%ld,count=%ld%c", &step, &count, &tail);
  if (!(n == 2 || (n == 1 && std::sscanf(text.c_str(), "step=%ld%c", &step, &tail) == 1)))
    return "--join " + text + ": expected step=K or step=K,count=C";
  if (step < 0 || count < 1 || count > 64)
    return "--join " + text + ": K must be 0 or more and C from 1 to 64";
  if (step >= steps)
    return "--join " + text + ": step " + std::to_string(step) + " is past the run (" +
           std::to_string(steps) + " steps, 0 to " + std::to_string(steps - 1) + ")";
  j.step = step;
  j.count = static_cast<int>(count);
  out.push_back(j);
  return std::nullopt;
}

} // namespace

std::optional<cli_options> parse_cli(int argc, char** argv, int& exit_code,
                                     std::shared_ptr<const model_definition> model) {
  cli_options o;
  o.cfg.custom_model = std::move(model);
  CLI::App app{"bamboo-train: pipeline-parallel training that survives preemptions"};
  train_options options(app, o);
  app.add_flag("--processes", o.processes,
               "run the cluster as real processes on 127.0.0.1: a bamboo-manager and "
               "one bamboo-worker per stage");
  app.add_option("--restarts", o.restarts,
                 "with --processes: when the manager is lost, start the cluster again "
                 "from the newest checkpoint, up to this many times")
      ->check(CLI::NonNegativeNumber);
  std::vector<std::string> joins;
  app.add_option("--join", joins,
                 "with --processes: start C new workers as step K begins, "
                 "step=K[,count=C] (new spot instances; standby until a re-plan)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  std::string zones;
  app.add_option("--zones", zones,
                 "with --processes: launched worker i (node i) is in zone "
                 "LIST[i mod length], e.g. a,a,b,b; stages and their replicas are "
                 "placed in different zones where the zones allow it");
  app.add_option("--spot-trace", o.spot_trace,
                 "with --processes: start and remove workers as this spot trace "
                 "(delta_ms,add|remove,node) adds and removes instances");
  app.add_option("--trace-speedup", o.trace_speedup,
                 "trace time runs this many times faster than wall time")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-workers", o.max_workers,
                 "worker slots the trace's instances are mapped onto (first come, "
                 "first served; the others are left out)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--notice-s", o.notice_s,
                 "a removed instance's worker gets SIGTERM and kill -9 this many "
                 "(wall) seconds later; 0: kill -9 at once")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--token-file", o.token_file,
                 "the cluster token's file (else $BAMBOO_TOKEN, else a fresh one)");
  app.add_option("--operator-token-file", o.operator_token_file,
                 "the operator token's file, which bamboo-inspect needs for commands "
                 "(else $BAMBOO_OPERATOR_TOKEN, else a fresh one)");
  app.add_option("--tls-cert", o.tls.cert,
                 "with --processes: TLS between the manager and the workers, this "
                 "certificate (PEM) for each of them");
  app.add_option("--tls-key", o.tls.key, "with --processes: its private key (PEM)");
  app.add_option("--tls-ca", o.tls.ca, "with --processes: the CA that signed it (PEM)");
  int inspect_port = -1;
  app.add_option("--inspect-port", inspect_port,
                 "embedded: bamboo-inspect may attach at 127.0.0.1:PORT (0: any free "
                 "port; the address and a fresh token file are printed)")
      ->check(CLI::Range(0, 65535));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    exit_code = app.exit(e);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    std::cerr << "bamboo-train: error: " << e.what() << "\n";
    exit_code = 2;
    return std::nullopt;
  }
  auto problem = options.finish();
  if (!problem && !zones.empty()) {
    std::size_t start = 0;
    for (std::size_t i = 0; i <= zones.size(); ++i)
      if (i == zones.size() || zones[i] == ',') {
        o.zones.push_back(zones.substr(start, i - start));
        start = i + 1;
      }
    for (const auto& z : o.zones)
      if (z.empty() || z.find_first_of(" \t") != std::string::npos)
        problem = "--zones '" + zones + "': a comma-separated list of zone names";
    if (!problem && !o.processes)
      problem = "--zones is for --processes (the zones of worker processes)";
  }
  if (!problem && o.tls.enabled() && !o.processes)
    problem = "--tls-cert, --tls-key and --tls-ca are for --processes (an embedded run "
              "has no connection between processes but --inspect-port's, behind the "
              "door)";
  if (!problem && o.tls.enabled())
    if (auto bad = check_tls(o.tls))
      problem = *bad;
  for (const auto& j : joins)
    if (!problem)
      problem = parse_join(j, o.cfg.steps, o.joins);
  if (!problem && !o.processes &&
      (o.workers > 0 || !o.joins.empty() || !o.spot_trace.empty()))
    problem = "--workers, --join and --spot-trace are for --processes (worker processes)";
  // (--stages 1 has a message of its own.)
  if (!problem && o.processes && o.cfg.stages >= 2)
    problem = check_depths(o.run.depths, o.cfg.stages, o.cfg.model_layers(), 2);
  if (!problem && inspect_port >= 0) {
    if (o.processes)
      problem = "--inspect-port is for embedded runs; with --processes attach to the "
                "manager's own port (bamboo-train prints it)";
    o.run.inspect.enabled = true;
    o.run.inspect.port = static_cast<std::uint16_t>(inspect_port);
  }
  if (!problem && o.processes && o.nodes > 0)
    problem = "--nodes is for embedded mode; worker processes are counted by --workers";
  if (!problem && o.processes && app.count("--transport") > 0 &&
      o.run.transport == transport_kind::local)
    problem = "--transport local hands tensors over inside one process; worker "
              "processes use gloo";
  if (!problem && !o.spot_trace.empty() && (o.workers > 0 || o.restarts > 0))
    problem = "--spot-trace starts the workers its trace has at time 0: give neither "
              "--workers nor --restarts with it";
  if (!problem && !o.spot_trace.empty() && o.max_workers < o.cfg.stages)
    problem = "--max-workers " + std::to_string(o.max_workers) + " is below --stages " +
              std::to_string(o.cfg.stages);
  if (problem) {
    std::cerr << "bamboo-train: error: " << *problem << "\n";
    exit_code = 2;
    return std::nullopt;
  }
  for (const auto& w : o.warnings)
    std::cerr << "bamboo-train: warning: " << w << "\n";
  return o;
}

} // namespace bamboo::app
