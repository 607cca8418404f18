#include "actors/stage_actor.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <caf/all.hpp>
#include <chrono>

#include "actors/actor_board.hpp"
#include "actors/errors.hpp"
#include "actors/plan/preemption.hpp"
#include "actors/shadow_state.hpp"
#include "actors/shard_writer.hpp"
#include "log/log.hpp"
#include "model/allocator.hpp"
#include "model/checkpoint.hpp"
#include "model/schedule.hpp"
#include "model/stage_executor.hpp"
#include "transport/transport_registry.hpp"

// Weak so that we link with or without OpenBLAS; it keeps its own thread pool,
// which must not oversubscribe the cores the stages already use.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace bamboo {

struct gradient_list {
  std::vector<at::Tensor> grads;
};

namespace {

std::vector<int> to_vector(const std::set<int>& s) {
  return {s.begin(), s.end()};
}

state_copy copy_of(const at::Tensor& flat) {
  auto c = flat.contiguous();
  const auto bytes = static_cast<std::size_t>(c.numel()) * c.element_size();
  return {fnv1a_words(c.data_ptr(), bytes), bytes};
}

struct stage_state {
  static inline const char* name = "bamboo.stage";

  explicit stage_state(stage_actor::pointer self) : self_(self) {}

  void init(stage_actor_spec spec, caf::actor supervisor, const char* kind) {
    spec_ = std::move(spec);
    supervisor_ = std::move(supervisor);
    logger_ = log::get("bamboo.stage");
    // Its name towards the manager and its transport rank: p*S+s.
    stage_ = spec_.executor->coordinate();
    ops_ = make_schedule(spec_.executor->stage(), spec_.cfg.stages,
                         spec_.cfg.pipeline_micro_batches(), spec_.cfg.redundancy);
    frc_enabled_ =
        spec_.replica != nullptr && spec_.cfg.redundancy == redundancy_mode::eager;
    self_->set_default_handler(caf::print_and_drop);
    if (spec_.actors)
      row_ = spec_.actors->enter(kind, spec_.node, stage_,
                                 std::string(kind) == "shadow" ? "shadow" : "active");
  }

  // What bamboo-inspect shows of this actor (its own mailbox: only it may look).
  void say(const char* state, const std::string& doing) {
    if (row_)
      row_.set(state, doing, self_->mailbox().size());
  }
  static std::string step_words(std::int64_t k, const char* what) {
    return "step " + std::to_string(k) + " " + what;
  }

  stage_actor::behavior_type active() {
    return {
        [this](run_step_atom, std::uint64_t gen, std::int64_t k) {
          if (gen < gen_)
            return;
          gen_ = gen;
          run_step(k);
        },
        [this](progress_atom, std::uint64_t) { return progress(); },
        [this](const resume_order& o) { resume(o); },
        [this](const schema::commit& c) { commit(c); },
        [this](const shadow_update&) {
          logger_->warn("stage {}: an active stage got a shadow's update", stage_);
        },
        [this](shadow_atom, bool present, const caf::actor& a) {
          has_shadow_ = present;
          shadow_ = caf::actor_cast<stage_actor>(a);
        },
        // The shadow lost step k's gradients with the generation: send them again.
        [this](resync_atom, std::uint64_t gen, std::int64_t k) {
          if (has_shadow_ && last_sync_.defined() && spec_.executor->updates() == k + 1) {
            gen_ = std::max(gen_, gen);
            send_sync(k, last_sync_);
          }
        },
        [this](params_atom) { return blobs(); },
        [this](digest_atom) { return digests_of(blobs()); },
        // Between steps: the exact state of this stage, for a new shadow.
        [this](clone_atom) { return replica_handle{spec_.executor->clone()}; },
        // A new replica of the successor on this node: FRC may use it.
        [this](const replica_handle& r) {
          spec_.replica = r.executor;
          frc_enabled_ = spec_.cfg.redundancy == redundancy_mode::eager;
        },
        [this](copy_atom, std::uint64_t gen, std::int64_t k) {
          return send_state(gen, k);
        },
        [this](checkpoint_atom, const std::string& step_dir, std::int64_t k) {
          auto rp = self_->make_response_promise<checkpoint_shard>();
          const auto t0 = std::chrono::steady_clock::now();
          auto snap = make_snapshot(blobs(), step_dir, spec_.executor->stage(), k);
          add_checkpoint_snapshot(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                  .count());
          write_shard(self_, std::move(snap), rp);
          return rp;
        },
    };
  }

  stage_actor::behavior_type shadow() {
    return {
        [this](run_step_atom, std::uint64_t, std::int64_t k) {
          logger_->warn("shadow of stage {}: not active, ignored step {}", stage_, k);
        },
        [](progress_atom, std::uint64_t) -> caf::result<stage_progress> {
          return caf::make_error(caf::sec::unexpected_message); // only owners are asked
        },
        [this](const shadow_update& u) {
          spec_.executor->apply_gradients(u.step, u.grads->grads);
          say("shadow", step_words(u.step, "applied, idle"));
          tell(self_, supervisor_, synced_atom::value, u.generation, u.step, stage_);
        },
        [this](const schema::commit& c) {
          if (spec_.sync == shadow_sync::transport)
            receive_sync(c);
        },
        [this](const resume_order& o) {
          logger_->info(
              "node {}: promoting the shadow of stage {} in step {} (generation {})",
              spec_.node, stage_, o.step, o.generation);
          self_->become(active());
          say("promoting", step_words(o.step, "taken over"));
          if (spec_.executor->updates() > o.step) {
            // The owner's update of this step reached us before it died: nothing
            // to redo, but the new generation's group forms only once every rank
            // has joined it (the others waited for this one until Gloo's timeout).
            gen_ = o.generation;
            frc_enabled_ = o.frc_enabled && spec_.replica != nullptr;
            if (connect(o.step))
              tell(self_, supervisor_, committed_atom::value, o.generation, o.step,
                   stage_);
            return;
          }
          spec_.executor->promote(o.step);
          resume(o);
        },
        [this](shadow_atom, bool present, const caf::actor& a) {
          has_shadow_ = present;
          shadow_ = caf::actor_cast<stage_actor>(a);
        },
        [](resync_atom, std::uint64_t, std::int64_t) {
        }, // a shadow has nothing to re-send
        [this](params_atom) { return blobs(); },
        [this](digest_atom) { return digests_of(blobs()); },
        [](clone_atom) -> caf::result<replica_handle> {
          return caf::make_error(caf::sec::unexpected_message); // only owners are cloned
        },
        [](const replica_handle&) {}, // FRC is for active stages
        [this](copy_atom, std::uint64_t gen, std::int64_t k) {
          return load_state(gen, k);
        },
        [](checkpoint_atom, const std::string&,
           std::int64_t) -> caf::result<checkpoint_shard> {
          return caf::make_error(caf::sec::unexpected_message); // owners write them
        },
    };
  }

private:
  // Named by the stage, whichever pipeline runs it (the pipelines hold the same).
  std::vector<param_blob> blobs() const {
    return state_blobs(*spec_.executor, spec_.executor->stage());
  }

  void prepare_thread() {
    if (thread_ready_)
      return;
    keep_freed_memory();
    at::set_num_threads(spec_.cfg.threads);
    if (openblas_set_num_threads)
      openblas_set_num_threads(spec_.cfg.threads);
    thread_ready_ = true;
    logger_->debug("node {} stage {}: thread ready, schedule {}", spec_.node, stage_,
                   describe(ops_));
  }

  // Preemption: the whole node goes, this actor last.
  void die(std::int64_t k, int index) {
    logger_->warn("node {} preempted in step {} before instruction {}", spec_.node, k,
                  index);
    if (spec_.group)
      spec_.group->kill_all(self_->address());
    self_->quit(caf::exit_reason::kill);
  }

  void fail(std::int64_t k, const std::string& why) {
    tell(self_, supervisor_, step_failed_atom::value, gen_, k, stage_, why);
  }

  // This stage's endpoint of the current generation's group (a shadow uses
  // the endpoint of its node's stage, the predecessor's rank).
  bool connect(std::int64_t k) { return connect(k, stage_); }
  bool connect(std::int64_t k, int rank) {
    std::string error;
    if (join(rank, error))
      return true;
    logger_->error("stage {}: no transport for generation {}: {}", stage_, gen_, error);
    fail(k, "transport: " + error);
    return false;
  }
  bool join(int rank, std::string& error) {
    if (transport_ && transport_->generation() == gen_ && transport_->rank() == rank)
      return true;
    transport_ = spec_.transports->connect(rank, gen_, error);
    return transport_ != nullptr;
  }

  // Owner, at the boundary of step k: its exact state to the rank before its
  // own, where a new shadow waits for it (re-homing across processes).
  caf::result<state_copy> send_state(std::uint64_t gen, std::int64_t k) {
    auto& ex = *spec_.executor;
    if (ex.updates() != k)
      return make_error(errc::stage_failed, "stage " + std::to_string(stage_) +
                                                " is not at the boundary of "
                                                "step " +
                                                std::to_string(k) + " (" +
                                                std::to_string(ex.updates()) +
                                                " updates applied)");
    gen_ = std::max(gen_, gen);
    prepare_thread();
    std::string error;
    if (!join(stage_, error))
      return make_error(errc::transport_failure, error);
    auto flat = ex.optimizer().flat_state().contiguous();
    auto st =
        transport_->send(predecessor(), make_tag(k, 0, tensor_kind::state_copy), flat);
    if (!st)
      return make_error(errc::transport_failure, "the state of stage " +
                                                     std::to_string(stage_) +
                                                     " was not sent: " + st.detail);
    logger_->info("stage {}: state sent to its new shadow ({} bytes, generation {})",
                  stage_, flat.numel() * 4, gen_);
    return copy_of(flat);
  }

  // A new shadow: its owner's state of the boundary of step k, loaded; the
  // digest is of what it holds now, so the manager checks the whole path.
  caf::result<state_copy> load_state(std::uint64_t gen, std::int64_t k) {
    auto& ex = *spec_.executor;
    gen_ = std::max(gen_, gen);
    prepare_thread();
    std::string error;
    if (!join(predecessor(), error))
      return make_error(errc::transport_failure, error);
    auto flat = at::empty({ex.optimizer().flat_state_size()}, at::kFloat);
    auto st = transport_->recv(stage_, make_tag(k, 0, tensor_kind::state_copy), flat);
    if (!st)
      return make_error(errc::transport_failure, "no state for the new shadow of stage " +
                                                     std::to_string(stage_) + ": " +
                                                     st.detail);
    if (!ex.load_state(flat, k))
      return make_error(errc::stage_failed, "the state received for stage " +
                                                std::to_string(stage_) +
                                                " has the wrong size");
    return copy_of(ex.optimizer().flat_state());
  }

  void run_step(std::int64_t k) {
    prepare_thread();
    if (!connect(k))
      return;
    step_outcome out;
    kill_hook hook;
    if (spec_.injector || row_)
      hook = [this](std::int64_t step, int index) {
        if (row_ && index < static_cast<int>(ops_.size()))
          say("active", "step " + std::to_string(step) + " " +
                            describe({ops_[static_cast<std::size_t>(index)]}));
        return spec_.injector &&
               spec_.injector->should_kill(spec_.node, step, index,
                                           static_cast<int>(ops_.size()));
      };
    try {
      out = spec_.executor->run(k, ops_, *transport_,
                                frc_enabled_ ? spec_.replica.get() : nullptr, hook);
    } catch (const std::exception& e) {
      // LibTorch reports bugs and bad shapes by throwing; never across actors.
      out.status = {transport_errc::invalid, std::string("exception: ") + e.what()};
    }
    if (out.killed)
      return die(k, static_cast<int>(spec_.executor->progress().forwards.size() +
                                     spec_.executor->progress().backwards.size()));
    if (out.status.code == transport_errc::aborted) {
      logger_->info("node {} stage {}: step {} interrupted ({}), waiting for the re-plan",
                    spec_.node, stage_, k, out.status.detail);
      return;
    }
    if (!out.status) {
      logger_->warn("stage {} step {} failed: {}: {}", stage_, k,
                    to_string(out.status.code), out.status.detail);
      fail(k, std::string(to_string(out.status.code)) + ": " + out.status.detail);
      return;
    }
    last_ = make_report(k, out);
    say("active", step_words(k, "reported, awaiting the commit"));
    tell(self_, supervisor_, last_);
  }

  schema::step_report make_report(std::int64_t k, const step_outcome& out) const {
    const auto& p = spec_.executor->progress();
    schema::step_report rep;
    rep.node = static_cast<std::uint32_t>(spec_.node);
    rep.stage = static_cast<std::uint32_t>(stage_);
    rep.generation = gen_;
    rep.step = static_cast<std::uint64_t>(k);
    rep.loss_sum = out.loss_sum;
    rep.grad_squares = out.grad_squares;
    rep.forwards = static_cast<std::uint32_t>(p.forwards.size() - p.inherited.size());
    rep.backwards = static_cast<std::uint32_t>(p.backwards.size());
    rep.frc = static_cast<std::uint32_t>(p.frc.size());
    rep.inherited = static_cast<std::uint32_t>(p.inherited.size());
    return rep;
  }

  stage_progress progress() const {
    const auto& p = spec_.executor->progress();
    stage_progress m;
    m.stage = stage_;
    m.step = p.step;
    m.forwards = to_vector(p.forwards);
    m.backwards = to_vector(p.backwards);
    m.frc = to_vector(p.frc);
    m.complete = p.complete;
    m.report = last_;
    return m;
  }

  void resume(const resume_order& o) {
    gen_ = o.generation;
    frc_enabled_ = o.frc_enabled && spec_.replica != nullptr;
    prepare_thread();
    if (!connect(o.step))
      return;
    auto& ex = *spec_.executor;
    ex.set_delivered(o.step, o.delivered_activations, o.delivered_gradients);
    if (spec_.cfg.pipelines > 1)
      ex.set_sum_source(o.step, o.sum_source);
    auto st = ex.resend(o.resend_activations, o.resend_gradients, *transport_);
    if (st && o.sum_source == ex.pipeline() && !o.sum_targets.empty())
      st = ex.send_sum(o.sum_targets, *transport_);
    if (!st) {
      if (st.code != transport_errc::aborted)
        fail(o.step, "resend: " + st.detail);
      return;
    }
    if (!ex.progress().complete)
      run_step(o.step);
  }

  void commit(const schema::commit& c) {
    const auto k = static_cast<std::int64_t>(c.step);
    auto& ex = *spec_.executor;
    if (ex.updates() > k) // already applied (a re-sent commit after a re-plan)
      return;
    if (spec_.injector &&
        spec_.injector->should_kill(spec_.node, k, static_cast<int>(ops_.size()),
                                    static_cast<int>(ops_.size())))
      return die(k, static_cast<int>(ops_.size()));
    try {
      auto grads = std::make_shared<gradient_list>();
      grads->grads = ex.clip_gradients(c.clip_coef);
      // The shadow applies the same update on its own thread, meanwhile.
      if (has_shadow_ && spec_.sync == shadow_sync::transport) {
        gen_ = std::max(gen_, c.generation);
        last_sync_ = pack_gradients(ex, grads->grads);
        send_sync(k, last_sync_);
      } else if (shadow_) {
        self_->send(shadow_, shadow_update{c.generation, k, stage_, grads});
      }
      ex.apply_update(k);
    } catch (const std::exception& e) {
      tell(self_, supervisor_, step_failed_atom::value, c.generation, k, stage_,
           std::string("optimizer update: ") + e.what());
      return;
    }
    say("active", step_words(k, "committed, idle"));
    tell(self_, supervisor_, committed_atom::value, c.generation, k, stage_);
  }

  // The rank of the node holding this stage's replica: (p, s-1 mod S).
  int predecessor() const {
    const int stages = spec_.cfg.stages;
    return spec_.executor->rank_of((spec_.executor->stage() + stages - 1) % stages);
  }

  // Owner: step k's gradients to the node holding the replica (rank s-1).
  void send_sync(std::int64_t k, const at::Tensor& flat) {
    if (!connect(k))
      return;
    auto st =
        transport_->send(predecessor(), make_tag(k, 0, tensor_kind::shadow_sync), flat);
    if (!st) // the generation ended: the manager commits again after the re-plan
      logger_->info("stage {}: step {} gradients not sent to the shadow: {}", stage_, k,
                    st.detail);
  }

  // Shadow: the owner's gradients of step k, then the same update.
  void receive_sync(const schema::commit& c) {
    const auto k = static_cast<std::int64_t>(c.step);
    auto& ex = *spec_.executor;
    if (ex.updates() <= k) {
      gen_ = std::max(gen_, c.generation);
      prepare_thread();
      auto flat = at::empty({packed_size(ex)}, at::kFloat);
      transport_status st{transport_errc::aborted, "no transport"};
      if (connect(k, predecessor()))
        st = transport_->recv(stage_, make_tag(k, 0, tensor_kind::shadow_sync), flat);
      if (!st) {
        // The manager has both sides try again in the next generation.
        logger_->info("shadow of stage {}: no gradients for step {}: {}", stage_, k,
                      st.detail);
        tell(self_, supervisor_, sync_lost_atom::value, c.generation, k, stage_);
        return;
      }
      ex.apply_gradients(k, unpack_gradients(ex, flat));
    }
    say("shadow", step_words(k, "applied, idle"));
    tell(self_, supervisor_, synced_atom::value, c.generation, k, stage_);
  }

  stage_actor::pointer self_;
  stage_actor_spec spec_;
  caf::actor supervisor_;
  bool has_shadow_ = false;
  stage_actor shadow_; // in-process shadows only
  std::shared_ptr<tensor_transport> transport_;
  std::shared_ptr<spdlog::logger> logger_;
  std::vector<instruction> ops_;
  int stage_ = 0;
  std::uint64_t gen_ = 1;
  bool thread_ready_ = false;
  bool frc_enabled_ = false;
  schema::step_report last_;
  actor_board::entry row_; // leaves the board with this state
  at::Tensor last_sync_;   // the gradients last sent to the shadow (re-sent on demand)
};

using stage_pointer = stage_actor::stateful_pointer<stage_state>;

stage_actor::behavior_type active_stage(stage_pointer self, stage_actor_spec spec,
                                        caf::actor supervisor) {
  self->state.init(std::move(spec), std::move(supervisor), "stage");
  return self->state.active();
}

stage_actor::behavior_type shadow_stage(stage_pointer self, stage_actor_spec spec,
                                        caf::actor supervisor) {
  self->state.init(std::move(spec), std::move(supervisor), "shadow");
  return self->state.shadow();
}

} // namespace

stage_actor spawn_stage_actor(caf::local_actor* supervisor, stage_actor_spec spec) {
  auto sup = caf::actor_cast<caf::actor>(supervisor);
  return supervisor->spawn<caf::detached + caf::monitored>(active_stage, std::move(spec),
                                                           std::move(sup));
}

stage_actor spawn_shadow_actor(caf::local_actor* supervisor, stage_actor_spec spec) {
  auto sup = caf::actor_cast<caf::actor>(supervisor);
  return supervisor->spawn<caf::detached + caf::monitored>(shadow_stage, std::move(spec),
                                                           std::move(sup));
}

} // namespace bamboo
