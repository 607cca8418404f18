// Heartbeats as plain values: the period and how many may be missed (one
// policy for the manager, the gateway and the workers), and a tracker that says
// who has been silent for too long. Tested without actors.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
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
// How long a worker waits on a silent manager (stopped, or cut off) before it
// leaves: well above the nodes' timeout, so that a manager paused for a few
// seconds (a VM pause, swap, a loaded machine) loses nobody. A killed manager
// is noticed at once, by its closed connection.
inline constexpr std::chrono::milliseconds default_manager_timeout{
    std::chrono::seconds(10)};

struct heartbeat_policy {
  std::chrono::milliseconds period = default_heartbeat_period;
  int misses = default_heartbeat_misses;
  std::chrono::milliseconds progress = default_progress_timeout;
  std::chrono::milliseconds manager_timeout = default_manager_timeout;
  // Silent for longer than this: declared lost.
  std::chrono::milliseconds timeout() const { return period * misses; }
  // A watcher's own tick this late means the watcher itself was paused.
  std::chrono::milliseconds late_tick() const {
    return std::max(2 * period, timeout() / 2);
  }
  // The manager's silence, in its own heartbeats, after which a worker leaves.
  int manager_misses() const {
    const auto p = std::max<std::int64_t>(1, period.count());
    return static_cast<int>(
        std::max<std::int64_t>(misses, (manager_timeout.count() + p - 1) / p));
  }
  // A transfer that failed (often the first sign of a dead peer) fails the run
  // only if no node is declared lost within this time.
  std::chrono::milliseconds grace() const { return period * (misses + 1); }
};

// Stall-aware: silence is a loss only where it cannot be a pause. A watcher
// whose own ticks stopped (its process was stopped, or starved) gives every
// node a fresh timeout; nodes of one process (a group) that all fall silent
// together mean that process stalled, and are a loss only after a stall
// timeout. A closed connection is a loss at once, elsewhere.
class heartbeat_tracker {
public:
  using clock = std::chrono::steady_clock;
  // `group`: the process the node lives in (nodes of one group stall together);
  // -1: a process of its own.
  void watch(int node, clock::time_point now, int group = -1);
  void forget(int node);
  void seen(int node, clock::time_point now);
  // The watcher's periodic check, due every `period`: when it comes more than
  // `late` after the previous one the watcher was paused, and all of the gap
  // but one period was its own, no node's silence (a node then has its
  // timeout less a period to be heard again, however long the pause). Returns
  // the gap when late (zero: on time). A watcher whose every tick is late (a
  // loaded machine) still finds a node that stopped: each tick counts a period
  // of its silence.
  clock::duration tick(clock::time_point now, clock::duration period,
                       clock::duration late);
  // Watched nodes silent for longer than `timeout`; a group silent as a whole
  // only once silent for longer than `stall_timeout` as well.
  std::vector<int> expired(clock::time_point now, clock::duration timeout,
                           clock::duration stall_timeout) const;
  // Groups silent as a whole for longer than `timeout` (stalled, not lost yet).
  std::vector<int> stalled(clock::time_point now, clock::duration timeout) const;
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
    int group = -1;
    // The watcher's pauses since the last heartbeat: no silence of the node's.
    clock::duration paused{0};
    clock::time_point silent_since() const { return last + paused; }
  };
  // group -> the newest heartbeat of its nodes, for groups silent as a whole.
  std::map<int, clock::time_point> silent_groups(clock::time_point now,
                                                 clock::duration timeout) const;
  std::map<int, entry> nodes_;
  std::optional<clock::time_point> last_tick_;
};

} // namespace bamboo
