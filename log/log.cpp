#include "log/log.hpp"

#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace bamboo::log {

namespace {
std::mutex mtx;
spdlog::level::level_enum current = spdlog::level::info;
} // namespace

std::shared_ptr<spdlog::logger> get(const std::string& component) {
  std::lock_guard<std::mutex> guard{mtx};
  if (auto existing = spdlog::get(component))
    return existing;
  auto logger = spdlog::stderr_color_mt(component);
  logger->set_level(current);
  logger->set_pattern("[%H:%M:%S.%e] [%n] [%l] %v");
  return logger;
}

void set_level(const std::string& level) {
  std::lock_guard<std::mutex> guard{mtx};
  current = spdlog::level::from_str(level);
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) {
    if (l->name().rfind("bamboo.", 0) == 0)
      l->set_level(current);
  });
}

} // namespace bamboo::log
