// bamboo-ledger verify FILE: proves from a run's --ledger file alone that every
// sample of each epoch was used exactly once by the steps that stand (rolled-back
// steps counted as rolled back), and prints the plan each run of steps had.
// Exit status: 0 exactly once, 1 a violation (each named), 2 bad input.
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "actors/plan/sample_ledger.hpp"
#include "model/data.hpp"

using namespace bamboo;

int main(int argc, char** argv) {
  CLI::App app{"bamboo-ledger: checks a bamboo run's exactly-once ledger"};
  app.require_subcommand(1);
  std::string path;
  auto* verify = app.add_subcommand("verify", "prove every sample used once per epoch");
  verify->add_option("file", path, "the ledger (bamboo-train --ledger FILE)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0)
      return app.exit(e);
    std::cerr << "bamboo-ledger: error: " << e.what() << "\n";
    return 2;
  }
  std::ifstream in(path);
  if (!in) {
    std::cerr << "bamboo-ledger: error: cannot read '" << path << "'\n";
    return 2;
  }
  std::string error;
  auto f = parse_ledger(in, error);
  if (!f) {
    std::cerr << "bamboo-ledger: error: " << path << ": " << error << "\n";
    return 2;
  }
  // The order the run used, recomputed from the header: the proof does not
  // take the run's word for which sample each position held.
  ledger_verdict v;
  try { // the sizes are bounded by the parser; this is the last line of defence
    sample_order order(f->header.seed, f->header.samples_per_epoch);
    v = verify_ledger(*f, [&](std::int64_t p) { return order.at(p); });
  } catch (const std::exception& e) {
    std::cerr << "bamboo-ledger: error: " << path << ": cannot verify: " << e.what()
              << "\n";
    return 2;
  }
  std::cout << path << ": " << v.committed << " steps stand, " << v.rolled_back
            << " rolled back by " << v.rollbacks << " rollbacks\n";
  for (const auto& e : v.epochs)
    std::cout << "  " << e << "\n";
  std::cout << "plan history:\n";
  for (const auto& p : v.plans)
    std::cout << "  " << p << "\n";
  if (!v.ok()) {
    for (const auto& p : v.problems)
      std::cout << "violation: " << p << "\n";
    return 1;
  }
  std::cout << "exactly once: every sample used at most once per epoch, no step "
               "missing\n";
  return 0;
}
