#include "actors/net/worker_agent.hpp"

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/failure_detector.hpp"
#include "actors/net/frame_session.hpp"
#include "actors/net/gateway.hpp"
#include "actors/net/wire_values.hpp"
#include "actors/net/worker_agent_state.hpp"
#include "log/log.hpp"
#include "model/model_definition.hpp"
#include "transport/transport_registry.hpp"

namespace bamboo {

caf::behavior worker_agent_state::make_behavior(worker_spec spec) {
  spec_ = std::move(spec);
  logger_ = log::get("bamboo.worker");
  if (!spec_.actors)
    spec_.actors = actor_board::make();
  row_ = spec_.actors->enter("agent", -1, -1, "joining");
  self_->set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
  // Told to go (the process stops): the node's actors and the detector go too,
  // or the actor system would wait for them forever.
  guard_from_strangers(self_, [this](const char*) { stranger(); });
  self_->set_exit_handler([this](caf::exit_msg& m) {
    const auto& sender = self_->current_sender();
    if (sender ? sender->node() == self_->node() : m.source.node() == self_->node())
      finish(std::move(m.reason));
    else
      stranger();
  });
  self_->monitor(spec_.gateway);
  ask_to_join();
  return {
      [this](const wire_frame& w) { on_frame(w); },
      // From this process's failure detector: on to the gateway as this member.
      [this](schema::heartbeat hb) {
        if (member_ < 0 ||
            self_->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(detector_))
          return;
        hb.node = member();
        row_.set(registry_ ? "assigned" : "standby",
                 "assigned in generation " + std::to_string(generation_),
                 self_->mailbox().size());
        hb.actors = actor_board::renumbered(spec_.actors->rows(), member_);
        send_gateway(hb);
      },
      [this](tick_atom) {
        if (self_->current_sender() == self_->ctrl())
          check_manager();
      },
      [this](join_timeout_atom, int attempt) {
        if (self_->current_sender() == self_->ctrl() && member_ < 0 &&
            attempt == attempts_)
          finish(make_error(errc::node_lost, "no answer from the manager to a join"));
      },
      [this](notice_atom, std::int64_t deadline_ms) {
        if (!from_this_process(self_))
          return stranger();
        logger_->info("node {}: preemption notice, {} ms left", member_, deadline_ms);
        send_gateway(schema::preemption_notice{member(), deadline_ms});
        if (!group_)
          finish({}); // nothing to hand off
      },
      // The rendezvous store's operations, from this node's transports: on to
      // the manager as this member, the reply back when it comes.
      [this](store_atom, const wire_frame& w) -> caf::result<wire_frame> {
        if (!from_this_process(self_))
          return make_error(errc::invalid_config, "not from this process");
        if (member_ < 0)
          return make_error(errc::node_lost, "not a member (yet)");
        auto d = schema::decode(w.bytes);
        if (!d || !std::holds_alternative<schema::store_request>(d.value))
          return make_error(errc::invalid_config, "not a store request");
        auto r = std::get<schema::store_request>(std::move(d.value));
        r.request = ++store_requests_;
        auto rp = self_->make_response_promise();
        store_waits_.emplace(r.request, rp);
        send_gateway(r);
        return rp;
      },
      // From the node's actors: on to the actor that stands for the sender.
      [this](const schema::step_report& r) { to_manager(r); },
      [this](committed_atom, std::uint64_t gen, std::int64_t k, int stage) {
        to_manager(to_event<schema::committed>(gen, k, stage));
      },
      [this](synced_atom, std::uint64_t gen, std::int64_t k, int stage) {
        to_manager(to_event<schema::synced>(gen, k, stage));
      },
      [this](sync_lost_atom, std::uint64_t gen, std::int64_t k, int stage) {
        to_manager(to_event<schema::sync_lost>(gen, k, stage));
      },
      [this](step_failed_atom, std::uint64_t gen, std::int64_t k, int stage,
             const std::string& why) {
        to_manager(schema::step_failed{gen, static_cast<std::uint64_t>(k),
                                       static_cast<std::uint32_t>(stage), why});
      },
  };
}

void worker_agent_state::ask_to_join() {
  member_ = -1;
  session_book::close(self_->node(), spec_.gateway->node());
  handshake_ = handshake{make_nonce(),
                         {},
                         caf::to_string(self_->node()),
                         caf::to_string(spec_.gateway->node())};
  send_gateway(schema::challenge_request{0xffffffffu, handshake_.worker_nonce,
                                         handshake_.worker_id});
  self_->delayed_send(self_, spec_.join_timeout, join_timeout_atom::value, ++attempts_);
}

// The manager's heartbeat, through the gateway.
void worker_agent_state::handle(const schema::heartbeat& hb) {
  if (hb.node == manager_node &&
      self_->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(spec_.gateway))
    manager_seen_ = std::chrono::steady_clock::now();
}

void worker_agent_state::check_manager() {
  const auto now = std::chrono::steady_clock::now();
  // A late tick means this process was paused (stopped, say): the silence
  // is its own, and the manager gets a full timeout again.
  if (now - last_tick_ > 2 * spec_.heartbeat_period)
    manager_seen_ = now;
  last_tick_ = now;
  const auto silent =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - manager_seen_);
  if (silent > manager_timeout_) {
    logger_->error("node {}: no heartbeat from the manager for {} ms (timeout {} ms): "
                   "it is stopped or cut off; leaving",
                   member_, silent.count(), manager_timeout_.count());
    finish(make_error(errc::node_lost, manager_silent_words +
                                           std::to_string(silent.count()) +
                                           " ms: it is stopped or cut off"));
    return;
  }
  self_->delayed_send(self_, spec_.heartbeat_period, tick_atom::value);
}

// The manager proves the token over both nonces and both identities before
// this worker proves it: a relay or an impostor learns nothing.
void worker_agent_state::handle(const schema::join_challenge& c) {
  if (member_ >= 0 || !from_gateway() || !handshake_.manager_nonce.empty())
    return;
  handshake_.manager_nonce = c.nonce;
  if (auto why = refuse_manager(spec_.token, handshake_, c.identity, c.proof)) {
    logger_->error("refused the manager: {}", *why);
    finish(make_error(errc::invalid_config, "refused the manager: " + *why));
    return;
  }
  schema::join_request req;
  req.zone = spec_.zone;
  req.version = "0.1.0";
  req.proof = prove(spec_.token, proof_role::worker, handshake_);
  if (spec_.model) {
    req.model = spec_.model->name();
    req.model_digest = model_digest(*spec_.model);
  }
  send_gateway(req); // not sealed: it carries its proof
  // The manager seals its answer, and every later frame, with this key.
  session_book::open(self_->node(), spec_.gateway->node(),
                     session_key(spec_.token, handshake_));
}

void worker_agent_state::stranger() {
  if (told_.size() < 1024 && told_.insert(self_->current_sender()).second)
    logger_->warn("node {}: dropped a message from {}: not the manager's, nor this "
                  "process's",
                  member_, caf::to_string(self_->current_sender()));
}

void worker_agent_state::handle(const schema::join_accept& a) {
  if (member_ >= 0 || !from_gateway())
    return;
  member_ = static_cast<int>(a.node);
  store_port_ = a.store_port;
  if (a.heartbeat_ms > 0)
    spec_.heartbeat_period = std::chrono::milliseconds(a.heartbeat_ms);
  if (a.heartbeat_misses > 0 && manager_timeout_.count() == 0) {
    manager_timeout_ = spec_.heartbeat_period * a.heartbeat_misses;
    manager_seen_ = last_tick_ = std::chrono::steady_clock::now();
    self_->delayed_send(self_, spec_.heartbeat_period, tick_atom::value);
  }
  logger_->info("joined {}as node {}", joins_ ? "again " : "", member_);
  if (spec_.on_joined)
    spec_.on_joined(member_, joins_ > 0);
  ++joins_;
  // One detector for the life of the process; across rejoins its heartbeats
  // carry the current member number.
  if (!detector_)
    detector_ = spawn_failure_detector(self_, member_, caf::actor_cast<caf::actor>(self_),
                                       spec_.heartbeat_period, spec_.actors);
}

void worker_agent_state::send_gateway(const schema::frame& f) {
  send_frame(self_, spec_.gateway, f);
}

void worker_agent_state::on_frame(const wire_frame& w) {
  // Frames only from the manager this worker joined (its gateway and the
  // actors of the manager's process that stand for this node's actors).
  const auto& sender = self_->current_sender();
  if (!sender || sender->node() != spec_.gateway->node())
    return stranger();
  std::string why;
  auto f = open_targeted(self_, w, spec_.frame_limit, "bamboo.worker", &why);
  if (!f) { // the sender is told, once, so two peers never bounce rejections
    if (told_.insert(self_->current_sender()).second)
      send_frame(self_, caf::actor_cast<caf::actor>(self_->current_sender()),
                 schema::frame_rejected{why});
    return;
  }
  target_ = f->target;
  std::visit([this](const auto& x) { handle(x); }, f->body);
}

void worker_agent_state::handle(const schema::order& o) {
  if (!from_gateway())
    return stranger();
  logger_->warn("node {}: the manager orders '{}' ({})", member_, o.kind, o.reason);
  if (spec_.on_order)
    spec_.on_order(o.kind, o.seconds);
}

void worker_agent_state::handle(const schema::join_refused& r) {
  if (!from_gateway())
    return;
  if (member_ < 0) { // the join itself: a wrong token
    finish(make_error(errc::invalid_config, "refused: " + r.reason));
    return;
  }
  // Declared lost (e.g. stopped too long): with a stage its state is stale
  // and it must go; without one it joins again as a new node.
  logger_->warn("node {}: fenced by the manager: {}", member_, r.reason);
  if (group_)
    finish(make_error(errc::node_lost, "fenced: " + r.reason));
  else
    ask_to_join();
}

void worker_agent_state::handle(const schema::store_reply& r) {
  auto it = store_waits_.find(r.request);
  if (!from_gateway() || it == store_waits_.end())
    return;
  it->second.deliver(to_wire(r));
  store_waits_.erase(it);
}

void worker_agent_state::handle(const schema::frame_rejected& r) {
  logger_->warn("node {}: the manager rejected a frame: {}", member_, r.reason);
}

void worker_agent_state::on_down(const caf::down_msg& dm) {
  if (dm.source == spec_.gateway.address()) { // gone without letting the node go
    logger_->error("node {}: lost the manager: {}", member_, exit_words(dm.reason));
    finish(make_error(errc::node_lost, "lost the manager: the connection dropped (" +
                                           exit_words(dm.reason) + ")"));
    return;
  }
  if (target_of_.count(caf::actor_cast<caf::strong_actor_ptr>(dm.source)) == 0)
    return;
  logger_->error("node {}: an actor of the node ended ({}): leaving", member_,
                 exit_words(dm.reason));
  finish(make_error(errc::node_lost, "an actor of the node ended"));
}

// The node's actors end with the process's agent.
void worker_agent_state::finish(caf::error reason) {
  if (group_)
    group_->kill_all({});
  if (detector_)
    self_->send_exit(detector_, caf::exit_reason::user_shutdown);
  session_book::close(self_->node(), spec_.gateway->node());
  self_->quit(std::move(reason));
}

void worker_agent_state::unexpected_frame() {
  logger_->warn("node {}: dropped a frame of a kind a worker does not take", member_);
}

namespace {

caf::behavior worker_agent(caf::stateful_actor<worker_agent_state>* self,
                           worker_spec spec) {
  return self->state.make_behavior(std::move(spec));
}

} // namespace

caf::actor spawn_worker_agent(caf::actor_system& sys, worker_spec spec) {
  return sys.spawn(worker_agent, std::move(spec));
}

} // namespace bamboo
