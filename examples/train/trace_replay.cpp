#include "examples/train/trace_replay.hpp"

#include <algorithm>

namespace bamboo::app {

trace_replay::trace_replay(std::vector<sim::trace_event> events, int max_workers,
                           double speedup)
    : events_(std::move(events)),
      slot_(static_cast<std::size_t>(std::max(0, max_workers))), speedup_(speedup) {
  // Time 0 is the cluster the run starts with.
  initial_ = static_cast<int>(apply(0, true).size());
}

std::vector<replay_action> trace_replay::due(std::chrono::duration<double> elapsed) {
  const double ms = elapsed.count() * 1e3 * speedup_;
  return apply(static_cast<std::size_t>(std::max(0.0, ms)), false);
}

std::vector<replay_action> trace_replay::apply(std::size_t upto, bool initial) {
  std::vector<replay_action> out;
  for (; next_ < events_.size() && events_[next_].ms <= static_cast<std::int64_t>(upto);
       ++next_) {
    const auto& e = events_[next_];
    last_ms_ = e.ms;
    auto at = std::find(slot_.begin(), slot_.end(), e.add ? std::string() : e.node);
    if (at == slot_.end()) { // no free slot, or an instance that never had one
      ++left_out_;
      continue;
    }
    *at = e.add ? e.node : std::string();
    out.push_back({e.add, static_cast<int>(at - slot_.begin()), e.node, e.ms});
    if (initial)
      continue;
    ++(e.add ? starts_ : removals_);
  }
  return out;
}

} // namespace bamboo::app
