// The cluster manager's state, private to its four files:
//   cluster_manager.cpp  the behavior, set-up and the end of the run;
//   manager_steps.cpp    the step cycle (run, report, clip, commit, sync) and
//                        the hand-off of noticed nodes at a step boundary;
//   manager_recovery.cpp losses (down messages, missed heartbeats), failover
//                        and the recovery round of an interrupted step, and
//                        re-shadowing at a step boundary;
//   manager_controls.cpp an operator's pause, node orders and redundancy
//                        change, and the manager's row on the actor board.
// Decisions are the plain functions of actors/plan; this class only applies them.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include <caf/all.hpp>

#include "actors/actor_board.hpp"
#include "actors/cluster_manager.hpp"
#include "actors/plan/planner.hpp"
#include "actors/plan/step_ledger.hpp"
#include "actors/protocol.hpp"
#include "actors/run_controls.hpp"
#include "model/checkpoint.hpp"

namespace spdlog {
class logger;
}

namespace bamboo {

class manager_state {
public:
  using clock_type = std::chrono::steady_clock;
  static inline const char* name = "bamboo.manager";
  static double seconds_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }

  explicit manager_state(caf::event_based_actor* self) : self_(self) {}
  void init(manager_spec spec);
  caf::behavior make_behavior();

private:
  // cluster_manager.cpp
  void start();
  void finish();
  void deliver_done();
  void fail(const caf::error& err);
  void end_failed_run();
  void end_plan(std::string why); // by value: a deferred end passes its own copy
  void record_survivors();
  void end_generation(const std::string& reason);
  void shutdown(const caf::error& reason = caf::exit_reason::user_shutdown);
  // Every stage's owner once; of pipeline 0 only (the state to save) if asked.
  std::vector<stage_actor> distinct_owners(bool first_pipeline = false) const;
  int coordinates() const { return static_cast<int>(plan_.owner.size()); }
  int id(int node) const { return spec_.nodes->node_id(node); } // its name in records
  std::vector<int> ids() const;
  bool from(const stage_actor& a) const;
  bool from_owner(int stage) const;
  bool from_shadow(std::int64_t k, int stage) const;
  void link_shadow(int stage);

  // manager_steps.cpp
  void begin_step();
  void maybe_checkpoint(bool periodic);
  void start_owners();
  void run_owners();
  bool replan();
  void on_report(const schema::step_report& r);
  void send_commit(int stage);
  void on_committed(std::int64_t k, int stage);
  void on_synced(std::int64_t k, int stage);
  void on_sync_lost(std::int64_t k, int stage);
  void maybe_resync(int stage);
  bool hand_off();
  void maybe_finish_step();
  int stop_wanted() const { return spec_.stop_signal ? spec_.stop_signal() : 0; }
  void end_at_boundary(int signal);
  void check_stop(clock_type::time_point now);
  void snapshot(const std::shared_ptr<checkpoint_writer>& writer,
                std::function<void(bool written)> then = {});
  void submit_manifests(checkpoint_writer& writer);
  static void submit(checkpoint_writer& writer, checkpoint_manifest m);
  void close_failovers(step_record& rec, clock_type::time_point now);
  bool degraded() const;
  std::string unprotected() const;

  // manager_controls.cpp
  bool held();
  void say(const char* state, const std::string& doing);
  void carry_out_orders();
  std::string redundancy_change();

  // manager_recovery.cpp
  void on_down(const caf::down_msg& dm);
  void on_tick();
  void lost(int node, failover_cause cause, const std::string& detail);
  void on_step_failed(std::uint64_t gen, std::int64_t k, int stage,
                      const std::string& why);
  void node_lost(int node, failover_cause cause, const std::string& detail,
                 bool at_boundary);
  void start_recovery();
  void finish_recovery();
  void reshadow();
  void add_shadow(int stage, int node, const replica_handle& r);
  void attach_shadow(int stage, int node, const stage_actor& actor);
  void copy_state(int stage, int node);
  void on_copy(std::uint64_t round, int stage, bool sent, const state_copy& c);
  void drop_copy(int stage, const std::string& why);
  void abandon_copies();
  void retire(const stage_actor& actor);

  caf::event_based_actor* self_;
  manager_spec spec_;
  std::shared_ptr<spdlog::logger> logger_;
  caf::response_promise promise_;
  cluster_plan plan_;
  std::vector<node_handles> nodes_;
  std::map<caf::actor_addr, int> node_of_;
  std::vector<stage_actor> owner_actor_;  // stage -> actor running it
  std::vector<stage_actor> shadow_actor_; // stage -> actor holding its replica
  std::vector<stage_actor> extra_actors_; // shadows created after failovers
  heartbeat_tracker tracker_;
  bool stall_said_ = false; // a stall of this process's nodes, logged once
  step_ledger ledger_;
  std::int64_t step_ = 0;
  clock_type::time_point step_start_;
  bool finished_ = false;
  // Recovery of the current step.
  bool recovering_ = false;
  std::uint64_t round_ = 0;
  std::set<int> restarted_, shadow_changed_, awaiting_;
  std::vector<std::optional<stage_progress>> progress_;
  std::vector<failover_record> open_failovers_;
  std::set<int> resync_;  // stages whose shadow must get the gradients again
  std::set<int> notices_; // nodes with a preemption notice, to hand off
  std::map<int, clock_type::time_point> kill_time_;
  // New shadows loading their owners' state through the transport (stage ->
  // copy): the step starts when every one has loaded, or failed.
  struct pending_copy {
    stage_actor shadow;
    int node = 0;
    std::optional<state_copy> sent, loaded;
  };
  std::map<int, pending_copy> copies_;
  std::uint64_t copy_round_ = 0; // a loss abandons the copies under way
  // Checkpoints whose files are being written: the run is done after them.
  // The run's checkpoints reach their writer in step order, whichever files
  // finish first (a hook hears of step 2 before step 4, and pruning never sees
  // them swapped).
  struct pending_checkpoint {
    checkpoint_manifest m;
    std::size_t left = 0;
    bool failed = false, gathered = false;
  };
  std::deque<std::shared_ptr<pending_checkpoint>> manifests_;
  int snapshots_ = 0;
  // Shard requests in flight, by the owner asked: a lost owner never answers
  // (CAF fails a request to a dead peer only at its timeout), so its loss
  // fails them at once. Each fails its shard once, whichever comes first.
  struct shard_wait {
    std::shared_ptr<bool> answered;
    std::function<void(const std::string&)> fail;
  };
  std::multimap<caf::actor_addr, shard_wait> shard_waits_;
  void fail_shard_requests(int node);
  void request_shard(const stage_actor& a, const std::string& dir,
                     const stage_actor& fallback,
                     std::function<void(checkpoint_shard&)> got,
                     std::function<void(const std::string&)> failed);
  // The shadow of the stage `owner` holds (none), and whether an actor's node lives.
  stage_actor shadow_of(const stage_actor& owner) const;
  bool alive(const stage_actor& a) const;
  // The final state's requests in flight, by the actor asked: its node's loss
  // answers them from the shadow or ends them.
  std::multimap<caf::actor_addr, std::function<void(const caf::error&)>> final_waits_;
  template <class What, class T>
  void collect(const stage_actor& a, const stage_actor& fallback, bool is_shadow,
               std::vector<T>& all, std::function<void()> one_done);
  void lost_after_finish(int node);
  // A plan that ends for a new one waits for the checkpoints in flight.
  std::optional<std::string> plan_end_waiting_;
  bool done_waiting_ = false;
  // A failed run waits for the checkpoint in flight (a rollback may need it).
  std::optional<caf::error> failing_;
  static constexpr auto failed_run_checkpoint_wait = std::chrono::seconds(5);
  // Re-plans: the members outside the plan, and the one under way (a loss
  // abandons it: the step then runs on the failed-over plan).
  int standby_ = 0;
  std::uint64_t replan_round_ = 0;
  bool replanning_ = false;
  // An operator's pause: no step starts; losses meanwhile fail over when the
  // run resumes (a recovery round would start the step).
  bool paused_ = false;
  struct held_loss {
    int node;
    failover_cause cause;
    std::string detail;
  };
  std::vector<held_loss> held_losses_;
  std::int64_t last_checkpoint_ = -1;               // the step of the last snapshot taken
  std::optional<clock_type::time_point> stop_seen_; // a stop signal, first seen
  bool redundancy_waits_ = false; // a change asked for and logged as waiting
  actor_board::entry row_;
};

} // namespace bamboo
