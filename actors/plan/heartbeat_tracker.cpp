#include "actors/plan/heartbeat_tracker.hpp"

#include <algorithm>

namespace bamboo {

void heartbeat_tracker::watch(int node, clock::time_point now) {
  nodes_[node] = entry{now, clock::duration{0}, 0};
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
  ++e.beats;
}

std::vector<int> heartbeat_tracker::expired(clock::time_point now,
                                            clock::duration timeout) const {
  std::vector<int> out;
  for (const auto& [node, e] : nodes_)
    if (now - e.last > timeout)
      out.push_back(node);
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
