// One named spdlog logger per component ("bamboo.stage", "bamboo.manager", ...).
// It lives in a bottom folder of its own, so every layer can log without new deps.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace bamboo::log {

// Returns the logger of a component, creating it (stderr, shared level) on first use.
std::shared_ptr<spdlog::logger> get(const std::string& component);

// Sets the level of every bamboo logger, present and future ("info", "debug", ...).
void set_level(const std::string& level);

} // namespace bamboo::log
