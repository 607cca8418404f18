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
#include "actors/plan_loop.hpp"
#include "actors/run_controls.hpp"
#include "log/log.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/model.hpp"
#include "model/model_definition.hpp"

namespace bamboo {

namespace {

// Worker processes as members: those the gateway admitted, the plan's first
// (placed by zone), then the standby ones; joins and losses come from the
// gateway while a plan runs.
class process_members : public member_pool {
public:
  process_members(caf::scoped_actor& self, caf::actor gateway,
                  const cluster_options& opts, std::vector<process_member> joined)
      : self_(self), gateway_(std::move(gateway)), opts_(opts), live_(std::move(joined)) {
  }

  int live() const override { return static_cast<int>(live_.size()); }
  int minimum() const override { return 2; }
  const char* noun() const override { return "workers"; }

  // Each worker reads its stage's state from the step directory itself.
  caf::expected<plan_start> open(const train_config&, plan_start from) override {
    return from;
  }

  caf::expected<std::shared_ptr<node_backend>>
  nodes(manager_spec& spec, const plan_start& from, std::uint64_t generation) override {
    in_plan_ = plan_members(live_, spec.cfg.pipelines, spec.cfg.stages);
    spec.injector = announced_;
    return make_process_nodes(spec.cfg, in_plan_, gateway_, opts_.frame_limit, generation,
                              from.dir);
  }

  caf::error await_plan(const caf::actor& manager, int places) override {
    planned_ = places;
    lost_.clear();
    auto log = log::get("bamboo.manager");
    caf::error failure;
    bool running = true;
    self_->send(manager, train_atom::value);
    self_->receive_while(running)(
        [&](done_atom) { running = false; },
        [&](caf::error& err) {
          failure = std::move(err);
          running = false;
        },
        [&](joined_atom, int id, caf::actor agent, std::string& zone) {
          live_.push_back({id, std::move(agent), std::move(zone)});
          log->info("node {} joined: standby ({} standby)", id, standby());
          self_->send(manager, standby_atom::value, standby());
        },
        [&](lost_atom, int id) {
          lost_.insert(id);
          const auto first_standby = live_.begin() + planned_;
          if (std::any_of(first_standby, live_.end(),
                          [&](const process_member& m) { return m.id == id; })) {
            remove_member(live_, id);
            self_->send(manager, standby_atom::value, standby());
          }
        });
    return failure;
  }

  // The survivors not lost meanwhile, then the standby ones, then those that
  // joined meanwhile.
  int keep(const std::vector<int>& alive) override {
    std::vector<process_member> next;
    for (int n : alive)
      if (!lost_.count(in_plan_.at(static_cast<std::size_t>(n)).id))
        next.push_back(in_plan_.at(static_cast<std::size_t>(n)));
    const int kept = static_cast<int>(next.size());
    next.insert(next.end(), live_.begin() + planned_, live_.end());
    update_members(self_, next);
    live_ = std::move(next);
    planned_ = 0;
    return kept;
  }

  void top_up(int count) override {
    update_members(self_, live_);
    if (live() >= count || opts_.replacement_wait.count() <= 0)
      return;
    log::get("bamboo.manager")
        ->info("{} of {} workers left: waiting up to {} ms for new ones", live_.size(),
               count, opts_.replacement_wait.count());
    await_members(self_, live_, count, opts_.replacement_wait);
  }

private:
  int standby() const { return static_cast<int>(live_.size()) - planned_; }

  caf::scoped_actor& self_;
  caf::actor gateway_;
  const cluster_options& opts_;
  // Kills a launcher will do: their connection drops are preemptions.
  std::shared_ptr<preemption_injector> announced_ =
      std::make_shared<preemption_injector>(opts_.announced_kills);
  std::vector<process_member> live_, in_plan_;
  int planned_ = 0;    // the running plan's places at the front of live_
  std::set<int> lost_; // members lost while it ran
};

} // namespace

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
  auto bound = publish_gateway(sys, gateway, opts.port, opts.bind, opts.token);
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
  process_members live(self, gateway, opts, std::move(members));
  plan_loop_spec spec;
  spec.cfg = cfg;
  spec.corpus = corpus;
  spec.rules = {cfg.pipelines, cfg.stages, cfg.micro_batches(), depths,
                opts.auto_pipelines};
  spec.first = {first_step, resume, nullptr};
  spec.checkpoint_dir = ck.dir;
  spec.checkpoints = writer;
  spec.checkpoint_every = ck.every;
  spec.replans = std::make_shared<checkpoint_writer>(replan_files.path(), 1);
  take_options(spec, opts); // heartbeats: the grace for a failed transfer too
  spec.board = board;
  spec.controls = controls;
  spec.actors = actors;
  if (opts.on_started)
    opts.on_started();
  auto result = run_plans(sys, spec, live);
  // Every member is let go (a standby one too), and the leave frames go out
  // before the connections close.
  self->send(gateway, broadcast_atom::value, to_wire(schema::leave{"the run is over"}));
  self->receive(caf::after(std::chrono::milliseconds(100)) >> [] {});
  stop_gateway();
  return result;
}

} // namespace bamboo
