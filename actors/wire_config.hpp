// A train_config as the schema's plain struct, both ways: the manager sends
// the run's configuration to every worker with its assignment.
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

} // namespace bamboo
