// The node a worker's agent hosts: see worker_agent_state.hpp.
#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/net/assignment.hpp"
#include "actors/net/control_store.hpp"
#include "actors/net/wire_values.hpp"
#include "actors/net/worker_agent_state.hpp"
#include "actors/stage_actor.hpp"
#include "log/log.hpp"
#include "model/stage_executor.hpp"
#include "transport/transport_registry.hpp"

namespace bamboo {

// A frame for the manager-side actor of the local actor that sent the message.
void worker_agent_state::to_manager(const schema::frame& f) {
  auto it = target_of_.find(self_->current_sender());
  if (it == target_of_.end()) {
    logger_->debug("node {}: dropped a frame from an actor of an earlier plan", member_);
    return;
  }
  auto p = proxies_.find(it->second);
  if (p == proxies_.end()) {
    logger_->debug("node {}: holding a frame for target {} until the manager's "
                   "actor is known ({} known)",
                   member_, static_cast<int>(it->second), proxies_.size());
    held_[it->second].push_back(to_wire(f)); // sealed when sent
    return;
  }
  send_frame(self_, p->second, f);
}

stage_actor worker_agent_state::local() const {
  auto it = locals_.find(target_);
  return it == locals_.end() ? stage_actor{} : it->second;
}

template <class... Ts>
void worker_agent_state::to_local(Ts&&... xs) {
  if (auto a = local())
    self_->send(a, std::forward<Ts>(xs)...);
  else
    logger_->warn("node {}: a frame for an actor this node does not have", member_);
}

// The manager-side actor of target_ is the sender of this frame.
void worker_agent_state::learn_proxy() {
  auto& p = proxies_[target_];
  p = caf::actor_cast<caf::actor>(self_->current_sender());
  for (auto& w : held_[target_])
    self_->send(p, sealed_for(self_->node(), p, w));
  held_.erase(target_);
}

void worker_agent_state::handle(const schema::assign& a) {
  if (group_ && a.generation <= generation_) {
    logger_->warn("node {}: ignored a second assignment", member_);
    return;
  }
  if (group_) // a newer plan (a rollback) before the old one's leave frames
    reset();
  generation_ = a.generation;
  for (auto it = early_.begin(); it != early_.end();) {
    if (it->second.first == generation_)
      proxies_[it->first] = it->second.second;
    it = it->second.first <= generation_ ? early_.erase(it) : std::next(it);
  }
  auto in = take_assignment(a, spec_.model);
  if (!in) {
    logger_->error("node {}: cannot take the assignment: {}", member_,
                   describe(in.error()));
    finish(in.error());
    return;
  }
  learn_proxy();
  // Port 0: the manager serves the store over this channel (1.6).
  registry_ =
      store_port_ == 0
          ? std::make_shared<transport_registry>(
                in->cfg.coordinates(),
                std::make_shared<control_store>(caf::actor_cast<caf::actor>(self_)),
                spec_.advertise)
          : std::make_shared<transport_registry>(in->cfg.coordinates(), spec_.store_host,
                                                 store_port_, spec_.advertise);
  registry_->set_timeout(spec_.transport_timeout);
  parts_ = in->parts;
  node_ = in->node.node;
  res_ = {};
  res_.cfg = in->cfg;
  res_.corpus = in->corpus;
  res_.transports = registry_;
  res_.sync = shadow_sync::transport;
  res_.detector = false; // this agent heartbeats for the process
  res_.resume = in->resume;
  res_.actors = spec_.actors;
  auto h = spawn_node(self_, in->node, res_);
  group_ = h.group;
  add_local(target::stage, h.stage);
  if (h.shadow)
    add_local(target::shadow, h.shadow);
  logger_->info("node {}: stage {}{}, generation {}{}", member_, a.stage,
                a.shadow_stage >= 0
                    ? ", replica of stage " + std::to_string(a.shadow_stage)
                    : std::string(),
                a.generation, in->resume ? ", from " + a.resume : std::string());
}

void worker_agent_state::add_local(target t, const stage_actor& a) {
  locals_[t] = a;
  target_of_[caf::actor_cast<caf::strong_actor_ptr>(a)] = t;
}

// A newer plan's actor may introduce itself before the plan's assignment
// comes: it is known from that assignment on. An older one's is stale.
void worker_agent_state::handle(const schema::attach& a) {
  if (a.generation == generation_)
    learn_proxy();
  else if (a.generation > generation_)
    early_[target_] = {a.generation,
                       caf::actor_cast<caf::actor>(self_->current_sender())};
}
void worker_agent_state::handle(const schema::run_step& r) {
  to_local(run_step_atom::value, r.generation, static_cast<std::int64_t>(r.step));
}
void worker_agent_state::handle(const schema::commit& c) {
  if (!(c.clip_coef >= 0.0 && c.clip_coef <= 1.0)) { // NaN fails too
    logger_->warn("node {}: dropped a commit with clip coefficient {} (not in [0, 1])",
                  member_, c.clip_coef);
    return;
  }
  to_local(c);
}
void worker_agent_state::handle(const schema::shadow_link& l) {
  // The owner only needs to know that a replica exists: it sends the
  // gradients through the transport, to the rank before its own.
  to_local(shadow_atom::value, l.present, caf::actor{});
}
void worker_agent_state::handle(const schema::resync& r) {
  to_local(resync_atom::value, r.generation, static_cast<std::int64_t>(r.step));
}
void worker_agent_state::handle(const schema::resume& r) {
  to_local(from_frame(r));
}

// The four requests a proxy forwards for its stage: each asks the local
// actor and answers the proxy with a frame made from the result, or, for
// those that take a refusal, from the error (the others log it).
void worker_agent_state::handle(const schema::progress_request& r) {
  ask_local<stage_progress>(
      local(), spec_.progress_timeout, "progress to report",
      [id = r.request](stage_progress& p) { return to_frame(p, id); }, no_refusal{},
      progress_atom::value, r.generation);
}
void worker_agent_state::handle(const schema::state_request& r) {
  ask_local<std::vector<schema::tensor_digest>>(
      local(), std::chrono::seconds(60), "state digests to report",
      [id = r.request](std::vector<schema::tensor_digest>& d) {
        return schema::state_report{id, std::move(d)};
      },
      no_refusal{}, digest_atom::value);
}
void worker_agent_state::handle(const schema::checkpoint_request& c) {
  ask_local<checkpoint_shard>(
      local(), std::chrono::seconds(120), "checkpoint file",
      [id = c.request](checkpoint_shard& f) {
        return schema::checkpoint_written{id, f.file, f.sha256, f.bytes, f.tensors, ""};
      },
      [id = c.request](const std::string& why) {
        return schema::checkpoint_written{id, "", "", 0, 0, why};
      },
      checkpoint_atom::value, c.dir, static_cast<std::int64_t>(c.step));
}
// Re-homing: an owner sends its state, or a replica added to this node (its
// target names the stage) is created and loads it.
void worker_agent_state::handle(const schema::state_copy& c) {
  learn_proxy();
  auto a = local();
  if (!a)
    a = add_replica(schema::added_replica_stage(target_));
  ask_local<state_copy>(
      a, std::chrono::seconds(120), "state copy",
      [id = c.request](state_copy& r) {
        return schema::state_copied{id, r.digest, r.bytes, ""};
      },
      [id = c.request](const std::string& why) {
        return schema::state_copied{id, 0, 0, why};
      },
      copy_atom::value, c.generation, static_cast<std::int64_t>(c.step));
}

// Asks `a` and answers the proxy that sent the current frame. `refuse`
// makes the answer to an error, or is no_refusal: the error is logged.
template <class Result, class Answer, class Refuse, class... Ts>
void worker_agent_state::ask_local(const stage_actor& a,
                                   std::chrono::milliseconds timeout, const char* what,
                                   Answer answer, Refuse refuse, Ts&&... xs) {
  auto proxy = caf::actor_cast<caf::actor>(self_->current_sender());
  auto fail = [this, proxy, what, refuse](const std::string& why) {
    if constexpr (std::is_same_v<Refuse, no_refusal>)
      logger_->warn("node {}: no {}: {}", member_, what, why);
    else
      send_frame(self_, proxy, refuse(why));
  };
  if (!a) {
    fail("node " + std::to_string(node_) + " has no actor for this request");
    return;
  }
  self_->request(a, timeout, std::forward<Ts>(xs)...)
      .then([this, proxy, answer](Result& r) { send_frame(self_, proxy, answer(r)); },
            [fail](caf::error& err) { fail(describe(err)); });
}

// A new, empty replica of `stage` (p*S+s with P pipelines) in this node's
// group; invalid when this node has no assignment yet or the stage does not
// exist.
stage_actor worker_agent_state::add_replica(int stage) {
  const auto& cfg = res_.cfg;
  if (!group_ || stage < 0 || stage >= cfg.coordinates())
    return {};
  const int s = stage % cfg.stages;
  auto actor = spawn_replica(
      self_, node_, res_,
      std::make_shared<stage_executor>(cfg, s, parts_.at(static_cast<std::size_t>(s)),
                                       res_.corpus, stage / cfg.stages),
      group_);
  add_local(target_, actor);
  logger_->info("node {}: a new replica of stage {}", node_, stage);
  return actor;
}

// The manager gave up on an added replica (its copy failed).
void worker_agent_state::drop_local(target t) {
  auto it = locals_.find(t);
  if (it == locals_.end())
    return;
  target_of_.erase(caf::actor_cast<caf::strong_actor_ptr>(it->second));
  self_->send_exit(it->second, caf::exit_reason::user_shutdown);
  locals_.erase(it);
  proxies_.erase(t);
}

void worker_agent_state::handle(const schema::generation_end& g) {
  logger_->info("node {}: {}", member_, g.reason); // "generation 2 ended: node 1 lost"
  if (registry_)
    registry_->abort(g.generation, g.reason);
}

void worker_agent_state::handle(const schema::leave& l) {
  if (l.stay) {
    // Only the actors of the plan being left say so (a late frame of an
    // older one must not undo a newer assignment).
    auto p = proxies_.find(target_);
    if (p == proxies_.end() ||
        p->second != caf::actor_cast<caf::actor>(self_->current_sender()))
      return;
    logger_->info("node {}: {}; waiting for a new assignment", member_, l.reason);
    reset();
    return;
  }
  if (schema::added_replica_stage(target_) >= 0) {
    logger_->info("node {}: the replica of stage {} goes: {}", member_,
                  schema::added_replica_stage(target_), l.reason);
    drop_local(target_);
    return;
  }
  logger_->info("node {}: leaving: {}", member_, l.reason);
  finish({});
}

// Back to a member without an assignment: the node's actors and transports
// go, the membership and the heartbeats stay.
void worker_agent_state::reset() {
  target_of_.clear(); // their ends are not the node's failure
  if (group_)
    group_->kill_all({});
  group_.reset();
  if (registry_)
    registry_->abort_all("the plan was left");
  registry_.reset();
  locals_.clear();
  proxies_.clear();
  held_.clear();
}

} // namespace bamboo
