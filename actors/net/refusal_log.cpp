#include "actors/net/refusal_log.hpp"

#include <set>

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
    it = repeats_.try_emplace({"(other addresses)", why}, 0).first;
  if (it != repeats_.end()) {
    ++it->second;
    return;
  }
  repeats_.emplace(std::move(key), 0);
  // In full at most max_lines times a period: a flood from many addresses is
  // summarised, not written out address by address.
  if (full_lines_ < max_lines) {
    ++full_lines_;
    logger_->warn("closed the {} from {}: {}", what_, address, why);
  } else
    ++repeats_[{host, why}];
}

void refusal_log::summarise(clock::time_point now, bool now_anyway) {
  if (!now_anyway && now - last_ < period_)
    return;
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - last_).count();
  // One line per reason: its count, and its addresses (named when few).
  struct tally {
    std::size_t n = 0;
    std::set<std::string> hosts;
  };
  std::map<std::string, tally> by_reason;
  for (const auto& [key, n] : repeats_)
    if (n > 0) {
      auto& t = by_reason[key.second];
      t.n += n;
      t.hosts.insert(key.first);
    }
  for (const auto& [why, t] : by_reason) {
    std::string from;
    if (t.hosts.size() <= 3)
      for (const auto& h : t.hosts)
        from += (from.empty() ? "" : ", ") + h;
    else
      from = std::to_string(t.hosts.size()) + " addresses";
    logger_->warn("closed {} more {}s from {} in the last {} s: {}", t.n, what_, from,
                  secs, why);
  }
  // Quiet kinds are forgotten: the next refusal of a kind is logged in full.
  repeats_.clear();
  full_lines_ = 0;
  last_ = now;
}

} // namespace bamboo
