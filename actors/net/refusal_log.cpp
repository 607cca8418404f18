#include "actors/net/refusal_log.hpp"

#include <spdlog/spdlog.h>

namespace bamboo {

refusal_log::refusal_log(std::shared_ptr<spdlog::logger> logger, std::string what,
                         std::chrono::milliseconds period)
    : logger_(std::move(logger)), what_(std::move(what)), period_(period) {}

void refusal_log::note(const std::string& host, const std::string& address,
                       const std::string& why, clock::time_point now) {
  ++total_;
  if (last_ == clock::time_point{})
    last_ = now;
  std::pair<std::string, std::string> key{host, why};
  auto it = repeats_.find(key);
  if (it == repeats_.end() && repeats_.size() >= max_keys)
    it = repeats_.try_emplace({"(other addresses)", "(other reasons)"}, 1).first;
  if (it != repeats_.end()) {
    ++it->second;
    return;
  }
  repeats_.emplace(std::move(key), 0);
  logger_->warn("closed the {} from {}: {}", what_, address, why);
}

void refusal_log::summarise(clock::time_point now, bool now_anyway) {
  if (!now_anyway && now - last_ < period_)
    return;
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - last_).count();
  for (const auto& [key, n] : repeats_)
    if (n > 0)
      logger_->warn("closed {} more {}s from {} in the last {} s: {}", n, what_,
                    key.first, secs, key.second);
  // Quiet kinds are forgotten: the next refusal of a kind is logged in full.
  repeats_.clear();
  last_ = now;
}

} // namespace bamboo
