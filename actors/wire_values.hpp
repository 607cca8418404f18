// Values that cross a process boundary, as the schema's plain structs and back:
// the run's configuration (sent to every worker with its assignment) and the
// messages of a step's recovery (progress reports, resume orders).
#pragma once

#include <optional>
#include <string>

#include "model/config.hpp"
#include "schema/codec.hpp"

namespace bamboo {

schema::train_settings to_settings(const train_config& cfg);
// nullopt with `problem` set when the settings name an unknown model or mode,
// or do not validate.
std::optional<train_config> from_settings(const schema::train_settings& s,
                                          std::string& problem);

struct stage_progress_msg;
struct resume_order;

schema::progress_report to_frame(const stage_progress_msg& p, std::uint64_t request);
stage_progress_msg from_frame(const schema::progress_report& p);
schema::resume to_frame(const resume_order& o);
resume_order from_frame(const schema::resume& r);

} // namespace bamboo
