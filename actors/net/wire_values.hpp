// Values that cross a process boundary, as the schema's plain structs and back:
// the run's configuration (sent to every worker with its assignment) and the
// messages of a step's recovery (progress reports, resume orders).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "model/config.hpp"
#include "schema/codec.hpp"

namespace bamboo {

// A custom model travels as its name and digest (every process builds it).
schema::train_settings to_settings(const train_config& cfg);
// nullopt with `problem` set when the settings name an unknown model or mode,
// or do not validate. A model other than GPT and BERT must be `local` (this
// process's own model: same name, same digest).
std::optional<train_config>
from_settings(const schema::train_settings& s, std::string& problem,
              const std::shared_ptr<const model_definition>& local = nullptr);

// Why a worker that builds `worker_model` (its name and digest; "" for the
// built-in models only) cannot train the run's custom model (null: the run's is
// built in, which every worker builds); nullopt when it can.
std::optional<std::string>
model_mismatch(const std::shared_ptr<const model_definition>& run,
               const std::string& worker_model, const std::string& worker_digest);

struct stage_progress;
struct resume_order;

schema::progress_report to_frame(const stage_progress& p, std::uint64_t request);
stage_progress from_frame(const schema::progress_report& p);
schema::resume to_frame(const resume_order& o);
resume_order from_frame(const schema::resume& r);

// A stage's event (schema::committed, synced, sync_lost, resync) and back to
// the (generation, step, stage) that actors send with an atom.
template <class T>
T to_event(std::uint64_t generation, std::int64_t step, int stage) {
  T e;
  e.generation = generation;
  e.step = static_cast<std::uint64_t>(step);
  e.stage = static_cast<std::uint32_t>(stage);
  return e;
}
inline std::tuple<std::uint64_t, std::int64_t, int>
from_event(const schema::stage_done& e) {
  return {e.generation, static_cast<std::int64_t>(e.step), static_cast<int>(e.stage)};
}

} // namespace bamboo
