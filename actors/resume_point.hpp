// Where a run starts when it resumes or rolls back: the newest complete
// checkpoint of a directory (damaged ones skipped, each with a message), of
// this run's configuration, holding every tensor that each stage of this run's
// partition needs. Shared by embedded mode and the cluster runner.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <caf/expected.hpp>

#include "model/config.hpp"

namespace bamboo {

struct checkpoint;
class token_corpus;

struct checkpoint_options {
  std::string dir;
  int every = 0; // steps between checkpoints; 0: none
  int keep = 0;  // the newest kept; 0: all
  bool resume = false;
};

// The options' mistakes, in the command line's words; creates the directory
// when checkpoints are to be written there.
std::optional<std::string> check(const checkpoint_options& o);

// `what` names the reason in errors ("--resume", "rollback"). A directory that
// is missing or holds no checkpoint at all gives nullptr: step 0, whose state is
// a pure function of the seed (one launch script may always pass --resume).
caf::expected<std::shared_ptr<const checkpoint>>
resume_point(const train_config& cfg, const std::string& dir,
             const std::shared_ptr<const token_corpus>& corpus, const std::string& what);

// The checkpoint in one step directory (a worker's assignment names it),
// checked against this run's configuration.
caf::expected<std::shared_ptr<const checkpoint>>
checkpoint_at(const train_config& cfg, const std::string& step_dir);

// Where a rollback for `loss` (a loss shadows could not cover) goes on from:
// the newest intact checkpoint, else nullptr (step 0, from the seed: it always
// counts as one); the loss, unrecoverable, only when the directory holds an
// intact checkpoint this run cannot load (another configuration).
caf::expected<std::shared_ptr<const checkpoint>>
rollback_point(const train_config& cfg, const std::string& dir,
               const std::shared_ptr<const token_corpus>& corpus, const caf::error& loss);

// Where re-plans put the state the next plan starts from: DIR/replan under the
// checkpoint directory (which every worker reaches), else a scratch directory;
// removed when the run ends.
class replan_dir {
public:
  explicit replan_dir(const std::string& checkpoint_dir);
  ~replan_dir();
  replan_dir(const replan_dir&) = delete;
  replan_dir& operator=(const replan_dir&) = delete;
  const std::string& path() const { return path_; }
  const std::string& problem() const { return problem_; } // empty: usable

private:
  std::string path_, problem_;
};

} // namespace bamboo
