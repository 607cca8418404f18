#include "actors/stage_actor.hpp"

#include <ATen/Parallel.h>
#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "model/stage_executor.hpp"
#include "transport/log.hpp"

// Weak so that we link with or without OpenBLAS; it keeps its own thread pool,
// which must not oversubscribe the cores the stages already use.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace bamboo {

namespace {

struct stage_state {
  static inline const char* name = "bamboo.stage";

  explicit stage_state(caf::event_based_actor* self) : self_(self) {}

  void init(stage_spec spec, caf::actor supervisor) {
    spec_ = std::move(spec);
    supervisor_ = std::move(supervisor);
    logger_ = log::get("bamboo.stage");
  }

  caf::behavior make_behavior() {
    return {
      [this](run_step_atom, std::uint64_t gen, std::int64_t k) { run_step(gen, k); },
      [this](const schema::commit& c) {
        try {
          executor().apply_update(static_cast<std::int64_t>(c.step), c.clip_coef);
        } catch (const std::exception& e) {
          self_->send(supervisor_, step_failed_atom::value, c.generation,
                      static_cast<std::int64_t>(c.step), spec_.stage,
                      std::string("optimizer update: ") + e.what());
          return;
        }
        self_->send(supervisor_, committed_atom::value, c.generation,
                    static_cast<std::int64_t>(c.step), spec_.stage);
      },
      [this](params_atom) { return parameters(); },
    };
  }

private:
  // Built lazily on the actor's own thread, where the thread settings apply.
  stage_executor& executor() {
    if (!exec_) {
      at::set_num_threads(spec_.cfg.threads);
      if (openblas_set_num_threads)
        openblas_set_num_threads(spec_.cfg.threads);
      exec_ = std::make_unique<stage_executor>(spec_.cfg, spec_.stage, spec_.range,
                                               spec_.corpus);
      ops_ = one_f_one_b(spec_.stage, spec_.cfg.stages, spec_.cfg.micro_batches());
      logger_->info("stage {} up: layers [{},{}), {} parameter tensors, schedule {}",
                    spec_.stage, spec_.range.first, spec_.range.last,
                    exec_->parameters().size(), describe(ops_));
    }
    return *exec_;
  }

  void run_step(std::uint64_t gen, std::int64_t k) {
    step_outcome out;
    try {
      out = executor().run_step(k, ops_, *spec_.transport);
    } catch (const std::exception& e) {
      // LibTorch reports bugs and bad shapes by throwing; never across actors.
      out.status = {transport_errc::invalid, std::string("exception: ") + e.what()};
    }
    if (!out.status) {
      logger_->warn("stage {} step {} failed: {}: {}", spec_.stage, k,
                    to_string(out.status.code), out.status.detail);
      self_->send(supervisor_, step_failed_atom::value, gen, k, spec_.stage,
                  std::string(to_string(out.status.code)) + ": " + out.status.detail);
      return;
    }
    schema::step_report rep;
    rep.node = static_cast<std::uint32_t>(spec_.stage);
    rep.stage = static_cast<std::uint32_t>(spec_.stage);
    rep.generation = gen;
    rep.step = static_cast<std::uint64_t>(k);
    rep.loss_sum = out.loss_sum;
    rep.grad_squares = out.grad_squares;
    self_->send(supervisor_, rep);
  }

  std::vector<param_blob> parameters() {
    std::vector<param_blob> out;
    for (const auto& p : executor().parameters()) {
      auto t = p.tensor.detach().contiguous();
      const float* data = t.data_ptr<float>();
      out.push_back({p.name, std::vector<float>(data, data + t.numel())});
    }
    return out;
  }

  caf::event_based_actor* self_;
  stage_spec spec_;
  caf::actor supervisor_;
  std::shared_ptr<spdlog::logger> logger_;
  std::unique_ptr<stage_executor> exec_;
  std::vector<instruction> ops_;
};

caf::behavior stage_actor(caf::stateful_actor<stage_state>* self, stage_spec spec,
                          caf::actor supervisor) {
  self->state.init(std::move(spec), std::move(supervisor));
  return self->state.make_behavior();
}

} // namespace

caf::actor spawn_stage(caf::local_actor* supervisor, stage_spec spec) {
  auto sup = caf::actor_cast<caf::actor>(supervisor);
  return supervisor->spawn<caf::detached + caf::monitored>(stage_actor, std::move(spec),
                                                           std::move(sup));
}

} // namespace bamboo
