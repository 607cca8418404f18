#include "actors/cluster_manager.hpp"

#include <algorithm>
#include <numeric>

#include "actors/errors.hpp"
#include "actors/manager_state.hpp"
#include "log/log.hpp"
#include "model/model_definition.hpp"

namespace bamboo {

namespace {
// A failed run's wait for its checkpoint in flight is over.
using settle_atom = caf::atom_constant<caf::atom("settle")>;
} // namespace

void manager_state::init(manager_spec spec) {
  spec_ = std::move(spec);
  logger_ = log::get("bamboo.manager");
  const auto& cfg = spec_.cfg;
  if (cfg.pipelines > 1) {
    std::vector<int> nodes(static_cast<std::size_t>(cfg.coordinates()));
    std::iota(nodes.begin(), nodes.end(), 0);
    plan_ = cluster_plan::assign(nodes, cfg.pipelines, cfg.stages, cfg.redundancy);
  } else {
    plan_ = cluster_plan::initial(cfg.stages, cfg.redundancy);
  }
  ledger_.set_pipelines(cfg.pipelines);
  plan_.generation = spec_.first_generation;
  step_ = spec_.first_step;
  standby_ = spec_.standby;
  self_->set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
  if (spec_.actors)
    row_ = spec_.actors->enter("manager", -1, -1, "starting");
  if (spec_.controls)
    spec_.controls->set_redundancy(spec_.cfg.redundancy);
}

caf::behavior manager_state::make_behavior() {
  return {
      [this](train_atom) {
        promise_ = self_->make_response_promise();
        start();
        return promise_;
      },
      [this](const schema::step_report& r) {
        if (from_owner(static_cast<int>(r.stage)))
          on_report(r);
      },
      [this](committed_atom, std::uint64_t, std::int64_t k, int stage) {
        if (from_owner(stage))
          on_committed(k, stage);
      },
      [this](synced_atom, std::uint64_t, std::int64_t k, int stage) {
        on_synced(k, stage);
      },
      [this](sync_lost_atom, std::uint64_t, std::int64_t k, int stage) {
        on_sync_lost(k, stage);
      },
      [this](notice_atom, int node, std::int64_t deadline_ms) {
        if (node < 0 || node >= static_cast<int>(plan_.alive.size()) ||
            !plan_.alive[node] || finished_)
          return;
        if (deadline_ms < 0)
          logger_->info("node {} drains: its stages move to their shadows at the next "
                        "step boundary, then it leaves",
                        id(node));
        else
          logger_->info("node {} will be preempted in {} ms: its stages move to their "
                        "shadows at the next step boundary",
                        id(node), deadline_ms);
        notices_.insert(node);
      },
      [this](step_failed_atom, std::uint64_t gen, std::int64_t k, int stage,
             const std::string& why) {
        if (from_owner(stage))
          on_step_failed(gen, k, stage, why);
      },
      [this](failed_atom, std::uint64_t gen, std::int64_t k, int stage,
             const std::string& why) {
        if (gen != plan_.generation || finished_)
          return;
        fail(make_error(errc::stage_failed, "stage " + std::to_string(stage) +
                                                " in step " + std::to_string(k) + ": " +
                                                why));
      },
      [this](const schema::heartbeat& hb) {
        tracker_.seen(static_cast<int>(hb.node), clock_type::now());
      },
      [this](tick_atom) { on_tick(); },
      [this](standby_atom, int count) { standby_ = std::max(0, count); },
      [this](settle_atom) {
        if (failing_ && self_->current_sender() == self_->ctrl())
          end_failed_run();
      },
  };
}

void manager_state::start() {
  const auto& cfg = spec_.cfg;
  logger_->info("{} run: {} pipeline(s) of {} stage(s), G={} m={} ({} micro-batches), {} "
                "steps, redundancy {}; {}",
                cfg.custom_model ? cfg.custom_model->name() : to_string(cfg.model.kind),
                cfg.pipelines, cfg.stages, cfg.global_batch, cfg.micro_batch,
                cfg.micro_batches(), cfg.steps, to_string(cfg.redundancy),
                describe(spec_.parts));
  const auto now = clock_type::now();
  const int coordinates = cfg.coordinates();
  // Node n runs stage n mod S of pipeline n / S, and holds the replica of the
  // next stage of the same pipeline.
  for (int n = 0; n < coordinates; ++n) {
    node_assignment a;
    a.node = n;
    a.pipeline = n / cfg.stages;
    a.stage = n % cfg.stages;
    a.range = spec_.parts[a.stage];
    const int next = (a.stage + 1) % cfg.stages;
    if (plan_.shadow[a.pipeline * cfg.stages + next] == n) {
      a.shadow_stage = next;
      a.shadow_range = spec_.parts[next];
    }
    auto h = spec_.nodes->spawn(self_, a);
    for (const auto& addr : {h.stage.address(), h.shadow.address(), h.detector.address()})
      if (addr)
        node_of_[addr] = n;
    nodes_.push_back(h);
    if (h.detector) // else the process's own liveness is watched by the gateway
      tracker_.watch(n, now, 0); // all in this process: they stall together
  }
  owner_actor_.resize(coordinates);
  shadow_actor_.resize(coordinates);
  for (int s = 0; s < coordinates; ++s) {
    owner_actor_[s] = nodes_[s].stage;
    if (plan_.shadow[s] >= 0)
      shadow_actor_[s] = nodes_[plan_.shadow[s]].shadow;
    link_shadow(s);
  }
  self_->delayed_send(self_, spec_.heartbeats.period, tick_atom::value);
  if (cfg.steps == 0)
    finish();
  else
    begin_step();
}

// Tells the owner of `stage` where its shadow is (or that it has none).
void manager_state::link_shadow(int stage) {
  const auto& sh = shadow_actor_[stage];
  self_->send(owner_actor_[stage], shadow_atom::value, static_cast<bool>(sh),
              caf::actor_cast<caf::actor>(sh));
}

std::vector<int> manager_state::ids() const {
  std::vector<int> out;
  for (int n = 0; n < static_cast<int>(plan_.alive.size()); ++n)
    out.push_back(id(n));
  return out;
}

std::vector<stage_actor> manager_state::distinct_owners(bool first_pipeline) const {
  std::vector<stage_actor> out;
  const auto n =
      first_pipeline ? static_cast<std::size_t>(plan_.stages) : owner_actor_.size();
  for (std::size_t c = 0; c < n && c < owner_actor_.size(); ++c)
    if (std::find(out.begin(), out.end(), owner_actor_[c]) == out.end())
      out.push_back(owner_actor_[c]);
  return out;
}

bool manager_state::from(const stage_actor& a) const {
  return a && self_->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(a);
}

bool manager_state::from_owner(int stage) const {
  if (stage < 0 || stage >= static_cast<int>(owner_actor_.size()))
    return false;
  if (from(owner_actor_[stage]))
    return true;
  logger_->debug("dropped a message about stage {} from an actor that no longer owns it",
                 stage);
  return false;
}

namespace {
bool same(const param_blob& a, const param_blob& b) {
  return a.values == b.values;
}
bool same(const schema::tensor_digest& a, const schema::tensor_digest& b) {
  return a.count == b.count && a.digest == b.digest;
}
// Sorts by name and keeps one of each name, naming in `diverged` the first
// whose copies differ.
template <class T>
void once_by_name(std::vector<T>& v, std::string& diverged) {
  std::stable_sort(v.begin(), v.end(),
                   [](const T& a, const T& b) { return a.name < b.name; });
  std::vector<T> out;
  for (auto& x : v) {
    if (!out.empty() && out.back().name == x.name) {
      if (!same(out.back(), x) && diverged.empty())
        diverged = x.name;
      continue;
    }
    out.push_back(std::move(x));
  }
  v = std::move(out);
}
} // namespace

void manager_state::finish() {
  finished_ = true;
  for (int n = 0; n < static_cast<int>(nodes_.size()); ++n) {
    spec_.result->heartbeat_max_gap_s.push_back(
        std::chrono::duration<double>(tracker_.max_gap(n)).count());
    spec_.result->heartbeats.push_back(tracker_.beats(n));
  }
  if (!spec_.collect_parameters && !spec_.collect_digests) {
    deliver_done();
    return;
  }
  // The owners' and the live shadows' state (or its digests), sorted by name.
  std::vector<std::pair<stage_actor, bool>> sources; // actor, is_shadow
  for (const auto& a : distinct_owners())
    sources.push_back({a, false});
  for (const auto& a : shadow_actor_)
    if (a)
      sources.push_back({a, true});
  auto remaining = std::make_shared<std::size_t>(
      sources.size() * (spec_.collect_parameters + spec_.collect_digests));
  auto one_done = [this, remaining] {
    if (--*remaining > 0)
      return;
    auto& r = *spec_.result;
    // Sorted by name; the P pipelines' copies of a tensor must be identical,
    // and are kept once.
    std::string diverged;
    once_by_name(r.parameters, diverged);
    once_by_name(r.shadow_state, diverged);
    once_by_name(r.digests, diverged);
    once_by_name(r.shadow_digests, diverged);
    if (!diverged.empty())
      return fail(make_error(errc::stage_failed,
                             "the pipelines' copies of " + diverged + " differ"));
    deliver_done();
  };
  auto& r = *spec_.result;
  for (auto& [actor, is_shadow] : sources) {
    // A lost owner's state comes from its shadow; a lost shadow has none to give.
    const auto fallback = is_shadow ? stage_actor{} : shadow_of(actor);
    if (spec_.collect_parameters)
      collect<params_atom>(actor, fallback, is_shadow,
                           is_shadow ? r.shadow_state : r.parameters, one_done);
    if (spec_.collect_digests)
      collect<digest_atom>(actor, fallback, is_shadow,
                           is_shadow ? r.shadow_digests : r.digests, one_done);
  }
}

// One actor's final state (What: params_atom or digest_atom) into `all`.
template <class What, class T>
void manager_state::collect(const stage_actor& a, const stage_actor& fallback,
                            bool is_shadow, std::vector<T>& all,
                            std::function<void()> one_done) {
  auto answered = std::make_shared<bool>(false);
  auto give_up = [this, answered, fallback, is_shadow, &all,
                  one_done](const caf::error& err) {
    if (std::exchange(*answered, true))
      return;
    if (fallback && alive(fallback)) {
      logger_->info("a lost owner's final state comes from its shadow");
      return collect<What>(fallback, {}, false, all, one_done);
    }
    if (is_shadow)
      return one_done(); // a lost shadow: nothing to compare
    fail(err);
  };
  final_waits_.emplace(a.address(), give_up);
  self_->request(a, std::chrono::seconds(60), What::value)
      .then(
          [answered, &all, one_done](std::vector<T>& got) {
            if (std::exchange(*answered, true))
              return;
            std::move(got.begin(), got.end(), std::back_inserter(all));
            one_done();
          },
          [give_up](caf::error& err) { give_up(err); });
}

// After the last step a loss changes no state: its requests are answered
// from shadows, else given up; the run is complete.
void manager_state::lost_after_finish(int node) {
  if (!plan_.alive[node])
    return;
  logger_->warn("node {} lost after the last step", id(node));
  plan_.alive[node] = false;
  std::vector<std::function<void(const caf::error&)>> waits;
  for (auto it = final_waits_.begin(); it != final_waits_.end();) {
    auto n = node_of_.find(it->first);
    if (n != node_of_.end() && n->second == node) {
      waits.push_back(std::move(it->second));
      it = final_waits_.erase(it);
    } else {
      ++it;
    }
  }
  fail_shard_requests(node);
  for (auto& w : waits)
    w(make_error(errc::node_lost, "node " + std::to_string(id(node)) +
                                      " was lost before it gave its final state"));
}

stage_actor manager_state::shadow_of(const stage_actor& owner) const {
  for (std::size_t c = 0; c < owner_actor_.size() && c < shadow_actor_.size(); ++c)
    if (owner_actor_[c] == owner && shadow_actor_[c] && shadow_actor_[c] != owner)
      return shadow_actor_[c];
  return {};
}

bool manager_state::alive(const stage_actor& a) const {
  auto n = node_of_.find(a.address());
  return n != node_of_.end() && plan_.alive[n->second];
}

void manager_state::deliver_done() {
  if (snapshots_ > 0) { // the last checkpoint's files are still being written
    done_waiting_ = true;
    return;
  }
  logger_->info("run complete: {} steps, {} failovers", spec_.result->steps.size(),
                spec_.result->failovers.size());
  spec_.result->generation = plan_.generation;
  say("done", "after step " + std::to_string(step_ - 1));
  promise_.deliver(done_atom::value);
  shutdown();
}

void manager_state::fail(const caf::error& err) {
  if (!promise_.pending() || failing_)
    return;
  logger_->error("run failed: {}", describe(err));
  end_generation("run failed"); // unblock waiting stages
  failing_ = err;
  // A checkpoint whose files are still being written may be the one a
  // rollback needs: the survivors' shards are waited for, a lost owner's for
  // at most failed_run_checkpoint_wait.
  if (snapshots_ > 0) {
    logger_->info("waiting for the checkpoint being written (at most {} s)",
                  failed_run_checkpoint_wait.count());
    self_->delayed_send(self_, failed_run_checkpoint_wait, settle_atom::value);
    return;
  }
  end_failed_run();
}

void manager_state::end_failed_run() {
  const auto err = *failing_;
  if (!promise_.pending())
    return;
  record_survivors();
  promise_.deliver(err);
  // The survivors stay for a rollback: their actors end with the error, which
  // tells a worker process to wait for a new assignment.
  const bool keep = spec_.keep_nodes_on_failure && err.category() == error_category &&
                    err.code() == static_cast<std::uint8_t>(errc::unrecoverable_failure);
  shutdown(keep ? err : caf::error(caf::exit_reason::user_shutdown));
}

// The plan's last generation and its live nodes, for the runner's next plan.
void manager_state::record_survivors() {
  spec_.result->generation = plan_.generation;
  for (int n = 0; n < static_cast<int>(plan_.alive.size()); ++n)
    if (plan_.alive[n])
      spec_.result->alive.push_back(n);
}

// The plan ends at a step boundary for a new one: its nodes stay members and
// wait for their next assignment (the proxies tell them so).
void manager_state::end_plan(std::string why) {
  if (snapshots_ > 0) { // a checkpoint of this boundary is being written: after it
    plan_end_waiting_ = why;
    return;
  }
  plan_end_waiting_.reset();
  auto& r = *spec_.result;
  r.replanned_at = step_;
  r.replan_reason = why;
  record_survivors();
  logger_->info("plan of generation {} ends before step {}: {}", plan_.generation, step_,
                why);
  promise_.deliver(done_atom::value);
  shutdown(make_error(errc::plan_changed, why));
}

void manager_state::end_generation(const std::string& reason) {
  spec_.nodes->end_generation(plan_.generation, reason);
}

void manager_state::shutdown(const caf::error& reason) {
  finished_ = true;
  auto stop = [this, &reason](const auto& a) {
    if (a)
      self_->send_exit(a, reason);
  };
  for (auto& n : nodes_) {
    stop(n.stage);
    stop(n.shadow);
    stop(n.detector);
  }
  for (auto& a : extra_actors_)
    stop(a);
  extra_actors_.clear();
  nodes_.clear();
  owner_actor_.clear();
  shadow_actor_.clear();
  self_->quit();
}

namespace {
caf::behavior manager_actor(caf::stateful_actor<manager_state>* self, manager_spec spec) {
  self->state.init(std::move(spec));
  return self->state.make_behavior();
}
} // namespace

caf::actor spawn_manager(caf::actor_system& sys, manager_spec spec) {
  return sys.spawn(manager_actor, std::move(spec));
}

} // namespace bamboo
