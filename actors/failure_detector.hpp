// Failure detection. Each node runs a failure_detector actor that sends the
// manager a heartbeat every period; it is an event-based actor on CAF's
// scheduler, so a stage's long backward pass (on its own thread) never delays it.
// The manager feeds heartbeats to a heartbeat_tracker, which says who missed
// too many.
#pragma once

#include <chrono>
#include <map>
#include <vector>

#include <caf/fwd.hpp>

namespace bamboo {

inline constexpr std::chrono::milliseconds default_heartbeat_period{200};
inline constexpr int default_heartbeat_misses = 5;

class heartbeat_tracker {
public:
  using clock = std::chrono::steady_clock;
  void watch(int node, clock::time_point now);
  void forget(int node);
  void seen(int node, clock::time_point now);
  // Watched nodes silent for longer than `timeout`.
  std::vector<int> expired(clock::time_point now, clock::duration timeout) const;
  // Longest silence between two heartbeats of a node so far.
  clock::duration max_gap(int node) const;
  int beats(int node) const;

private:
  struct entry {
    clock::time_point last;
    clock::duration max_gap{0};
    int beats = 0;
  };
  std::map<int, entry> nodes_;
};

// Spawns node `node`'s detector; it heartbeats `manager` until it is killed.
caf::actor spawn_failure_detector(caf::local_actor* parent, int node, caf::actor manager,
                                  std::chrono::milliseconds period);

} // namespace bamboo
