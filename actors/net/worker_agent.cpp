#include "actors/net/worker_agent.hpp"

#include <map>
#include <set>

#include <caf/all.hpp>

#include "actors/actor_board.hpp"
#include "actors/cluster_manager.hpp"
#include "actors/errors.hpp"
#include "actors/failure_detector.hpp"
#include "actors/net/assignment.hpp"
#include "actors/net/auth.hpp"
#include "actors/net/control_store.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/gateway.hpp"
#include "actors/net/wire_values.hpp"
#include "actors/node.hpp"
#include "actors/stage_actor.hpp"
#include "log/log.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/model.hpp"
#include "model/model_definition.hpp"
#include "model/stage_executor.hpp"
#include "transport/transport_registry.hpp"

namespace bamboo {

namespace {

using schema::target;

struct agent_state {
  static inline const char* name = "bamboo.worker";

  explicit agent_state(caf::event_based_actor* self) : self_(self) {}

  caf::behavior make_behavior(worker_spec spec) {
    spec_ = std::move(spec);
    logger_ = log::get("bamboo.worker");
    if (!spec_.actors)
      spec_.actors = actor_board::make();
    row_ = spec_.actors->enter("agent", -1, -1, "joining");
    self_->set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
    // Told to go (the process stops): the node's actors and the detector go too,
    // or the actor system would wait for them forever.
    self_->set_exit_handler([this](caf::exit_msg& m) {
      if (from_this_process(self_) || !m.source || m.source.node() == self_->node())
        finish(std::move(m.reason));
    });
    self_->monitor(spec_.gateway);
    ask_to_join();
    return {
        [this](const wire_frame& w) { on_frame(w); },
        // From this process's failure detector: on to the gateway as this member.
        [this](schema::heartbeat hb) {
          if (member_ < 0 || self_->current_sender() !=
                                 caf::actor_cast<caf::strong_actor_ptr>(detector_))
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

private:
  std::uint32_t member() const { return static_cast<std::uint32_t>(member_); }

  void ask_to_join() {
    member_ = -1;
    handshake_ = handshake{make_nonce(),
                           {},
                           caf::to_string(self_->node()),
                           caf::to_string(spec_.gateway->node())};
    send_gateway(schema::challenge_request{0xffffffffu, handshake_.worker_nonce,
                                           handshake_.worker_id});
    self_->delayed_send(self_, spec_.join_timeout, join_timeout_atom::value, ++attempts_);
  }

  // The manager's heartbeat, through the gateway.
  void handle(const schema::heartbeat& hb) {
    if (hb.node == manager_node &&
        self_->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(spec_.gateway))
      manager_seen_ = std::chrono::steady_clock::now();
  }

  void check_manager() {
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
      finish(make_error(errc::node_lost, "the manager sent no heartbeat for " +
                                             std::to_string(silent.count()) +
                                             " ms: it is stopped or cut off"));
      return;
    }
    self_->delayed_send(self_, spec_.heartbeat_period, tick_atom::value);
  }

  // The manager proves the token over both nonces and both identities before
  // this worker proves it: a relay or an impostor learns nothing.
  void handle(const schema::join_challenge& c) {
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
    send_gateway(req);
  }

  bool from_gateway() const {
    return self_->current_sender() ==
           caf::actor_cast<caf::strong_actor_ptr>(spec_.gateway);
  }

  void stranger() {
    if (told_.size() < 1024 && told_.insert(self_->current_sender()).second)
      logger_->warn("node {}: dropped a message from {}: not the manager's, nor this "
                    "process's",
                    member_, caf::to_string(self_->current_sender()));
  }

  void handle(const schema::join_accept& a) {
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
      detector_ =
          spawn_failure_detector(self_, member_, caf::actor_cast<caf::actor>(self_),
                                 spec_.heartbeat_period, spec_.actors);
  }

  void send_gateway(const schema::frame& f) { self_->send(spec_.gateway, to_wire(f)); }

  // A frame for the manager-side actor of the local actor that sent the message.
  void to_manager(const schema::frame& f) {
    auto it = target_of_.find(self_->current_sender());
    if (it == target_of_.end()) {
      logger_->debug("node {}: dropped a frame from an actor of an earlier plan",
                     member_);
      return;
    }
    auto p = proxies_.find(it->second);
    if (p == proxies_.end()) {
      logger_->debug("node {}: holding a frame for target {} until the manager's "
                     "actor is known ({} known)",
                     member_, static_cast<int>(it->second), proxies_.size());
      held_[it->second].push_back(to_wire(f));
      return;
    }
    self_->send(p->second, to_wire(f));
  }

  void on_frame(const wire_frame& w) {
    // Frames only from the manager this worker joined (its gateway and the
    // actors of the manager's process that stand for this node's actors).
    const auto& sender = self_->current_sender();
    if (!sender || sender->node() != spec_.gateway->node())
      return stranger();
    std::string why;
    auto f = open_targeted(self_, w, spec_.frame_limit, "bamboo.worker", &why);
    if (!f) { // the sender is told, once, so two peers never bounce rejections
      if (told_.insert(self_->current_sender()).second)
        self_->send(caf::actor_cast<caf::actor>(self_->current_sender()),
                    to_wire(schema::frame_rejected{why}));
      return;
    }
    target_ = f->target;
    std::visit([this](const auto& x) { handle(x); }, f->body);
  }

  stage_actor local() const {
    auto it = locals_.find(target_);
    return it == locals_.end() ? stage_actor{} : it->second;
  }

  template <class... Ts>
  void to_local(Ts&&... xs) {
    if (auto a = local())
      self_->send(a, std::forward<Ts>(xs)...);
    else
      logger_->warn("node {}: a frame for an actor this node does not have", member_);
  }

  // The manager-side actor of target_ is the sender of this frame.
  void learn_proxy() {
    auto& p = proxies_[target_];
    p = caf::actor_cast<caf::actor>(self_->current_sender());
    for (auto& w : held_[target_])
      self_->send(p, w);
    held_.erase(target_);
  }

  void handle(const schema::assign& a) {
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
            : std::make_shared<transport_registry>(
                  in->cfg.coordinates(), spec_.store_host, store_port_, spec_.advertise);
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

  void add_local(target t, const stage_actor& a) {
    locals_[t] = a;
    target_of_[caf::actor_cast<caf::strong_actor_ptr>(a)] = t;
  }

  // A newer plan's actor may introduce itself before the plan's assignment
  // comes: it is known from that assignment on. An older one's is stale.
  void handle(const schema::attach& a) {
    if (a.generation == generation_)
      learn_proxy();
    else if (a.generation > generation_)
      early_[target_] = {a.generation,
                         caf::actor_cast<caf::actor>(self_->current_sender())};
  }
  void handle(const schema::run_step& r) {
    to_local(run_step_atom::value, r.generation, static_cast<std::int64_t>(r.step));
  }
  void handle(const schema::commit& c) {
    if (!(c.clip_coef >= 0.0 && c.clip_coef <= 1.0)) { // NaN fails too
      logger_->warn("node {}: dropped a commit with clip coefficient {} (not in [0, 1])",
                    member_, c.clip_coef);
      return;
    }
    to_local(c);
  }
  void handle(const schema::shadow_link& l) {
    // The owner only needs to know that a replica exists: it sends the
    // gradients through the transport, to the rank before its own.
    to_local(shadow_atom::value, l.present, caf::actor{});
  }
  void handle(const schema::resync& r) {
    to_local(resync_atom::value, r.generation, static_cast<std::int64_t>(r.step));
  }
  void handle(const schema::resume& r) { to_local(from_frame(r)); }
  // The four requests a proxy forwards for its stage: each asks the local
  // actor and answers the proxy with a frame made from the result, or, for
  // those that take a refusal, from the error (the others log it).
  void handle(const schema::progress_request& r) {
    ask_local<stage_progress>(
        local(), spec_.progress_timeout, "progress to report",
        [id = r.request](stage_progress& p) { return to_frame(p, id); }, no_refusal{},
        progress_atom::value, r.generation);
  }
  void handle(const schema::state_request& r) {
    ask_local<std::vector<schema::tensor_digest>>(
        local(), std::chrono::seconds(60), "state digests to report",
        [id = r.request](std::vector<schema::tensor_digest>& d) {
          return schema::state_report{id, std::move(d)};
        },
        no_refusal{}, digest_atom::value);
  }
  void handle(const schema::checkpoint_request& c) {
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
  void handle(const schema::state_copy& c) {
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

  struct no_refusal {};

  // Asks `a` and answers the proxy that sent the current frame. `refuse`
  // makes the answer to an error, or is no_refusal: the error is logged.
  template <class Result, class Answer, class Refuse, class... Ts>
  void ask_local(const stage_actor& a, std::chrono::milliseconds timeout,
                 const char* what, Answer answer, Refuse refuse, Ts&&... xs) {
    auto proxy = caf::actor_cast<caf::actor>(self_->current_sender());
    auto fail = [this, proxy, what, refuse](const std::string& why) {
      if constexpr (std::is_same_v<Refuse, no_refusal>)
        logger_->warn("node {}: no {}: {}", member_, what, why);
      else
        self_->send(proxy, to_wire(refuse(why)));
    };
    if (!a) {
      fail("node " + std::to_string(node_) + " has no actor for this request");
      return;
    }
    self_->request(a, timeout, std::forward<Ts>(xs)...)
        .then(
            [this, proxy, answer](Result& r) { self_->send(proxy, to_wire(answer(r))); },
            [fail](caf::error& err) { fail(describe(err)); });
  }

  // A new, empty replica of `stage` (p*S+s with P pipelines) in this node's
  // group; invalid when this node has no assignment yet or the stage does not
  // exist.
  stage_actor add_replica(int stage) {
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
  void drop_local(target t) {
    auto it = locals_.find(t);
    if (it == locals_.end())
      return;
    target_of_.erase(caf::actor_cast<caf::strong_actor_ptr>(it->second));
    self_->send_exit(it->second, caf::exit_reason::user_shutdown);
    locals_.erase(it);
    proxies_.erase(t);
  }

  void handle(const schema::generation_end& g) {
    logger_->info("node {}: {}", member_, g.reason); // "generation 2 ended: node 1 lost"
    if (registry_)
      registry_->abort(g.generation, g.reason);
  }
  void handle(const schema::order& o) {
    if (!from_gateway())
      return stranger();
    logger_->warn("node {}: the manager orders '{}' ({})", member_, o.kind, o.reason);
    if (spec_.on_order)
      spec_.on_order(o.kind, o.seconds);
  }
  void handle(const schema::leave& l) {
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
  void handle(const schema::join_refused& r) {
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
  void handle(const schema::store_reply& r) {
    auto it = store_waits_.find(r.request);
    if (!from_gateway() || it == store_waits_.end())
      return;
    it->second.deliver(to_wire(r));
    store_waits_.erase(it);
  }
  void handle(const schema::frame_rejected& r) {
    logger_->warn("node {}: the manager rejected a frame: {}", member_, r.reason);
  }
  template <class T>
  void handle(const T&) {
    logger_->warn("node {}: dropped a frame of a kind a worker does not take", member_);
  }

  void on_down(const caf::down_msg& dm) {
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

  // Back to a member without an assignment: the node's actors and transports
  // go, the membership and the heartbeats stay.
  void reset() {
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

  // The node's actors end with the process's agent.
  void finish(caf::error reason) {
    if (group_)
      group_->kill_all({});
    if (detector_)
      self_->send_exit(detector_, caf::exit_reason::user_shutdown);
    self_->quit(std::move(reason));
  }

  caf::event_based_actor* self_;
  worker_spec spec_;
  std::shared_ptr<spdlog::logger> logger_;
  int member_ = -1;     // the gateway's number of this process, once joined
  handshake handshake_; // of the join under way
  int joins_ = 0, attempts_ = 0;
  std::chrono::milliseconds manager_timeout_{0}; // 0: the manager is not watched
  std::chrono::steady_clock::time_point manager_seen_, last_tick_;
  caf::actor detector_;
  actor_board::entry row_; // this agent on the process's board
  std::uint16_t store_port_ = 0;
  std::shared_ptr<transport_registry> registry_;
  std::shared_ptr<node_group> group_;
  // From the assignment: what a replica added later is made of.
  int node_ = -1;
  std::uint64_t generation_ = 0; // of the assignment
  node_resources res_;           // what the node's actors run with (a later replica too)
  std::vector<stage_range> parts_;
  target target_ = target::none; // of the frame being handled
  std::map<target, stage_actor> locals_;
  std::map<target, caf::actor> proxies_;
  std::map<caf::strong_actor_ptr, target> target_of_;
  std::map<target, std::vector<wire_frame>> held_; // for proxies not yet known
  // Actors of a newer plan that introduced themselves before its assignment.
  std::map<target, std::pair<std::uint64_t, caf::actor>> early_;
  std::set<caf::strong_actor_ptr> told_; // peers told of a bad frame
  std::uint64_t store_requests_ = 0;
  std::map<std::uint64_t, caf::response_promise> store_waits_;
};

caf::behavior worker_agent(caf::stateful_actor<agent_state>* self, worker_spec spec) {
  return self->state.make_behavior(std::move(spec));
}

} // namespace

caf::actor spawn_worker_agent(caf::actor_system& sys, worker_spec spec) {
  return sys.spawn(worker_agent, std::move(spec));
}

} // namespace bamboo
