#include "actors/plan_loop.hpp"

#include <caf/all.hpp>

#include "actors/cluster_manager.hpp"
#include "actors/errors.hpp"
#include "actors/net/inspect_board.hpp"
#include "actors/resume_point.hpp"
#include "actors/run_controls.hpp"
#include "log/log.hpp"
#include "model/checkpoint.hpp"
#include "model/model_definition.hpp"
#include "model/partition.hpp"

namespace bamboo {

namespace {

std::string model_name(const train_config& cfg) {
  return cfg.custom_model ? cfg.custom_model->name() : to_string(cfg.model.kind);
}

// The manager's spec of one plan, hooks wrapped for the observers' board.
manager_spec plan_spec(const plan_loop_spec& s, const train_config& cfg) {
  manager_spec spec;
  spec.cfg = cfg;
  spec.parts = partition(model_of(cfg, s.corpus)->layer_costs(), cfg.stages);
  spec.heartbeats = s.heartbeats;
  spec.collect_parameters = s.collect_parameters;
  spec.collect_digests = s.collect_digests;
  spec.on_step = s.on_step;
  spec.on_failover = s.on_failover;
  if (s.board) {
    spec.on_step = [board = s.board, hook = s.on_step](const step_record& r) {
      board->on_step(r);
      if (hook)
        hook(r);
    };
    spec.on_failover = [board = s.board, hook = s.on_failover](const failover_record& f) {
      board->on_failover(f);
      if (hook)
        hook(f);
    };
  }
  spec.result = std::make_shared<run_result>();
  spec.checkpoints = s.checkpoints;
  spec.checkpoint_every = s.checkpoint_every;
  spec.keep_nodes_on_failure = s.checkpoints != nullptr;
  spec.replans = s.replans;
  spec.depths = s.rules.depths;
  spec.auto_pipelines = s.rules.auto_pipelines;
  spec.controls = s.controls;
  spec.actors = s.actors;
  spec.stop_signal = s.stop_signal;
  return spec;
}

} // namespace

caf::expected<run_result> run_plans(caf::actor_system& sys, const plan_loop_spec& s,
                                    member_pool& members) {
  auto logger = log::get("bamboo.manager");
  auto cfg = s.cfg; // this plan's shape
  auto start = s.first;
  std::uint64_t generation = 1;
  std::string first_event;
  std::size_t replan_failures = 0;
  run_result total;
  caf::error failure;
  auto event = [&](const std::string& text) {
    if (s.board)
      s.board->event(text);
  };
  auto reshape = [&](bool replan) {
    const auto shape = next_plan_shape(s.rules, cfg.pipelines, members.live(), replan);
    cfg.pipelines = shape.pipelines;
    cfg.stages = shape.stages;
  };
  for (;;) {
    if (s.board)
      s.board->set_run(model_name(s.cfg), cfg.pipelines, cfg.stages, cfg.steps);
    auto spec = plan_spec(s, cfg);
    spec.first_step = start.step;
    spec.first_generation = generation;
    spec.first_event = first_event;
    const int places = cfg.coordinates();
    spec.standby = members.live() - places;
    auto nodes = members.nodes(spec, start, generation);
    if (!nodes)
      return nodes.error();
    spec.nodes = *nodes;
    auto manager = spawn_manager(sys, spec);
    failure = members.await_plan(manager, places);
    auto& r = *spec.result;
    add_plan(total, r);
    const bool stopping = s.stop_signal && s.stop_signal() != 0;
    const auto next = after_plan(
        {static_cast<bool>(failure), is_error(failure, errc::unrecoverable_failure),
         r.replanned_at >= 0, s.checkpoints != nullptr, stopping});
    if (next == plan_end::finish) {
      total = finish_run(std::move(total), std::move(r));
      break;
    }
    // The members a re-plan's decision counted on: the survivors and the standby.
    const int counted = static_cast<int>(r.alive.size()) + members.live() - places;
    const int lost = places - members.keep(r.alive);
    generation = r.generation + 1;
    if (next == plan_end::replan) {
      auto failures = s.replans->finish(); // cumulative; the manifest is on disk
      if (failures.size() != replan_failures) {
        replan_failures = failures.size();
        failure = make_error(errc::unrecoverable_failure,
                             "the state saved for a new plan before step " +
                                 std::to_string(r.replanned_at) +
                                 " is incomplete: " + failures.back());
      } else {
        // The shape wanted on every member the decision counted on; those that
        // went meanwhile are waited for, else the plan takes those here.
        const auto wanted = next_plan_shape(s.rules, cfg.pipelines, counted, true);
        members.top_up(wanted.pipelines * wanted.stages);
        if (members.live() < members.minimum()) {
          failure = make_error(
              errc::unrecoverable_failure,
              "the plan from step " + std::to_string(r.replanned_at) + " has " +
                  std::to_string(members.live()) + " " + members.noun() + " left, " +
                  std::to_string(members.minimum()) + " are needed to go on");
          break;
        }
        reshape(true);
        if (s.controls) // an operator's redundancy change
          cfg.redundancy = s.controls->wanted_redundancy();
        auto opened = members.open(
            cfg, {r.replanned_at, checkpoint_step_dir(s.replans->dir(), r.replanned_at),
                  nullptr});
        if (opened) {
          start = std::move(*opened);
          first_event = "re-planned: " + r.replan_reason;
          ++total.replans;
          logger->info(
              "a new plan from step {} on {} {}, {} pipeline(s) of {} stages ({} "
              "standby): {}",
              start.step, members.live(), members.noun(), cfg.pipelines, cfg.stages,
              members.live() - cfg.coordinates(), r.replan_reason);
          event("a new plan from step " + std::to_string(start.step) + ": " +
                r.replan_reason);
          if (s.on_replan)
            s.on_replan(start.step, r.replan_reason);
          continue;
        }
        failure = make_error(errc::unrecoverable_failure,
                             "the state saved for a new plan before step " +
                                 std::to_string(r.replanned_at) +
                                 " cannot be loaded: " + describe(opened.error()));
      }
      // Without the saved state, the newest checkpoint (if any) is the way on.
      if (after_plan({true, true, false, s.checkpoints != nullptr, stopping}) !=
          plan_end::roll_back)
        break;
    }
    // The fallback: the survivors (and replacements), from the newest checkpoint.
    if (auto f = s.checkpoints->finish(); !f.empty())
      logger->warn("{} checkpoint(s) failed", f.size());
    members.top_up(s.cfg.coordinates());
    if (members.live() < members.minimum()) {
      failure = make_error(errc::unrecoverable_failure,
                           describe(failure) + "; " + std::to_string(members.live()) +
                               " " + members.noun() + " left, " +
                               std::to_string(members.minimum()) + " needed to go on");
      break;
    }
    reshape(false);
    auto point = rollback_point(cfg, s.checkpoint_dir, s.corpus, failure);
    if (!point) {
      failure = point.error();
      break;
    }
    // None intact: step 0, from the seed.
    start.step = *point ? (*point)->step : 0;
    start.dir =
        *point ? checkpoint_step_dir(s.checkpoint_dir, start.step) : std::string();
    start.state = *point;
    first_event = "rolled back to step " + std::to_string(start.step);
    roll_back(total, start.step, lost);
    logger->warn("rolling back to the checkpoint of step {} on {} {}, {} stages: {}",
                 start.step, members.live(), members.noun(), cfg.stages,
                 describe(failure));
    event("rolled back to step " + std::to_string(start.step) + ": " + describe(failure));
    if (s.on_rollback)
      s.on_rollback(start.step, describe(failure));
  }
  // The last checkpoints are on disk before the run says it is done.
  if (s.checkpoints)
    total.checkpoint_failures = s.checkpoints->finish();
  if (failure)
    return failure;
  return total;
}

} // namespace bamboo
