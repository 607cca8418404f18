#include "actors/net/stage_proxy.hpp"

#include <map>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/net/wire_values.hpp"
#include "log/log.hpp"

namespace bamboo {

namespace {

struct proxy_state {
  static inline const char* name = "bamboo.proxy";

  explicit proxy_state(stage_proxy_actor::pointer self) : self_(self) {}

  stage_proxy_actor::behavior_type make_behavior(stage_proxy_spec spec,
                                                 caf::actor manager) {
    spec_ = std::move(spec);
    manager_ = std::move(manager);
    logger_ = log::get("bamboo.proxy");
    guard_from_strangers(self_, [this](const char*) { stranger(); });
    tell(self_, spec_.gateway, attach_atom::value, spec_.member);
    if (spec_.assign)
      forward(*spec_.assign);
    else
      forward(schema::attach{"shadow", spec_.generation});
    // The worker's actors end with the manager's: a proxy that stops tells them.
    // When the gateway ended it (the process was declared lost) the process is
    // fenced: if it still runs (it was stopped, say), its state is stale.
    self_->attach_functor([agent = spec_.agent, target = spec_.target,
                           sys = &self_->system()](const caf::error& e) {
      auto is = [&](errc c) {
        return e.category() == error_category && e.code() == static_cast<std::uint8_t>(c);
      };
      schema::leave l{"the manager is done with the node"};
      if (is(errc::node_lost))
        l.reason = "fenced: declared lost (" + describe(e) + ")";
      else if (is(errc::unrecoverable_failure)) // a rollback: wait for a new plan
        l = schema::leave{"rolling back to a checkpoint (" + describe(e) + ")", true};
      else if (is(errc::plan_changed)) // a re-plan at a step boundary
        l = schema::leave{"a new plan (" + describe(e) + ")", true};
      send_from_this_process(
          *sys, agent,
          caf::make_message(sealed_for(sys->node(), agent, to_wire(l, target))));
    });
    return {
        [this](run_step_atom, std::uint64_t gen, std::int64_t k) {
          if (stranger())
            return;
          forward(schema::run_step{gen, static_cast<std::uint64_t>(k)});
        },
        [this](progress_atom, std::uint64_t gen) {
          const bool peer = stranger(); // before the promise takes the sender
          auto rp = self_->make_response_promise<stage_progress>();
          if (peer)
            return refused(rp);
          const auto id = ++requests_;
          pending_.emplace(id, rp);
          forward(schema::progress_request{gen, id});
          return rp;
        },
        [this](const resume_order& o) {
          if (!stranger())
            forward(to_frame(o));
        },
        [this](const schema::commit& c) {
          if (!stranger())
            forward(c);
        },
        [this](const shadow_update&) {
          logger_->warn("node {}: an in-process shadow update cannot cross processes",
                        spec_.node);
        },
        [this](shadow_atom, bool present, const caf::actor&) {
          if (!stranger())
            forward(schema::shadow_link{present});
        },
        [this](resync_atom, std::uint64_t gen, std::int64_t k) {
          if (!stranger())
            forward(to_event<schema::resync>(gen, k, 0));
        },
        [](params_atom) -> caf::result<std::vector<param_blob>> {
          return make_error(errc::stage_failed,
                            "parameters are not collected across processes");
        },
        [this](digest_atom) {
          const bool peer = stranger(); // before the promise takes the sender
          auto rp = self_->make_response_promise<std::vector<schema::tensor_digest>>();
          if (peer)
            return refused(rp);
          const auto id = ++requests_;
          digests_.emplace(id, rp);
          forward(schema::state_request{id});
          return rp;
        },
        [](clone_atom) -> caf::result<replica_handle> {
          return make_error(errc::stage_failed,
                            "replicas are not cloned across processes");
        },
        [this](copy_atom, std::uint64_t gen, std::int64_t k) {
          const bool peer = stranger(); // before the promise takes the sender
          auto rp = self_->make_response_promise<state_copy>();
          if (peer)
            return refused(rp);
          const auto id = ++requests_;
          copies_.emplace(id, rp);
          forward(schema::state_copy{gen, static_cast<std::uint64_t>(k), id});
          return rp;
        },
        [this](checkpoint_atom, const std::string& dir, std::int64_t k) {
          const bool peer = stranger(); // before the promise takes the sender
          auto rp = self_->make_response_promise<checkpoint_shard>();
          if (peer)
            return refused(rp);
          const auto id = ++requests_;
          checkpoints_.emplace(id, rp);
          forward(schema::checkpoint_request{id, static_cast<std::uint64_t>(k), dir});
          return rp;
        },
        [this](const replica_handle&) {
          logger_->warn("node {}: an in-process replica cannot cross processes",
                        spec_.node);
        },
        [this](const wire_frame& w) { on_frame(w); },
        [this](notice_atom, std::int64_t deadline_ms) {
          if (stranger())
            return;
          if (spec_.target == schema::target::stage)
            tell(self_, manager_, notice_atom::value, spec_.node, deadline_ms);
        },
    };
  }

private:
  // Only frames come from the worker; every other message from this process
  // (the manager, the gateway). A peer's is dropped, logged once.
  bool stranger() {
    if (from_this_process(self_))
      return false;
    if (!told_stranger_) {
      told_stranger_ = true;
      logger_->warn("node {}: dropped a message from {}, not an actor of this process",
                    spec_.node, caf::to_string(self_->current_sender()));
    }
    return true;
  }
  template <class Promise>
  Promise refused(Promise& rp) {
    rp.deliver(make_error(errc::stage_failed, "not from this process"));
    return rp;
  }

  template <class T>
  void forward(const T& body) {
    tell(self_, spec_.agent,
         sealed_for(self_->node(), spec_.agent, to_wire(body, spec_.target)));
  }

  void on_frame(const wire_frame& w) {
    if (self_->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(spec_.agent)) {
      logger_->warn("dropped a frame for node {} from another process", spec_.node);
      return;
    }
    std::string why;
    auto f = open_frame(self_, w, spec_.frame_limit, "bamboo.proxy", &why);
    if (f)
      std::visit([this](const auto& x) { handle(x); }, *f);
    else if (!told_) { // once: two peers must never bounce rejections
      told_ = true;
      forward(schema::frame_rejected{why});
    }
  }

  // A worker speaks through this proxy only for the stage it stands for.
  bool foreign(std::int64_t stage) {
    if (spec_.stage < 0 || stage == spec_.stage)
      return false;
    if (!told_foreign_) {
      told_foreign_ = true;
      logger_->warn("node {}: refused a report for stage {} from the worker that holds "
                    "stage {} here",
                    spec_.node, stage, spec_.stage);
    }
    return true;
  }

  template <class Atom>
  void relay(Atom atom, const schema::stage_done& e) {
    auto [gen, k, stage] = from_event(e);
    if (!foreign(stage))
      tell(self_, manager_, atom, gen, k, stage);
  }

  void handle(const schema::step_report& r) {
    if (!foreign(r.stage))
      tell(self_, manager_, r);
  }
  void handle(const schema::committed& e) { relay(committed_atom::value, e); }
  void handle(const schema::synced& e) { relay(synced_atom::value, e); }
  void handle(const schema::sync_lost& e) { relay(sync_lost_atom::value, e); }
  void handle(const schema::step_failed& f) {
    if (foreign(f.stage))
      return;
    tell(self_, manager_, step_failed_atom::value, f.generation,
         static_cast<std::int64_t>(f.step), static_cast<int>(f.stage), f.reason);
  }
  void handle(const schema::progress_report& p) {
    auto it = pending_.find(p.request);
    if (it == pending_.end())
      return;
    it->second.deliver(from_frame(p));
    pending_.erase(it);
  }
  void handle(const schema::state_report& r) {
    auto it = digests_.find(r.request);
    if (it == digests_.end())
      return;
    it->second.deliver(r.tensors);
    digests_.erase(it);
  }
  void handle(const schema::state_copied& r) {
    auto it = copies_.find(r.request);
    if (it == copies_.end())
      return;
    if (r.error.empty())
      it->second.deliver(state_copy{r.digest, r.bytes});
    else
      it->second.deliver(make_error(errc::transport_failure, r.error));
    copies_.erase(it);
  }
  void handle(const schema::checkpoint_written& r) {
    auto it = checkpoints_.find(r.request);
    if (it == checkpoints_.end())
      return;
    if (r.error.empty())
      it->second.deliver(checkpoint_shard{r.file, r.sha256, r.bytes, r.tensors});
    else
      it->second.deliver(
          make_error(errc::checkpoint_failed,
                     "node " + std::to_string(spec_.node) + ": " + r.error));
    checkpoints_.erase(it);
  }
  void handle(const schema::frame_rejected& r) {
    logger_->warn("node {} rejected a frame: {}", spec_.node, r.reason);
  }
  template <class T>
  void handle(const T&) {
    logger_->warn("dropped a frame of an unexpected kind from node {}", spec_.node);
  }

  stage_proxy_actor::pointer self_;
  stage_proxy_spec spec_;
  caf::actor manager_;
  std::shared_ptr<spdlog::logger> logger_;
  std::uint64_t requests_ = 0;
  bool told_ = false, told_stranger_ = false, told_foreign_ = false;
  std::map<std::uint64_t, caf::typed_response_promise<stage_progress>> pending_;
  std::map<std::uint64_t, caf::typed_response_promise<std::vector<schema::tensor_digest>>>
      digests_;
  std::map<std::uint64_t, caf::typed_response_promise<state_copy>> copies_;
  std::map<std::uint64_t, caf::typed_response_promise<checkpoint_shard>> checkpoints_;
};

stage_proxy_actor::behavior_type
proxy_actor(stage_proxy_actor::stateful_pointer<proxy_state> self, stage_proxy_spec spec,
            caf::actor manager) {
  return self->state.make_behavior(std::move(spec), std::move(manager));
}

} // namespace

stage_proxy_actor spawn_stage_proxy(caf::local_actor* manager, stage_proxy_spec spec) {
  return manager->spawn<caf::monitored>(proxy_actor, std::move(spec),
                                        caf::actor_cast<caf::actor>(manager));
}

} // namespace bamboo
