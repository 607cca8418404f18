#include "examples/train/cli.hpp"

#include <iostream>

#include <CLI/CLI.hpp>

namespace bamboo::app {

std::optional<cli_options> parse_cli(int argc, char** argv, int& exit_code) {
  cli_options o;
  auto& c = o.cfg;
  auto& m = c.model;
  CLI::App app{"bamboo-train: pipeline-parallel training that survives preemptions"};
  std::string model = "gpt";
  app.add_option("--model", model, "gpt or bert")
      ->check(CLI::IsMember({"gpt", "bert"}))
      ->capture_default_str();
  app.add_option("--stages", c.stages, "pipeline stages S")->capture_default_str();
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
  std::string redundancy = "lazy";
  app.add_option("--redundancy", redundancy, "off, lazy or eager")
      ->check(CLI::IsMember({"off", "lazy", "eager"}))
      ->capture_default_str();
  std::string transport = "local";
  app.add_option("--transport", transport,
                 "local (in-process hand-off) or gloo (c10d Gloo over 127.0.0.1)")
      ->check(CLI::IsMember({"local", "gloo"}))
      ->capture_default_str();
  std::vector<std::string> preempt;
  app.add_option(
      "--preempt", preempt,
      "inject a preemption: node=N@step=K[.op=J] or rate=R (kills per 100 steps)");
  app.add_flag("--print-schedule", o.print_schedule,
               "print each stage's instruction timeline for one step and exit");
  int heartbeat_ms = static_cast<int>(o.run.heartbeat_period.count());
  app.add_option("--heartbeat-ms", heartbeat_ms, "failure detector heartbeat period")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--heartbeat-misses", o.run.heartbeat_misses,
                 "missed heartbeats before a node is declared lost")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
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
  m.kind = model == "bert" ? model_kind::bert : model_kind::gpt;
  c.redundancy = redundancy == "off"     ? redundancy_mode::off
                 : redundancy == "eager" ? redundancy_mode::eager
                                         : redundancy_mode::lazy;
  o.run.heartbeat_period = std::chrono::milliseconds(heartbeat_ms);
  o.run.transport = transport == "gloo" ? transport_kind::gloo : transport_kind::local;
  for (const auto& p : preempt)
    if (auto problem = parse_preempt(p, o.run.preemptions, o.run.preempt_rate)) {
      std::cerr << "bamboo-train: error: " << *problem << "\n";
      exit_code = 2;
      return std::nullopt;
    }
  if (auto problem = validate(c)) {
    std::cerr << "bamboo-train: error: " << *problem << "\n";
    exit_code = 2;
    return std::nullopt;
  }
  return o;
}

} // namespace bamboo::app
