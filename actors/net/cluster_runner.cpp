#include "actors/net/cluster_runner.hpp"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/actor_board.hpp"
#include "actors/cluster_manager.hpp"
#include "actors/errors.hpp"
#include "actors/net/gateway.hpp"
#include "actors/net/inspect_board.hpp"
#include "actors/net/network.hpp"
#include "actors/net/process_nodes.hpp"
#include "actors/net/stage_proxy.hpp"
#include "actors/net/wire_values.hpp"
#include "actors/plan/planner.hpp"
#include "actors/run_controls.hpp"
#include "log/log.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/model.hpp"
#include "model/model_definition.hpp"

namespace bamboo {

caf::expected<run_result> run_cluster(const train_config& cfg,
                                      const cluster_options& opts) {
  if (auto problem = validate(cfg))
    return make_error(errc::invalid_config, *problem);
  if (cfg.stages < 2)
    return make_error(errc::invalid_config, "a cluster of processes needs 2 or more "
                                            "stages (one worker process each)");
  if (cfg.custom_model) { // one micro-batch through every layer and the loss
    if (auto bad = check_model(*cfg.custom_model, cfg))
      return make_error(errc::invalid_config, *bad);
    log::get("bamboo.gateway")
        ->info("model '{}', digest {}: workers must build the same",
               cfg.custom_model->name(), model_digest(*cfg.custom_model));
  }
  if (auto bad = check_depths(opts.depths, cfg.stages, cfg.model_layers(), 2))
    return make_error(errc::invalid_config, *bad);
  const auto depths = resolve(opts.depths, cfg.stages);
  if (cfg.pipelines > 1 && (depths.min != cfg.stages || depths.max != cfg.stages))
    return make_error(errc::invalid_config,
                      "--min-stages and --max-stages re-partition one pipeline: they "
                      "cannot be combined with --pipelines above 1");
  if (opts.workers > 0 && opts.workers < cfg.coordinates())
    return make_error(errc::invalid_config,
                      "--workers " + std::to_string(opts.workers) +
                          " cannot hold --pipelines " + std::to_string(cfg.pipelines) +
                          " x --stages " + std::to_string(cfg.stages));
  std::string problem;
  // Every worker loads the data itself; fail here first if it cannot be read
  // (a custom model brings its own).
  std::shared_ptr<const token_corpus> corpus;
  if (!cfg.custom_model) {
    corpus = token_corpus::load(cfg.data, cfg.model, cfg.seed, problem);
    if (!corpus)
      return make_error(errc::invalid_data, problem);
  }
  const auto& ck = opts.checkpoints;
  if (auto bad = check(ck))
    return make_error(errc::invalid_config, *bad);
  std::string resume; // the step directory every worker starts from
  std::int64_t first_step = 0;
  if (ck.resume) {
    auto r = resume_point(cfg, ck.dir, corpus, "--resume");
    if (!r)
      return r.error();
    if (*r) { // else step 0: no checkpoint there yet
      first_step = (*r)->step;
      resume = checkpoint_step_dir(ck.dir, first_step);
    }
  }

  caf::actor_system_config sys_cfg;
  configure_network(sys_cfg, opts.tls);
  caf::actor_system sys{sys_cfg};
  caf::scoped_actor self{sys};
  gateway_spec gs;
  gs.token = opts.token;
  gs.operator_token = opts.operator_token;
  gs.frame_limit = opts.frame_limit;
  gs.store_port = 0; // the store is served over the control channel
  gs.heartbeats = opts.heartbeats;
  gs.listener = self;
  gs.model = cfg.custom_model;
  auto board = std::make_shared<inspect_board>();
  gs.board = board;
  auto controls = std::make_shared<run_controls>();
  controls->set_checkpoints(ck.every > 0);
  gs.controls = controls;
  auto actors = actor_board::make();
  gs.actors = actors;
  auto gateway = spawn_gateway(sys, gs);
  auto stop_gateway = [&] {
    caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
  };
  auto bound = publish_gateway(sys, gateway, opts.port, opts.bind);
  if (!bound) {
    stop_gateway();
    return make_error(errc::transport_failure, "cannot listen on " + opts.bind + ":" +
                                                   std::to_string(opts.port) + ": " +
                                                   sys.render(bound.error()));
  }
  const int wanted = opts.workers > 0 ? opts.workers : cfg.coordinates();
  log::get("bamboo.gateway")
      ->info("listening on {}:{}; waiting for {} workers", opts.bind, *bound, wanted);
  if (opts.on_listening)
    opts.on_listening(*bound);
  std::vector<process_member> members;
  if (!await_members(self, members, wanted, opts.join_timeout)) {
    stop_gateway();
    return make_error(errc::node_lost, std::to_string(members.size()) + " of " +
                                           std::to_string(wanted) +
                                           " workers joined in time");
  }

  std::shared_ptr<checkpoint_writer> writer;
  if (!ck.dir.empty()) {
    writer = std::make_shared<checkpoint_writer>(ck.dir, ck.keep);
    writer->on_written([board, hook = opts.on_checkpoint](std::int64_t step,
                                                          const std::string& at) {
      board->event("checkpoint of step " + std::to_string(step) + " written in " + at);
      if (hook)
        hook(step, at);
    });
  }
  replan_dir replan_files(ck.dir);
  if (!replan_files.problem().empty()) {
    stop_gateway();
    return make_error(errc::checkpoint_failed, replan_files.problem());
  }
  auto replans = std::make_shared<checkpoint_writer>(replan_files.path(), 1);
  auto announced = std::make_shared<preemption_injector>(opts.announced_kills);
  std::size_t replan_failures = 0;

  // One manager per plan: the first on the first `stages` workers that joined
  // (the others wait as standby), a new one after each re-plan and rollback.
  auto run_cfg = cfg;
  auto live = std::move(members); // the plan's members first, then the standby ones
  std::uint64_t generation = 1;
  std::string first_event;
  run_result total;
  caf::error failure;
  auto log_manager = log::get("bamboo.manager");
  if (opts.on_started)
    opts.on_started();
  for (;;) {
    const auto in_plan = plan_members(live, run_cfg.pipelines, run_cfg.stages);
    const int planned = run_cfg.coordinates();
    auto standby = [&] { return static_cast<int>(live.size()) - planned; };
    board->set_run(cfg.custom_model ? cfg.custom_model->name()
                                    : to_string(cfg.model.kind),
                   run_cfg.pipelines, run_cfg.stages, run_cfg.steps);
    manager_spec spec;
    spec.cfg = run_cfg;
    spec.parts = partition(model_of(run_cfg, corpus)->layer_costs(), run_cfg.stages);
    spec.nodes = make_process_nodes(run_cfg, in_plan, gateway, opts.frame_limit,
                                    generation, resume);
    spec.heartbeats = opts.heartbeats; // the grace for a failed transfer
    spec.on_step = [board, hook = opts.on_step](const step_record& r) {
      board->on_step(r);
      if (hook)
        hook(r);
    };
    spec.on_failover = [board, hook = opts.on_failover](const failover_record& f) {
      board->on_failover(f);
      if (hook)
        hook(f);
    };
    spec.collect_digests = opts.collect_digests;
    spec.result = std::make_shared<run_result>();
    spec.first_step = first_step;
    spec.first_generation = generation;
    spec.checkpoints = writer;
    spec.checkpoint_every = ck.every;
    spec.keep_nodes_on_failure = writer != nullptr;
    spec.first_event = first_event;
    spec.replans = replans;
    spec.injector = announced;
    spec.standby = standby();
    spec.depths = depths;
    spec.auto_pipelines = opts.auto_pipelines;
    spec.controls = controls;
    spec.actors = actors;
    spec.stop_signal = opts.stop_signal;
    auto manager = spawn_manager(sys, spec);
    failure = caf::error{};
    // Until the plan ends: the members that join or leave meanwhile are the
    // standby ones the manager may call on.
    std::set<int> lost;
    bool running = true;
    self->send(manager, train_atom::value);
    self->receive_while(running)(
        [&](done_atom) { running = false; },
        [&](caf::error& err) {
          failure = std::move(err);
          running = false;
        },
        [&](joined_atom, int id, caf::actor agent, std::string& zone) {
          live.push_back({id, std::move(agent), std::move(zone)});
          log_manager->info("node {} joined: standby ({} standby)", id, standby());
          self->send(manager, standby_atom::value, standby());
        },
        [&](lost_atom, int id) {
          lost.insert(id);
          const auto first_standby = live.begin() + planned;
          if (std::any_of(first_standby, live.end(),
                          [&](const process_member& m) { return m.id == id; })) {
            remove_member(live, id);
            self->send(manager, standby_atom::value, standby());
          }
        });
    auto& r = *spec.result;
    add_plan(total, r);
    const bool replanned = !failure && r.replanned_at >= 0;
    const bool stopping = opts.stop_signal && opts.stop_signal() != 0;
    const bool fallback =
        failure && writer && !stopping && is_error(failure, errc::unrecoverable_failure);
    if (!replanned && !fallback) {
      total = finish_run(std::move(total), std::move(r));
      break;
    }
    // The members a re-plan's decision counted on: the survivors and the standby.
    const int counted = static_cast<int>(r.alive.size()) + standby();
    // The next plan's members: the survivors, then the standby ones, then
    // those that joined meanwhile.
    std::vector<process_member> next;
    for (int n : r.alive)
      if (!lost.count(in_plan.at(static_cast<std::size_t>(n)).id))
        next.push_back(in_plan.at(static_cast<std::size_t>(n)));
    const int plan_lost = static_cast<int>(in_plan.size() - next.size());
    next.insert(next.end(), live.begin() + planned, live.end());
    update_members(self, next);
    live = std::move(next);
    generation = r.generation + 1;
    // Members may go (or come) between a plan's end and the next one's start:
    // the next plan is shaped on those here now, never on those planned for.
    auto top_up = [&](int needed) {
      if (static_cast<int>(live.size()) >= needed || opts.replacement_wait.count() <= 0)
        return;
      log_manager->info("{} of {} workers left: waiting up to {} ms for new ones",
                        live.size(), needed, opts.replacement_wait.count());
      await_members(self, live, needed, opts.replacement_wait);
    };
    const shape_rules rules{cfg.pipelines, cfg.stages, cfg.micro_batches(), depths,
                            opts.auto_pipelines};
    auto reshape = [&](bool replan) {
      const auto s = next_plan_shape(rules, run_cfg.pipelines,
                                     static_cast<int>(live.size()), replan);
      run_cfg.pipelines = s.pipelines;
      run_cfg.stages = s.stages;
    };
    if (replanned) {
      auto failures = replans->finish(); // the manifest is on disk
      if (failures.size() == replan_failures) {
        // The shape wanted on every member the decision counted on; those that
        // went meanwhile are waited for, else the plan takes what is here.
        const auto wanted = next_plan_shape(rules, run_cfg.pipelines, counted, true);
        top_up(wanted.pipelines * wanted.stages);
        reshape(true);
      }
      if (failures.size() == replan_failures && static_cast<int>(live.size()) >= 2) {
        run_cfg.redundancy = controls->wanted_redundancy(); // an operator's change
        first_step = r.replanned_at;
        resume = checkpoint_step_dir(replans->dir(), first_step);
        first_event = "re-planned: " + r.replan_reason;
        ++total.replans;
        log_manager->info(
            "a new plan from step {} on {} workers, {} pipeline(s) of {} stages ({} "
            "standby): {}",
            first_step, live.size(), run_cfg.pipelines, run_cfg.stages,
            static_cast<int>(live.size()) - run_cfg.coordinates(), r.replan_reason);
        board->event("a new plan from step " + std::to_string(first_step) + ": " +
                     r.replan_reason);
        if (opts.on_replan)
          opts.on_replan(first_step, r.replan_reason);
        continue;
      }
      if (failures.size() == replan_failures) {
        failure = make_error(errc::unrecoverable_failure,
                             "the plan from step " + std::to_string(r.replanned_at) +
                                 " has " + std::to_string(live.size()) +
                                 " worker(s) left, 2 are needed to go on");
        break;
      }
      replan_failures = failures.size();
      failure = make_error(errc::unrecoverable_failure,
                           "the state saved for a new plan before step " +
                               std::to_string(r.replanned_at) + " is incomplete");
      if (!writer)
        break;
    }
    // The fallback: the survivors, a stage each, from the newest checkpoint.
    if (auto f = writer->finish(); !f.empty())
      log_manager->warn("{} checkpoint(s) failed", f.size());
    top_up(cfg.coordinates());
    if (static_cast<int>(live.size()) < 2) {
      failure = make_error(errc::unrecoverable_failure,
                           describe(failure) + "; " + std::to_string(live.size()) +
                               " worker(s) left, 2 are needed to go on");
      break;
    }
    reshape(false);
    auto point = rollback_point(run_cfg, ck.dir, corpus, failure);
    if (!point) {
      failure = point.error();
      break;
    }
    first_step = *point ? (*point)->step : 0; // none intact: step 0, from the seed
    resume = *point ? checkpoint_step_dir(ck.dir, first_step) : std::string();
    first_event = "rolled back to step " + std::to_string(first_step);
    roll_back(total, first_step, plan_lost);
    log_manager->warn("rolling back to the checkpoint of step {} on {} workers, {} "
                      "stages: {}",
                      first_step, live.size(), run_cfg.stages, describe(failure));
    board->event("rolled back to step " + std::to_string(first_step) + ": " +
                 describe(failure));
    if (opts.on_rollback)
      opts.on_rollback(first_step, describe(failure));
  }
  if (writer)
    total.checkpoint_failures = writer->finish();
  // Every member is let go (a standby one too), and the leave frames go out
  // before the connections close.
  self->send(gateway, broadcast_atom::value, to_wire(schema::leave{"the run is over"}));
  self->receive(caf::after(std::chrono::milliseconds(100)) >> [] {});
  stop_gateway();
  if (failure)
    return failure;
  return total;
}

} // namespace bamboo
