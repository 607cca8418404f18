// bamboo-train's command line: options -> train_config, one place for the names
// scripts rely on.
#pragma once

#include "actors/net/network.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/embedded_cluster.hpp"
#include "model/config.hpp"

namespace CLI {
class App;
}

namespace bamboo::app {

struct cli_options {
  train_config cfg;
  std::string metrics; // CSV path, empty for none
  std::string digests; // state digests CSV path, empty for none
  std::string ledger;  // exactly-once ledger path, empty for none
  std::string log_level = "info";
  bool quiet = false;
  bool print_schedule = false;
  run_options run;        // preemptions and detector settings
  bool processes = false; // bamboo-train --processes
  int restarts = 0;       // --processes: restarts of a lost manager, from a checkpoint
  double replace_after_s = -1;   // --processes: a killed worker's replacement, after this
  double replacement_wait_s = 0; // across processes: a rollback waits for workers
  int workers = 0;               // across processes: workers to start (0: --stages)
  int nodes = 0;                 // embedded: nodes (0: --pipelines x --stages)
  bool auto_pipelines = false;   // --pipelines auto: as many as the nodes hold
  struct join {
    long step = 0;
    int count = 1;
  };
  std::vector<join> joins; // --processes: new workers started as step K begins
  // --processes --spot-trace: workers started and removed as a spot trace says.
  std::string spot_trace;
  std::vector<std::string> zones; // --zones: launched worker i gets zones[i mod size]
  double trace_speedup = 1;
  int max_workers = 8;
  double notice_s = 0;               // > 0: SIGTERM, then kill -9 this long after
  std::vector<std::string> warnings; // options that do nothing, said once
  // The cluster's and the operator's tokens (else $BAMBOO_TOKEN and
  // $BAMBOO_OPERATOR_TOKEN, else fresh ones in a private directory).
  std::string token_file, operator_token_file;
  tls_files tls; // --processes: the manager's and every worker's (bamboo-inspect's too)
};

// The training options, bound to an app (bamboo-train's and bamboo-manager's
// share them); finish() after parsing converts and validates them, returning
// the first problem as one line.
class train_options {
public:
  train_options(CLI::App& app, cli_options& o);
  ~train_options();
  std::optional<std::string> finish();

private:
  std::optional<std::string> resolve_pipelines();
  struct strings;
  CLI::App& app_;
  cli_options& o_;
  std::unique_ptr<strings> s_;
};

// Parses argv. On --help prints usage and sets exit_code 0; on bad input prints
// one line naming the problem and sets exit_code 2. Returns nullopt in both cases.
// `model`: the trainer's own (null: --model chooses GPT or BERT).
std::optional<cli_options>
parse_cli(int argc, char** argv, int& exit_code,
          std::shared_ptr<const model_definition> model = nullptr);

} // namespace bamboo::app
