#include "actors/resume_point.hpp"

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "actors/errors.hpp"
#include "log/log.hpp"
#include "model/checkpoint.hpp"
#include "model/model.hpp"
#include "model/partition.hpp"
#include "model/stage_executor.hpp"

namespace bamboo {

std::optional<std::string> check(const checkpoint_options& o) {
  if ((o.every > 0 || o.resume) && o.dir.empty())
    return "--checkpoint-every and --resume need --checkpoint-dir";
  if (o.every < 0 || o.keep < 0)
    return "--checkpoint-every and --keep must not be negative";
  if (!o.dir.empty()) { // the run's last step is checkpointed there too
    std::error_code ec;
    std::filesystem::create_directories(o.dir, ec);
    if (ec || !std::filesystem::is_directory(o.dir))
      return "--checkpoint-dir: cannot create the directory " + o.dir + ": " +
             (ec ? ec.message() : std::string("a file is in the way"));
  }
  return std::nullopt;
}

namespace {

// "... is of another configuration (...)", or nullopt when `c` is this run's.
std::optional<std::string> other_config(const train_config& cfg, const checkpoint& c) {
  if (c.config == checkpoint_config(cfg))
    return std::nullopt;
  return " is of another configuration (" + c.config +
         "; this run: " + checkpoint_config(cfg) + ")";
}

} // namespace

caf::expected<std::shared_ptr<const checkpoint>>
checkpoint_at(const train_config& cfg, const std::string& step_dir) {
  std::string problem;
  auto c = load_checkpoint_dir(step_dir, problem);
  if (!c)
    return make_error(errc::invalid_config, "checkpoint " + step_dir + ": " + problem);
  if (auto other = other_config(cfg, *c))
    return make_error(errc::invalid_config, "checkpoint " + step_dir + *other);
  return std::shared_ptr<const checkpoint>(std::make_shared<checkpoint>(std::move(*c)));
}

namespace {

// The newest intact checkpoint of `dir`, checked against this run; `none_intact`
// says whether the failure is that none is intact (a rollback then starts over).
caf::expected<std::shared_ptr<const checkpoint>>
newest_point(const train_config& cfg, const std::string& dir,
             const std::shared_ptr<const token_corpus>& corpus, const std::string& what,
             bool& none_intact) {
  auto logger = log::get("bamboo.checkpoint");
  std::vector<std::string> skipped;
  std::string error;
  // A checkpoint of this run's configuration that lacks a stage's tensors (a
  // manifest that agrees with itself without one file) is passed over like a
  // damaged one; one of another configuration is the user's mistake, named.
  const auto parts = partition(model_of(cfg, corpus)->layer_costs(), cfg.stages);
  auto incomplete = [&](const checkpoint& c) -> std::string {
    if (other_config(cfg, c))
      return {};
    for (int s = 0; s < cfg.stages; ++s) {
      auto problem = stage_executor(cfg, s, parts[s], corpus).load_checkpoint(c);
      if (!problem.empty())
        return "stage " + std::to_string(s) + ": " + problem;
    }
    return {};
  };
  auto c = load_latest_checkpoint(dir, skipped, error, incomplete);
  for (const auto& s : skipped)
    logger->warn("{}", s);
  none_intact = !c;
  if (!c)
    return make_error(errc::invalid_data, what + ": " + error);
  if (auto other = other_config(cfg, *c))
    return make_error(errc::invalid_config, what + ": the checkpoint of step " +
                                                std::to_string(c->step) + *other);
  if (c->step >= cfg.steps)
    return make_error(errc::invalid_config,
                      what + ": the checkpoint is of step " + std::to_string(c->step) +
                          ", and --steps " + std::to_string(cfg.steps) +
                          " leaves nothing to run");
  logger->info("{}: step {} from {} ({} tensors)", what, c->step, dir, c->tensors.size());
  return std::shared_ptr<const checkpoint>(std::make_shared<checkpoint>(std::move(*c)));
}

} // namespace

caf::expected<std::shared_ptr<const checkpoint>>
resume_point(const train_config& cfg, const std::string& dir,
             const std::shared_ptr<const token_corpus>& corpus, const std::string& what) {
  if (checkpoint_dirs(dir) == 0) {
    log::get("bamboo.checkpoint")
        ->info("{}: no checkpoint in {}: starting at step 0", what, dir);
    return std::shared_ptr<const checkpoint>{};
  }
  bool none_intact = false;
  return newest_point(cfg, dir, corpus, what, none_intact);
}

caf::expected<std::shared_ptr<const checkpoint>>
rollback_point(const train_config& cfg, const std::string& dir,
               const std::shared_ptr<const token_corpus>& corpus,
               const caf::error& loss) {
  bool none_intact = false;
  auto point = newest_point(cfg, dir, corpus, "rollback", none_intact);
  if (point)
    return point;
  if (none_intact) {
    log::get("bamboo.checkpoint")
        ->warn("{}; step 0 (the seed's initial state) counts as one",
               describe(point.error()));
    return std::shared_ptr<const checkpoint>{};
  }
  return make_error(errc::unrecoverable_failure, describe(loss) +
                                                     "; no checkpoint to roll back to (" +
                                                     describe(point.error()) + ")");
}

replan_dir::replan_dir(const std::string& checkpoint_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!checkpoint_dir.empty()) {
    path_ = (fs::path(checkpoint_dir) / "replan").string();
    fs::create_directories(path_, ec);
  } else {
    path_ = (fs::temp_directory_path(ec) / "bamboo-replan-XXXXXX").string();
    if (!mkdtemp(path_.data()))
      ec = std::error_code(errno, std::generic_category());
  }
  if (ec)
    problem_ = "cannot make the re-plan directory " + path_ + ": " + ec.message();
}

replan_dir::~replan_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

} // namespace bamboo
