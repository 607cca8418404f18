#include "actors/embedded_cluster.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <thread>

#include <caf/all.hpp>

#include "actors/actor_board.hpp"
#include "actors/cluster_manager.hpp"
#include "actors/errors.hpp"
#include "actors/net/inspect_board.hpp"
#include "actors/net/network.hpp"
#include "actors/resume_point.hpp"
#include "actors/run_controls.hpp"
#include "actors/stage_actor.hpp"
#include "actors/system.hpp"
#include "log/log.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/model.hpp"
#include "model/schedule.hpp"
#include "model/stage_executor.hpp"

namespace bamboo {

namespace {

// Nodes as actors of this process: shadows get gradients by hand-off, a
// generation ends by aborting its transport group, clones make new shadows.
class local_nodes : public node_backend {
public:
  // ids: the node names of this plan's nodes (after a rollback, the survivors').
  local_nodes(node_resources r, std::vector<int> ids)
      : r_(std::move(r)), ids_(std::move(ids)) {}

  int node_id(int node) const override { return ids_.at(static_cast<std::size_t>(node)); }

  node_handles spawn(caf::local_actor* manager, const node_assignment& a) override {
    return spawn_node(manager, a, r_);
  }
  shadow_sync sync() const override { return r_.sync; }
  void end_generation(std::uint64_t gen, const std::string& reason) override {
    r_.transports->abort(gen, reason);
  }
  stage_actor add_shadow(caf::local_actor* manager, int node,
                         std::shared_ptr<node_group> group,
                         const replica_handle& replica) override {
    return spawn_replica(manager, node, r_, replica.executor, std::move(group));
  }
  shadow_source reshadowing() const override { return shadow_source::clone; }
  stage_actor add_empty_shadow(caf::local_actor*, int, int) override { return {}; }

private:
  node_resources r_;
  std::vector<int> ids_;
};

// The planned kills that have not fired. The first `named` name a node
// (--preempt node=N): on the survivors, renumbered as the new plan numbers
// them (survivors[i] becomes node i). The others are drawn (rate=R): they hit
// whichever node holds that place, replacements too.
struct planned_kills {
  std::vector<preempt_spec> kills;
  std::size_t named = 0;
};

planned_kills pending_kills(const preemption_injector& inj, std::size_t named,
                            const std::vector<int>& survivors) {
  planned_kills out;
  std::vector<preempt_spec> drawn;
  auto fired = inj.fired();
  const auto& all = inj.planned();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& k = all[i];
    auto f = std::find_if(fired.begin(), fired.end(), [&](const auto& x) {
      return x.spec.node == k.node && x.spec.step == k.step && x.spec.op == k.op;
    });
    if (f != fired.end()) {
      fired.erase(f);
      continue;
    }
    if (i >= named) {
      drawn.push_back(k);
      continue;
    }
    auto at = std::find(survivors.begin(), survivors.end(), k.node);
    if (at != survivors.end()) {
      out.kills.push_back({static_cast<int>(at - survivors.begin()), k.step, k.op});
    }
  }
  out.named = out.kills.size(); // named first, as the next injector takes them
  out.kills.insert(out.kills.end(), drawn.begin(), drawn.end());
  return out;
}

} // namespace

caf::expected<run_result> run_embedded(const train_config& cfg, const run_options& opts) {
  if (auto problem = validate(cfg))
    return make_error(errc::invalid_config, *problem);
  if (cfg.custom_model) // one micro-batch through every layer and the loss
    if (auto bad = check_model(*cfg.custom_model, cfg))
      return make_error(errc::invalid_config, *bad);
  const int nodes = cfg.coordinates(); // a node per stage of each pipeline
  for (const auto& p : opts.preemptions)
    if (p.node < 0 || p.node >= nodes)
      return make_error(errc::invalid_config,
                        "--preempt names node " + std::to_string(p.node) +
                            ", but there are " + std::to_string(nodes) + " nodes (0.." +
                            std::to_string(nodes - 1) + ")");
  if (opts.preempt_rate < 0)
    return make_error(errc::invalid_config, "--preempt rate must not be negative");
  if (auto bad = check_depths(opts.depths, cfg.stages, cfg.model_layers(), 1))
    return make_error(errc::invalid_config, *bad);
  const auto depths = resolve(opts.depths, cfg.stages);
  if (cfg.pipelines > 1 && (depths.min != cfg.stages || depths.max != cfg.stages))
    return make_error(errc::invalid_config,
                      "--min-stages and --max-stages re-partition one pipeline: they "
                      "cannot be combined with --pipelines above 1");
  std::string problem;
  // A custom model brings its own data; the built-in ones read cfg.data.
  std::shared_ptr<const token_corpus> corpus;
  if (!cfg.custom_model) {
    corpus = token_corpus::load(cfg.data, cfg.model, cfg.seed, problem);
    if (!corpus)
      return make_error(errc::invalid_data, problem);
  }

  const auto& ck = opts.checkpoints;
  if (auto problem = check(ck))
    return make_error(errc::invalid_config, *problem);
  std::shared_ptr<const checkpoint> resume;
  if (ck.resume) {
    auto r = resume_point(cfg, ck.dir, corpus, "--resume");
    if (!r)
      return r.error();
    resume = *r;
  }
  std::shared_ptr<checkpoint_writer> writer;
  if (!ck.dir.empty()) {
    writer = std::make_shared<checkpoint_writer>(ck.dir, ck.keep);
    if (opts.on_checkpoint)
      writer->on_written(opts.on_checkpoint);
  }
  // Re-partitions move the state through files; none without a range.
  std::optional<replan_dir> replan_files;
  std::shared_ptr<checkpoint_writer> replans;
  std::size_t replan_failures = 0;
  const bool inspect = opts.inspect.enabled;
  const bool replacing = opts.replace_after.count() >= 0;
  // Re-plans: a re-partition, an operator's redundancy change, a replacement node.
  if (depths.min < cfg.stages || inspect || replacing) {
    replan_files.emplace(ck.dir);
    if (!replan_files->problem().empty())
      return make_error(errc::checkpoint_failed, replan_files->problem());
    replans = std::make_shared<checkpoint_writer>(replan_files->path(), 1);
  }

  caf::actor_system_config sys_cfg;
  if (inspect)
    configure_network(sys_cfg);
  else
    configure(sys_cfg);
  caf::actor_system sys{sys_cfg};
  std::optional<inspect_endpoint> door;
  if (inspect) {
    auto e = open_inspect_endpoint(sys, opts.inspect, opts.heartbeats);
    if (!e)
      return e.error();
    door = *e;
    door->controls->set_checkpoints(writer != nullptr);
    for (int n = 0; n < nodes; ++n) // the run's nodes, as a gateway lists members
      door->board->on_join(n, "default");
    if (writer)
      writer->on_written([board = door->board, hook = opts.on_checkpoint](
                             std::int64_t step, const std::string& at) {
        board->event("checkpoint of step " + std::to_string(step) + " written in " + at);
        if (hook)
          hook(step, at);
      });
  }
  // Closed on every way out: attached observers see the run end.
  struct closer {
    std::optional<inspect_endpoint>& d;
    ~closer() {
      if (d)
        d->close();
    }
  } close_door{door};

  auto kills = opts.preemptions;
  std::size_t named_kills = kills.size();
  const int ops = static_cast<int>(
      make_schedule(0, cfg.stages, cfg.pipeline_micro_batches(), cfg.redundancy).size());
  for (const auto& k : poisson_kills(opts.preempt_rate, cfg.steps, nodes, ops, cfg.seed))
    kills.push_back(k);
  // One manager per plan: the first on every node, each after a re-partition
  // or a rollback (a loss shadows cannot cover, with checkpoints) on the
  // survivors.
  auto run_cfg = cfg;
  const shape_rules rules{cfg.pipelines, cfg.stages, cfg.micro_batches(), depths, false};
  std::vector<int> ids(static_cast<std::size_t>(nodes));
  std::iota(ids.begin(), ids.end(), 0);
  std::uint64_t generation = 1;
  std::string first_event;
  run_result total;
  caf::error failure;
  // Replacement nodes: when each killed node's is due, and those ready that no
  // plan holds yet (standby), named from `next_id` on.
  using clock = std::chrono::steady_clock;
  std::vector<clock::time_point> due;
  int standby = 0, next_id = nodes;
  auto logger = log::get("bamboo.manager");
  for (;;) {
    node_resources res;
    res.cfg = run_cfg;
    res.corpus = corpus;
    res.heartbeat_period = opts.heartbeats.period;
    res.resume = resume;
    if (!kills.empty() || door) // an operator may preempt a node
      res.injector = std::make_shared<preemption_injector>(kills);
    if (door)
      res.actors = door->actors;
    try {
      res.transports =
          std::make_shared<transport_registry>(opts.transport, run_cfg.coordinates());
    } catch (const std::exception& e) {
      return make_error(errc::transport_failure, std::string("transport: ") + e.what());
    }
    manager_spec spec;
    spec.cfg = run_cfg;
    spec.parts = partition(model_of(run_cfg, corpus)->layer_costs(), run_cfg.stages);
    spec.injector = res.injector;
    spec.nodes = std::make_shared<local_nodes>(std::move(res), ids);
    spec.heartbeats = opts.heartbeats;
    spec.collect_parameters = opts.collect_parameters;
    spec.collect_digests = opts.collect_digests;
    spec.on_step = opts.on_step;
    spec.on_failover = opts.on_failover;
    if (door) {
      door->board->set_run(cfg.custom_model ? cfg.custom_model->name()
                                            : to_string(cfg.model.kind),
                           run_cfg.pipelines, run_cfg.stages, run_cfg.steps);
      spec.on_step = [board = door->board, hook = opts.on_step](const step_record& r) {
        board->on_step(r);
        if (hook)
          hook(r);
      };
      spec.on_failover = [board = door->board,
                          hook = opts.on_failover](const failover_record& f) {
        board->on_failover(f);
        if (hook)
          hook(f);
      };
      spec.controls = door->controls;
      spec.actors = door->actors;
    }
    spec.result = std::make_shared<run_result>();
    spec.first_step = resume ? resume->step : 0;
    spec.first_generation = generation;
    spec.checkpoints = writer;
    spec.checkpoint_every = ck.every;
    spec.keep_nodes_on_failure = writer != nullptr;
    spec.first_event = first_event;
    spec.replans = replans;
    spec.depths = depths;
    spec.stop_signal = opts.stop_signal;
    spec.standby = standby;
    auto manager = spawn_manager(sys, spec);
    failure = caf::error{};
    std::size_t replaced = 0; // this plan's kills given a replacement
    // Each kill's replacement is due replace_after later; those due now join
    // the standby ones. True when any did.
    auto take_replacements = [&] {
      if (!replacing || !spec.injector)
        return false;
      const auto fired = spec.injector->fired();
      for (; replaced < fired.size(); ++replaced)
        due.push_back(fired[replaced].at + opts.replace_after);
      const auto now = clock::now();
      const auto ready =
          std::partition(due.begin(), due.end(), [&](auto t) { return t > now; });
      if (ready == due.end())
        return false;
      standby += static_cast<int>(due.end() - ready);
      due.erase(ready, due.end());
      logger->info("a replacement node is ready ({} standby)", standby);
      return true;
    };
    {
      caf::scoped_actor self{sys};
      self->send(manager, train_atom::value);
      bool running = true;
      self->receive_while(running)([&](done_atom) { running = false; },
                                   [&](caf::error& err) {
                                     failure = std::move(err);
                                     running = false;
                                   },
                                   caf::after(opts.heartbeats.period) >>
                                       [&] {
                                         if (take_replacements())
                                           self->send(manager, standby_atom::value,
                                                      standby);
                                       });
    }
    take_replacements(); // the plan's last kills too
    auto& r = *spec.result;
    add_plan(total, r);
    // Survivors' kills and names, as the next plan numbers them; then standby
    // replacements for the places the plan has beyond them (survivors beyond
    // its places wait as standby).
    auto renumber = [&] {
      if (spec.injector) {
        auto next = pending_kills(*spec.injector, named_kills, r.alive);
        kills = std::move(next.kills);
        named_kills = next.named;
      }
      std::vector<int> next_ids;
      for (int n : r.alive)
        next_ids.push_back(ids.at(static_cast<std::size_t>(n)));
      ids = std::move(next_ids);
      const auto places = static_cast<std::size_t>(run_cfg.coordinates());
      for (; ids.size() < places && standby > 0; --standby)
        ids.push_back(next_id++);
      if (ids.size() > places) {
        standby += static_cast<int>(ids.size() - places);
        ids.resize(places);
      }
      generation = r.generation + 1;
    };
    const int workers = static_cast<int>(r.alive.size()) + standby;
    if (!failure && r.replanned_at >= 0) {
      // A re-partition: the layers split anew over the live nodes, from the
      // state every stage saved at the boundary.
      auto failures = replans->finish(); // cumulative
      const auto s = next_plan_shape(rules, run_cfg.pipelines, workers, true);
      run_cfg.pipelines = s.pipelines;
      run_cfg.stages = s.stages;
      if (door) // an operator's redundancy change
        run_cfg.redundancy = door->controls->wanted_redundancy();
      auto point = failures.size() == replan_failures
                       ? checkpoint_at(
                             run_cfg, checkpoint_step_dir(replans->dir(), r.replanned_at))
                       : make_error(errc::checkpoint_failed, failures.back());
      if (point) {
        resume = *point;
        renumber();
        first_event = "re-planned: " + r.replan_reason;
        ++total.replans;
        if (opts.on_replan)
          opts.on_replan(r.replanned_at, r.replan_reason);
        if (door)
          door->board->event("a new plan from step " + std::to_string(r.replanned_at) +
                             ": " + r.replan_reason);
        logger->info("a new plan from step {} on {} nodes, {} stages: {}", r.replanned_at,
                     ids.size(), run_cfg.stages, r.replan_reason);
        continue;
      }
      replan_failures = failures.size();
      // Without the saved state, the newest checkpoint (if any) is the way on.
      failure = make_error(errc::unrecoverable_failure,
                           "the state saved for a new plan before step " +
                               std::to_string(r.replanned_at) +
                               " cannot be loaded: " + describe(point.error()));
    }
    const bool stopping = opts.stop_signal && opts.stop_signal() != 0;
    // No survivor: a replacement on its way carries the run on from the checkpoint.
    if (r.alive.empty() && standby == 0 && !due.empty() && failure && writer &&
        !stopping) {
      const auto first = *std::min_element(due.begin(), due.end());
      logger->warn(
          "no node survived: waiting {} ms for a replacement",
          std::max<long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                first - clock::now())
                                .count()));
      std::this_thread::sleep_until(first);
      take_replacements();
    }
    if (!failure || !writer || !is_error(failure, errc::unrecoverable_failure) ||
        (r.alive.empty() && standby == 0) || stopping) {
      total = finish_run(std::move(total), std::move(r));
      break;
    }
    // The fallback: the survivors, a stage each, from the newest checkpoint.
    writer->finish();
    const auto s = next_plan_shape(rules, run_cfg.pipelines,
                                   static_cast<int>(r.alive.size()) + standby, false);
    run_cfg.pipelines = s.pipelines;
    run_cfg.stages = s.stages;
    auto point = rollback_point(run_cfg, ck.dir, corpus, failure);
    if (!point) {
      failure = point.error();
      break;
    }
    resume = *point; // nullptr: step 0, from the seed
    const std::int64_t to = resume ? resume->step : 0;
    const int lost = static_cast<int>(ids.size() - r.alive.size());
    renumber();
    first_event = "rolled back to step " + std::to_string(to);
    roll_back(total, to, lost);
    logger->warn("rolling back to the checkpoint of step {} on {} nodes: {}", to,
                 run_cfg.coordinates(), describe(failure));
    if (opts.on_rollback)
      opts.on_rollback(to, describe(failure));
  }
  // The last checkpoints are on disk before the run says it is done.
  if (writer)
    total.checkpoint_failures = writer->finish();
  if (failure)
    return failure;
  return total;
}

} // namespace bamboo
