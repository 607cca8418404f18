// What bamboo-inspect sees of a run, as plain values: the plan of the last
// committed step, the members and their states, the latest events and losses.
// The manager's hooks and the gateway write it (it locks: they are different
// threads); the gateway answers each snapshot request from it, so an observer
// never holds training up. Tested without actors.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "actors/plan/run_record.hpp"
#include "schema/codec.hpp"

namespace bamboo {

class inspect_board {
public:
  using clock = std::chrono::steady_clock;
  static constexpr std::size_t max_events = 256;
  static constexpr std::size_t max_losses = 64;

  explicit inspect_board(clock::time_point start = clock::now()) : start_(start) {}

  void set_run(const std::string& model, int pipelines, int stages, std::int64_t steps);
  void on_step(const step_record& r);
  void on_failover(const failover_record& f);
  void event(const std::string& text, clock::time_point now = clock::now());
  void on_join(int node, const std::string& zone, clock::time_point now = clock::now());
  // lost, fenced, left: the member is gone.
  void on_gone(int node, const std::string& state, clock::time_point now = clock::now());
  // An operator drains the member: "draining" until it is gone.
  void on_draining(int node);

  // Heartbeat ages by node (those watched); the state of each member comes
  // from the plan: active (owns a stage), degraded (owns two or more), shadow
  // (holds only replicas), standby (neither), draining, or how it went (a
  // failover marks its node lost, or left after a notice, where no gateway
  // saw it go: embedded runs).
  schema::cluster_snapshot snapshot(std::uint64_t request,
                                    const std::map<int, std::int64_t>& heartbeat_age_ms,
                                    clock::time_point now = clock::now()) const;

private:
  std::int64_t ms_since_start(clock::time_point t) const;
  void add_event(const std::string& text, clock::time_point now);

  mutable std::mutex mtx_;
  clock::time_point start_;
  schema::cluster_snapshot run_; // the fields a step sets
  struct member {
    std::string zone;
    std::string gone; // "" while a member
    bool draining = false;
  };
  std::map<int, member> members_;
  std::deque<schema::cluster_event> events_;
  std::deque<double> losses_;
  std::string last_step_event_;
};

} // namespace bamboo
