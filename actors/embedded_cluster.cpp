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
#include "actors/plan_loop.hpp"
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
      : r_(std::move(r)), ids_(std::move(ids)) {
    r_.names = ids_;
  }

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

// Embedded members: nodes named by number; a killed node's replacement (a
// new spot instance) is ready replace_after after the kill, and waits as
// standby until a plan takes it.
class local_members : public member_pool {
public:
  using clock = std::chrono::steady_clock;

  local_members(caf::actor_system& sys, const run_options& opts,
                std::shared_ptr<const token_corpus> corpus,
                const std::optional<inspect_endpoint>& door,
                std::vector<preempt_spec> kills, std::size_t named, int nodes)
      : sys_(sys), opts_(opts), corpus_(std::move(corpus)), door_(door),
        kills_(std::move(kills)), named_(named), ids_(static_cast<std::size_t>(nodes)),
        next_id_(nodes) {
    std::iota(ids_.begin(), ids_.end(), 0);
  }

  int live() const override { return static_cast<int>(ids_.size()) + standby_; }
  int minimum() const override { return 1; }
  const char* noun() const override { return "nodes"; }

  caf::expected<plan_start> open(const train_config& cfg, plan_start from) override {
    if (from.state || from.dir.empty())
      return from;
    auto state = checkpoint_at(cfg, from.dir);
    if (!state)
      return state.error();
    from.state = *state;
    return from;
  }

  caf::expected<std::shared_ptr<node_backend>>
  nodes(manager_spec& spec, const plan_start& from, std::uint64_t) override {
    // The plan's places beyond the survivors go to standby replacements;
    // survivors beyond its places wait as standby.
    const auto places = static_cast<std::size_t>(spec.cfg.coordinates());
    for (; ids_.size() < places && standby_ > 0; --standby_)
      ids_.push_back(next_id_++);
    if (ids_.size() > places) {
      standby_ += static_cast<int>(ids_.size() - places);
      ids_.resize(places);
    }
    spec.standby = standby_;
    node_resources res;
    res.cfg = spec.cfg;
    res.corpus = corpus_;
    res.heartbeat_period = opts_.heartbeats.period;
    res.resume = from.state;
    injector_ = nullptr;
    replaced_ = 0;
    if (!kills_.empty() || door_) // an operator may preempt a node
      injector_ = std::make_shared<preemption_injector>(kills_);
    res.injector = injector_;
    spec.injector = injector_;
    if (door_)
      res.actors = door_->actors;
    try {
      res.transports =
          std::make_shared<transport_registry>(opts_.transport, spec.cfg.coordinates());
    } catch (const std::exception& e) {
      return make_error(errc::transport_failure, std::string("transport: ") + e.what());
    }
    return std::make_shared<local_nodes>(std::move(res), ids_);
  }

  caf::error await_plan(const caf::actor& manager, int) override {
    caf::error failure;
    caf::scoped_actor self{sys_};
    self->send(manager, train_atom::value);
    bool running = true;
    self->receive_while(running)([&](done_atom) { running = false; },
                                 [&](caf::error& err) {
                                   failure = std::move(err);
                                   running = false;
                                 },
                                 caf::after(opts_.heartbeats.period) >>
                                     [&] {
                                       if (take_replacements())
                                         self->send(manager, standby_atom::value,
                                                    standby_);
                                     });
    take_replacements(); // the plan's last kills too
    return failure;
  }

  // Survivors' kills and names, renumbered as the next plan numbers them.
  int keep(const std::vector<int>& alive) override {
    if (injector_) {
      auto next = pending_kills(*injector_, named_, alive);
      kills_ = std::move(next.kills);
      named_ = next.named;
    }
    std::vector<int> next_ids;
    for (int n : alive)
      next_ids.push_back(ids_.at(static_cast<std::size_t>(n)));
    ids_ = std::move(next_ids);
    return static_cast<int>(ids_.size());
  }

  // Replacements are due replace_after after their kills: wait for those
  // that bring the count up, never longer than the last of them.
  void top_up(int count) override {
    take_replacements();
    const auto missing = static_cast<std::size_t>(std::max(0, count - live()));
    if (missing == 0 || due_.empty())
      return;
    std::sort(due_.begin(), due_.end());
    const auto until = due_[std::min(missing, due_.size()) - 1];
    log::get("bamboo.manager")
        ->info("{} of {} nodes live: waiting {} ms for replacements", live(), count,
               std::max<long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                     until - clock::now())
                                     .count()));
    std::this_thread::sleep_until(until);
    take_replacements();
  }

private:
  // Each kill's replacement is due replace_after later; those due now join
  // the standby ones. True when any did.
  bool take_replacements() {
    if (opts_.replace_after.count() < 0 || !injector_)
      return false;
    const auto fired = injector_->fired();
    for (; replaced_ < fired.size(); ++replaced_)
      due_.push_back(fired[replaced_].at + opts_.replace_after);
    const auto now = clock::now();
    const auto ready =
        std::partition(due_.begin(), due_.end(), [&](auto t) { return t > now; });
    if (ready == due_.end())
      return false;
    standby_ += static_cast<int>(due_.end() - ready);
    due_.erase(ready, due_.end());
    log::get("bamboo.manager")
        ->info("a replacement node is ready ({} standby)", standby_);
    return true;
  }

  caf::actor_system& sys_;
  const run_options& opts_;
  std::shared_ptr<const token_corpus> corpus_;
  const std::optional<inspect_endpoint>& door_;
  std::vector<preempt_spec> kills_; // not fired yet; the first named_ name a node
  std::size_t named_;
  std::shared_ptr<preemption_injector> injector_; // this plan's
  std::size_t replaced_ = 0;                      // its kills given a replacement
  std::vector<int> ids_;                          // the plan's nodes' names
  int standby_ = 0, next_id_;                     // ready replacements; their names
  std::vector<clock::time_point> due_;            // replacements on their way
};

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
  const int ops = static_cast<int>(
      make_schedule(0, cfg.stages, cfg.pipeline_micro_batches(), cfg.redundancy).size());
  for (const auto& k : poisson_kills(opts.preempt_rate, cfg.steps, nodes, ops, cfg.seed))
    kills.push_back(k);
  local_members members(sys, opts, corpus, door, std::move(kills),
                        opts.preemptions.size(), nodes);
  plan_loop_spec spec;
  spec.cfg = cfg;
  spec.corpus = corpus;
  spec.rules = {cfg.pipelines, cfg.stages, cfg.micro_batches(), depths, false};
  if (resume)
    spec.first = {resume->step, checkpoint_step_dir(ck.dir, resume->step), resume};
  spec.checkpoint_dir = ck.dir;
  spec.checkpoints = writer;
  spec.checkpoint_every = ck.every;
  spec.replans = replans;
  take_options(spec, opts);
  spec.collect_parameters = opts.collect_parameters;
  if (door) {
    spec.board = door->board;
    spec.controls = door->controls;
    spec.actors = door->actors;
  }
  return run_plans(sys, spec, members);
}

} // namespace bamboo
