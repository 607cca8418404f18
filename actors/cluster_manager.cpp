#include "actors/cluster_manager.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/stage_actor.hpp"
#include "model/optimizer.hpp"
#include "transport/local_transport.hpp"
#include "transport/log.hpp"

namespace bamboo {

namespace {

using clock_type = std::chrono::steady_clock;

// torch.nn.utils.clip_grad_norm_'s rule, so runs compare with plain LibTorch.
double clip_coefficient(double max_norm, double norm) {
  if (max_norm <= 0)
    return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

struct manager_state {
  static inline const char* name = "bamboo.manager";

  explicit manager_state(caf::event_based_actor* self) : self_(self) {}

  void init(manager_spec spec) {
    spec_ = std::move(spec);
    logger_ = log::get("bamboo.manager");
    self_->set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
  }

  caf::behavior make_behavior() {
    return {
      [this](train_atom) {
        promise_ = self_->make_response_promise();
        start();
        return promise_;
      },
      [this](const schema::step_report& r) { on_report(r); },
      [this](committed_atom, std::uint64_t gen, std::int64_t k, int stage) {
        on_committed(gen, k, stage);
      },
      [this](step_failed_atom, std::uint64_t gen, std::int64_t k, int stage,
             const std::string& why) {
        if (gen != generation_)
          return;
        fail(make_error(errc::stage_failed, "stage " + std::to_string(stage) +
                                              " in step " + std::to_string(k) + ": " + why));
      },
    };
  }

private:
  void start() {
    const auto& cfg = spec_.cfg;
    logger_->info("{} run: {} stages, G={} m={} ({} micro-batches), {} steps; {}",
                  to_string(cfg.model.kind), cfg.stages, cfg.global_batch,
                  cfg.micro_batch, cfg.micro_batches(), cfg.steps, describe(spec_.parts));
    for (int s = 0; s < cfg.stages; ++s) {
      stage_spec st{cfg, s, spec_.parts[s], spec_.corpus,
                    std::shared_ptr<tensor_transport>(spec_.hub->endpoint(s))};
      stages_.push_back(spawn_stage(self_, std::move(st)));
    }
    if (cfg.steps == 0)
      finish();
    else
      begin_step();
  }

  void begin_step() {
    reports_ = commits_ = 0;
    loss_sum_ = 0;
    grad_squares_.assign(stages_.size(), 0.0);
    step_start_ = clock_type::now();
    for (auto& st : stages_)
      self_->send(st, run_step_atom::value, generation_, step_);
  }

  void on_report(const schema::step_report& r) {
    if (r.generation != generation_ || static_cast<std::int64_t>(r.step) != step_)
      return;  // a stale generation's report: dropped by design
    loss_sum_ += r.loss_sum;  // only the last stage has a loss
    grad_squares_[r.stage] = r.grad_squares;
    if (++reports_ < static_cast<int>(stages_.size()))
      return;
    // Summed in stage order, not arrival order: the clip factor must not vary.
    double total = 0;
    for (double g : grad_squares_)
      total += g;
    grad_norm_ = std::sqrt(total);
    schema::commit c{generation_, static_cast<std::uint64_t>(step_),
                     clip_coefficient(spec_.cfg.optim.clip_norm, grad_norm_)};
    for (auto& st : stages_)
      self_->send(st, c);
  }

  void on_committed(std::uint64_t gen, std::int64_t k, int) {
    if (gen != generation_ || k != step_)
      return;
    if (++commits_ < static_cast<int>(stages_.size()))
      return;
    const auto& cfg = spec_.cfg;
    step_record rec;
    rec.step = step_;
    rec.loss = loss_sum_ / cfg.micro_batches();
    rec.seconds = std::chrono::duration<double>(clock_type::now() - step_start_).count();
    rec.samples_per_s = rec.seconds > 0 ? cfg.global_batch / rec.seconds : 0;
    rec.generation = generation_;
    rec.lr = learning_rate(cfg.optim, step_, cfg.steps);
    rec.grad_norm = grad_norm_;
    spec_.result->steps.push_back(rec);
    logger_->debug("step {} committed: loss {:.6f}", step_, rec.loss);
    if (spec_.on_step)
      spec_.on_step(rec);
    if (++step_ < cfg.steps)
      begin_step();
    else
      finish();
  }

  void finish() {
    finished_ = true;
    if (!spec_.collect_parameters) {
      deliver_done();
      return;
    }
    auto remaining = std::make_shared<std::size_t>(stages_.size());
    for (auto& st : stages_)
      self_->request(st, caf::infinite, params_atom::value)
        .then(
          [this, remaining](std::vector<param_blob>& blobs) {
            auto& all = spec_.result->parameters;
            std::move(blobs.begin(), blobs.end(), std::back_inserter(all));
            if (--*remaining == 0) {
              std::sort(all.begin(), all.end(),
                        [](const auto& a, const auto& b) { return a.name < b.name; });
              deliver_done();
            }
          },
          [this](caf::error& err) { fail(err); });
  }

  void deliver_done() {
    logger_->info("run complete: {} steps", spec_.result->steps.size());
    promise_.deliver(done_atom::value);
    shutdown();
  }

  void fail(const caf::error& err) {
    if (!promise_.pending())
      return;
    logger_->error("run failed: {}", describe(err));
    spec_.hub->abort("run failed");  // unblock stages waiting on a dead peer
    promise_.deliver(err);
    shutdown();
  }

  void on_down(const caf::down_msg& dm) {
    if (finished_ || !promise_.pending())
      return;
    fail(make_error(errc::stage_failed,
                    "a stage actor terminated: " + caf::to_string(dm.reason)));
  }

  void shutdown() {
    finished_ = true;
    for (auto& st : stages_)
      self_->send_exit(st, caf::exit_reason::user_shutdown);
    stages_.clear();
    self_->quit();
  }

  caf::event_based_actor* self_;
  manager_spec spec_;
  std::shared_ptr<spdlog::logger> logger_;
  caf::response_promise promise_;
  std::vector<caf::actor> stages_;
  std::uint64_t generation_ = 1;
  std::int64_t step_ = 0;
  int reports_ = 0;
  int commits_ = 0;
  double loss_sum_ = 0;
  std::vector<double> grad_squares_;
  double grad_norm_ = 0;
  bool finished_ = false;
  clock_type::time_point step_start_;
};

caf::behavior manager_actor(caf::stateful_actor<manager_state>* self, manager_spec spec) {
  self->state.init(std::move(spec));
  return self->state.make_behavior();
}

} // namespace

caf::actor spawn_manager(caf::actor_system& sys, manager_spec spec) {
  return sys.spawn(manager_actor, std::move(spec));
}

} // namespace bamboo
