// Heartbeats as plain values: the period and how many may be missed (one
// policy for the manager, the gateway and the workers), and a tracker that says
// who has been silent for too long. Tested without actors.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <vector>

namespace bamboo {

inline constexpr std::chrono::milliseconds default_heartbeat_period{200};
inline constexpr int default_heartbeat_misses = 5;
// How long a live owner may take to say what it has done of a step during a
// recovery; one that stays silent that long is declared lost (else the
// recovery would wait for it forever).
inline constexpr std::chrono::milliseconds default_progress_timeout{
    std::chrono::seconds(30)};

struct heartbeat_policy {
  std::chrono::milliseconds period = default_heartbeat_period;
  int misses = default_heartbeat_misses;
  std::chrono::milliseconds progress = default_progress_timeout;
  // Silent for longer than this: declared lost.
  std::chrono::milliseconds timeout() const { return period * misses; }
  // A transfer that failed (often the first sign of a dead peer) fails the run
  // only if no node is declared lost within this time.
  std::chrono::milliseconds grace() const { return period * (misses + 1); }
};

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
  // When the node's last heartbeat came (or its watch began); nullopt if not watched.
  std::optional<clock::time_point> last_seen(int node) const;

private:
  struct entry {
    clock::time_point last;
    clock::duration max_gap{0};
    int beats = 0;
  };
  std::map<int, entry> nodes_;
};

} // namespace bamboo
