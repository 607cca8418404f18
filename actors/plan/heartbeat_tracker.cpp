#include "actors/plan/heartbeat_tracker.hpp"

#include <algorithm>

namespace bamboo {

void heartbeat_tracker::watch(int node, clock::time_point now, int group) {
  nodes_[node] = entry{now, clock::duration{0}, 0, group, clock::duration{0}};
}

heartbeat_tracker::clock::duration heartbeat_tracker::tick(clock::time_point now,
                                                           clock::duration period,
                                                           clock::duration late) {
  const auto gap = last_tick_ ? now - *last_tick_ : clock::duration{0};
  last_tick_ = now;
  if (gap <= late)
    return clock::duration{0};
  for (auto& [node, e] : nodes_) // the pause is no node's silence
    e.paused += gap - std::min(period, late);
  return gap;
}

std::map<int, heartbeat_tracker::clock::time_point>
heartbeat_tracker::silent_groups(clock::time_point now, clock::duration timeout) const {
  std::map<int, clock::time_point> newest;
  std::map<int, bool> all_silent;
  for (const auto& [node, e] : nodes_) {
    if (e.group < 0)
      continue;
    auto [it, first] = newest.emplace(e.group, e.silent_since());
    if (!first)
      it->second = std::max(it->second, e.silent_since());
    auto [s, fresh] = all_silent.emplace(e.group, true);
    s->second = s->second && now - e.silent_since() > timeout;
  }
  for (const auto& [group, silent] : all_silent)
    if (!silent)
      newest.erase(group);
  return newest;
}

void heartbeat_tracker::forget(int node) {
  nodes_.erase(node);
}

void heartbeat_tracker::seen(int node, clock::time_point now) {
  auto it = nodes_.find(node);
  if (it == nodes_.end())
    return;
  auto& e = it->second;
  if (e.beats > 0)
    e.max_gap = std::max(e.max_gap, now - e.last);
  e.last = now;
  e.paused = clock::duration{0};
  ++e.beats;
}

std::vector<int> heartbeat_tracker::expired(clock::time_point now,
                                            clock::duration timeout,
                                            clock::duration stall_timeout) const {
  const auto groups = silent_groups(now, timeout);
  std::vector<int> out;
  for (const auto& [node, e] : nodes_) {
    if (now - e.silent_since() <= timeout)
      continue;
    auto g = groups.find(e.group);
    if (g != groups.end() && now - g->second <= stall_timeout)
      continue; // its whole process is silent: a stall so far
    out.push_back(node);
  }
  return out;
}

std::vector<int> heartbeat_tracker::stalled(clock::time_point now,
                                            clock::duration timeout) const {
  std::vector<int> out;
  for (const auto& [group, newest] : silent_groups(now, timeout))
    out.push_back(group);
  return out;
}

heartbeat_tracker::clock::duration heartbeat_tracker::max_gap(int node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? clock::duration{0} : it->second.max_gap;
}

std::optional<heartbeat_tracker::clock::time_point>
heartbeat_tracker::last_seen(int node) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end())
    return std::nullopt;
  return it->second.last;
}

int heartbeat_tracker::beats(int node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? 0 : it->second.beats;
}

} // namespace bamboo
