#include "examples/sim/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "actors/plan/planner.hpp"
#include "examples/sim/py_heap.hpp"

namespace bamboo::sim {

const char* to_string(policy_kind p) {
  switch (p) {
  case policy_kind::nsdi23: return "bamboo-nsdi23";
  case policy_kind::bamboo: return "bamboo";
  case policy_kind::checkpoint_restart: return "checkpoint-restart";
  case policy_kind::on_demand: return "on-demand";
  }
  return "?";
}

const char* to_string(sim_redundancy r) {
  switch (r) {
  case sim_redundancy::off: return "off";
  case sim_redundancy::lazy: return "lazy";
  case sim_redundancy::eager: return "eager";
  case sim_redundancy::adaptive: return "adaptive";
  }
  return "?";
}

namespace {

constexpr double ms_per_hour = 3600000.0;

// Ranked as in the original: add < remove < generate < ready < global timeout
// < local timeout < step.
enum event_kind {
  ev_add = 1,
  ev_remove = 2,
  ev_generate = 3,
  ev_ready = 4,
  ev_global_timeout = 5,
  ev_local_timeout = 6,
  ev_step = 7
};

struct event {
  std::int64_t ms;
  int kind;
  int node;              // add/remove/ready
  std::uint64_t version; // step
};

struct event_less {
  bool operator()(const event& a, const event& b) const {
    return a.ms != b.ms ? a.ms < b.ms : a.kind < b.kind;
  }
};

enum class node_status { creating, ready, running };
enum class system_status { stopped, rendezvous, running };

struct instance {
  std::int64_t start = 0;
  node_status status = node_status::creating;
  std::vector<int> coords; // p * S + s
};

// A step function sampled at change points, averaged like the original.
// The live-instance count over time as the original records it: a point
// (0, n) once the first moment after time 0 is simulated, then at each change a
// closing point with the old count and an opening one with the new, at the same
// time. Its average pairs the points up, as the original's calculate_average.
struct instance_series {
  std::vector<double> xs, ys;
  void record(double hours, int n) {
    if (xs.empty()) {
      xs = {0};
      ys = {double(n)};
    } else if (ys.back() != n) {
      xs.insert(xs.end(), {hours, hours});
      ys.insert(ys.end(), {ys.back(), double(n)});
    }
  }
  // The integral over [a, b] of the count, the last value holding on (b not
  // before the last point).
  double integral(double a, double b) const {
    double total = 0, until = b;
    for (std::size_t i = ys.size(); i-- > 0;) {
      if (i % 2 == 1) // a closing point: the opening one after it holds the value
        continue;
      if (i == 0 || xs[i] <= a) {
        total += ys[i] * (until - a);
        break;
      }
      total += ys[i] * (until - xs[i]);
      until = xs[i];
    }
    return total;
  }
  // The original's average: each pair of points is a segment.
  double average(double duration) const {
    double total = 0;
    for (std::size_t i = 0; i + 1 < xs.size(); i += 2)
      total += (xs[i + 1] - xs[i]) * ys[i];
    return duration > 0 ? total / duration : 0;
  }
};

class engine {
public:
  explicit engine(const sim_options& o)
      : o_(o), full_stages_(o.prof.stages), stages_(o.prof.stages) {}

  sim_result run(const std::vector<trace_event>& trace) {
    std::map<std::string, int> ids;
    for (const auto& e : trace) {
      auto [it, fresh] = ids.emplace(e.node, static_cast<int>(ids.size()));
      (void)fresh;
      push({e.ms, e.add ? ev_add : ev_remove, it->second, 0});
    }
    nodes_.resize(ids.size());
    std::int64_t now = 0;
    while (!events_.empty()) {
      event e = events_.pop();
      if (o_.duration_ms && e.ms > *o_.duration_ms) {
        now = *o_.duration_ms;
        break;
      }
      now = e.ms;
      handle(e);
      if (!o_.duration_ms && o_.prof.target_steps > 0 && steps_ >= o_.prof.target_steps)
        break;
      if (!events_.empty() && events_.top().ms == now)
        continue;
      if (now > 0 || !instances_.xs.empty())
        instances_.record(now / ms_per_hour, static_cast<int>(live_.size()));
    }
    return finish(now);
  }

private:
  void push(const event& e) { events_.push(e); }

  void handle(const event& e) {
    switch (e.kind) {
    case ev_add: on_add(e.ms, e.node); break;
    case ev_remove: on_remove(e.ms, e.node); break;
    case ev_ready: on_ready(e.ms, e.node); break;
    case ev_global_timeout: on_rendezvous_timeout(e.ms, true); break;
    case ev_local_timeout: on_rendezvous_timeout(e.ms, false); break;
    case ev_step: on_step(e.ms, e.version); break;
    default: break;
    }
  }

  bool is_live(int n) const {
    return std::find(live_.begin(), live_.end(), n) != live_.end();
  }

  void note(std::int64_t ms, const char* what) {
    if (!o_.record_series)
      return;
    series_.push_back({ms / ms_per_hour, static_cast<int>(live_.size()), last_perf_,
                       o_.spot_price * live_.size(), steps_, pipelines_, what,
                       pipelines_ > 0 ? stages_ : 0});
  }

  void on_add(std::int64_t ms, int n) {
    live_.push_back(n);
    nodes_[n] = instance{ms, node_status::creating, {}};
    push({ms + o_.ready_ms, ev_ready, n, 0});
    note(ms, "add");
  }

  void on_ready(std::int64_t ms, int n) {
    if (!is_live(n))
      return;
    nodes_[n].status = node_status::ready;
    if (status_ == system_status::stopped)
      start_rendezvous(ms, true);
    else if (status_ == system_status::rendezvous)
      rendezvous_.push_back(n);
    else
      ++waiting_;
  }

  void fatal(std::int64_t ms, const char* why) {
    ++fatal_;
    note(ms, why);
    if (o_.policy != policy_kind::nsdi23) {
      // Checkpoint fallback: the job stops (the step in flight is void, every
      // node waits for the restart) and the steps since the last checkpoint are
      // lost. The original instead lets its queued step event run on.
      steps_ = checkpoint_step_;
      restore_ = true;
      ++version_;
      for (int n : live_)
        if (nodes_[n].status == node_status::running) {
          nodes_[n].status = node_status::ready;
          nodes_[n].coords.clear();
        }
    }
    start_rendezvous(ms, true);
  }

  void on_remove(std::int64_t ms, int n) {
    ++removals_;
    live_.erase(std::find(live_.begin(), live_.end(), n));
    note(ms, "remove");
    instance& inst = nodes_[n];
    const bool was_running = inst.status == node_status::running;
    if (was_running) {
      ++running_losses_;
      if (o_.policy == policy_kind::nsdi23) {
        if (!nsdi23_cover(n))
          return fatal(ms, "fatal");
      } else if (o_.policy == policy_kind::checkpoint_restart) {
        return fatal(ms, "fatal");
      } else if (!planner_cover(n)) {
        return fatal(ms, "fatal");
      }
    }
    inst.coords.clear();
    // The original slows down on any removal while running; ours only when a
    // running node was lost (a standby's loss costs nothing).
    const bool slows = o_.policy == policy_kind::nsdi23 || was_running;
    if (slows && status_ == system_status::running && !fallback_) {
      fallback_ = std::pair<std::int64_t, std::int64_t>{steps_, ms};
      fallback_handled_ = false;
      step_ms_ = static_cast<std::int64_t>(step_ms_ * o_.fallback_slowdown);
    }
  }

  // The original's rule: the predecessor (wrapping) takes the coordinates over,
  // unless it, or the lost node, already holds two.
  bool nsdi23_cover(int n) {
    const auto& inst = nodes_[n];
    if (inst.coords.size() > 1)
      return false;
    const int c = inst.coords[0];
    const int p = c / stages_, s = c % stages_;
    const int search = p * stages_ + (s == 0 ? stages_ - 1 : s - 1);
    for (int m : live_) {
      auto& other = nodes_[m];
      if (std::find(other.coords.begin(), other.coords.end(), search) ==
          other.coords.end())
        continue;
      if (other.coords.size() > 1)
        return false;
      other.coords.push_back(c);
      return true;
    }
    return true; // no live predecessor holds it: the original carries on too
  }

  // Our planner decides; the instances follow its plan.
  bool planner_cover(int n) {
    auto d = plan_failover(plan_, n);
    if (!d.fatal.empty())
      return false;
    plan_ = d.plan;
    for (auto [coord, heir] : d.promoted)
      nodes_[heir].coords.push_back(coord);
    return true;
  }

  void start_rendezvous(std::int64_t ms, bool global) {
    status_ = system_status::rendezvous;
    restart_rendezvous();
    push({ms + (global ? o_.global_rendezvous_ms : o_.prof.local_rendezvous_ms),
          global ? ev_global_timeout : ev_local_timeout, -1, 0});
  }

  void restart_rendezvous() {
    rendezvous_.clear();
    for (int n : live_)
      if (nodes_[n].status != node_status::creating)
        rendezvous_.push_back(n);
  }

  void on_rendezvous_timeout(std::int64_t ms, bool global) {
    for (int n : rendezvous_)
      if (!is_live(n)) {
        restart_rendezvous();
        push({ms + (global ? o_.global_rendezvous_ms : o_.prof.local_rendezvous_ms),
              global ? ev_global_timeout : ev_local_timeout, -1, 0});
        return;
      }
    assign_coordinates();
    fallback_.reset();
    fallback_handled_ = false;
    ++version_;
    rendezvous_.clear();
    note(ms, global ? "global-rendezvous" : "local-rendezvous");
    if (pipelines_ == 0) {
      status_ = system_status::stopped;
      return;
    }
    status_ = system_status::running;
    if (start_ms_ < 0) { // steps are timed from here on, as in the original
      start_ms_ = ms;
      prev_step_ms_ = ms;
    }
    choose_mode(ms);
    step_ms_ = fault_free_step_ms();
    std::int64_t first = ms + step_ms_;
    if (restore_) {
      first += o_.restart_ms;
      restore_ = false;
    }
    push({first, ev_step, -1, version_});
  }

  // The depth of the next plan: the profile's S, or (bamboo with a minimum
  // depth) as many stages as there are nodes when they are fewer.
  int depth_for(int nodes) const {
    if (o_.policy != policy_kind::bamboo || o_.min_stages <= 0 || nodes >= full_stages_)
      return full_stages_;
    return plan_depth(nodes, {o_.min_stages, full_stages_});
  }

  void assign_coordinates() {
    const int n = static_cast<int>(rendezvous_.size());
    stages_ = depth_for(n);
    const int p = n < stages_ ? 0 : n / stages_;
    waiting_ = 0;
    std::vector<int> order;
    for (int node : rendezvous_) {
      auto& inst = nodes_[node];
      inst.coords.clear();
      if (static_cast<int>(order.size()) < p * stages_) {
        inst.status = node_status::running;
        order.push_back(node);
      } else {
        inst.status = node_status::ready;
        ++waiting_;
      }
    }
    place_by_zone(order);
    for (int c = 0; c < static_cast<int>(order.size()); ++c)
      nodes_[order[c]].coords = {c};
    pipelines_ = p;
    if (p > 0)
      plan_ = cluster_plan::assign(order, p, stages_, planner_mode());
  }

  // Each pipeline's nodes around its ring so that a stage and its replica are
  // in different zones where the zones allow it (the planner's zone_ring).
  void place_by_zone(std::vector<int>& order) const {
    if (o_.policy != policy_kind::bamboo || o_.zones <= 1)
      return;
    for (std::size_t first = 0; first + stages_ <= order.size(); first += stages_) {
      const std::vector<int> ring(order.begin() + first, order.begin() + first + stages_);
      std::vector<std::string> zones;
      for (int node : ring)
        zones.push_back(std::to_string(node % o_.zones));
      const auto placed = zone_ring(zones);
      for (int s = 0; s < stages_; ++s)
        order[first + s] = ring[placed[s]];
    }
  }

  redundancy_mode planner_mode() const {
    if (o_.policy == policy_kind::checkpoint_restart)
      return redundancy_mode::off;
    return mode_;
  }

  // Adaptive redundancy: the mode with the smallest expected loss of training
  // time per hour at the preemption rate seen so far (running nodes lost per hour).
  void choose_mode(std::int64_t ms) {
    if (o_.policy != policy_kind::bamboo)
      return;
    if (o_.redundancy != sim_redundancy::adaptive) {
      mode_ = o_.redundancy == sim_redundancy::off     ? redundancy_mode::off
              : o_.redundancy == sim_redundancy::eager ? redundancy_mode::eager
                                                       : redundancy_mode::lazy;
      plan_.mode = mode_;
      return;
    }
    // One loss in the first hour as a prior: with no history, protection wins.
    const double rate = (running_losses_ + 1.0) / (ms / ms_per_hour + 1.0); // per hour
    const double step = o_.prof.step_seconds(pipelines_);
    const double off = rate *
                       (o_.global_rendezvous_ms / 1e3 + o_.restart_ms / 1e3 +
                        o_.checkpoint_interval_ms / 2e3) /
                       3600.0;
    const double lazy =
        lazy_overhead() + rate * (o_.prof.local_rendezvous_ms / 1e3 + step) / 3600.0;
    const double eager = eager_overhead() +
                         rate * (o_.prof.local_rendezvous_ms / 1e3 + step / 1.5) / 3600.0;
    mode_ = off <= lazy && off <= eager ? redundancy_mode::off
            : lazy <= eager             ? redundancy_mode::lazy
                                        : redundancy_mode::eager;
    plan_ = cluster_plan::assign(plan_.owner, pipelines_, stages_, mode_);
  }

  std::int64_t fault_free_step_ms() const {
    // A shallower pipeline: each stage has S / S' times the layers.
    double s = o_.prof.step_seconds(pipelines_) * full_stages_ / stages_;
    if (o_.policy == policy_kind::bamboo)
      s *= 1.0 + (mode_ == redundancy_mode::lazy    ? lazy_overhead()
                  : mode_ == redundancy_mode::eager ? eager_overhead()
                                                    : 0.0);
    return static_cast<std::int64_t>(std::llround(s * 1000));
  }

  // Measured on the profile's machine, they beat the options' defaults.
  double lazy_overhead() const {
    return o_.prof.lazy_overhead.value_or(o_.lazy_overhead);
  }
  double eager_overhead() const {
    return o_.prof.eager_overhead.value_or(o_.eager_overhead);
  }

  int overloaded() const {
    int n = 0;
    for (int m : live_)
      if (nodes_[m].status == node_status::running && nodes_[m].coords.size() > 1)
        ++n;
    return n;
  }

  bool should_reconfigure() const {
    const int over = overloaded();
    if (over > 0 && waiting_ >= over)
      return true;
    const int active = pipelines_ * stages_ - over;
    if (over > 0 && 2.0 * over / active > 0.05)
      return true;
    // A shallower pipeline deepens when nodes wait (as the planner's trigger).
    if (stages_ < full_stages_ && waiting_ > 0)
      return true;
    return (active + waiting_) / stages_ > pipelines_;
  }

  void on_step(std::int64_t ms, std::uint64_t version) {
    if (version != version_)
      return;
    if (fallback_ && !fallback_handled_ && fallback_->first == steps_) {
      // The step in flight when a node was lost is stretched: its lost work is
      // recomputed (eager FRC leaves only the backward, about two thirds of it).
      double stretch = (ms - fallback_->second) * (o_.fallback_slowdown - 1.0);
      if (o_.policy == policy_kind::bamboo && mode_ == redundancy_mode::eager)
        stretch *= 2.0 / 3.0;
      push({ms + static_cast<std::int64_t>(stretch), ev_step, -1, version});
      fallback_handled_ = true;
      return;
    }
    ++steps_;
    if (o_.policy == policy_kind::bamboo) // as the manager does at a step boundary
      for (auto [coord, node] : plan_reshadow(plan_))
        plan_.shadow[coord] = node;
    // The original's accounting: a step's throughput holds from the previous
    // step's end (a rendezvous in between included); its value is that over the
    // mean cost of the same stretch.
    const double interval_s = (ms - prev_step_ms_) / 1e3;
    last_perf_ = interval_s > 0 ? o_.prof.samples_per_step / interval_s : 0;
    const double from_h = prev_step_ms_ / ms_per_hour, to_h = ms / ms_per_hour;
    const double cost = o_.spot_price * instances_.integral(from_h, to_h);
    perf_hours_ += (to_h - from_h) * last_perf_;
    if (cost > 0)
      value_hours_ += (to_h - from_h) * last_perf_ / (cost / (to_h - from_h));
    prev_step_ms_ = ms;
    last_step_ms_ = ms;
    if (o_.record_series && ms - last_series_ms_ >= 60000) {
      note(ms, "step");
      last_series_ms_ = ms;
    }
    std::int64_t next = ms;
    if (o_.policy != policy_kind::nsdi23 &&
        ms - checkpoint_ms_ >= o_.checkpoint_interval_ms) {
      checkpoint_step_ = steps_;
      checkpoint_ms_ = ms;
      next += o_.checkpoint_cost_ms;
    }
    if (should_reconfigure()) {
      start_rendezvous(ms, false);
      return;
    }
    push({next + step_ms_, ev_step, -1, version_});
  }

  // Averages up to the last completed step, as the original computes them
  // (instance changes after it count too, divided by the same hours).
  sim_result finish(std::int64_t end_ms) {
    sim_result r;
    auto& s = r.summary;
    const std::int64_t last = last_step_ms_ >= 0 ? last_step_ms_ : end_ms;
    const double hours = last / ms_per_hour;
    instances_.xs.push_back(hours);
    instances_.ys.push_back(static_cast<double>(live_.size()));
    s.steps = steps_;
    s.samples = steps_ * o_.prof.samples_per_step;
    s.preemptions = removals_;
    s.fatal_failures = fatal_;
    s.hours = hours;
    s.mean_instances = instances_.average(hours);
    s.cost_per_h = o_.spot_price * s.mean_instances;
    const double trained_h = start_ms_ >= 0 ? hours - start_ms_ / ms_per_hour : 0;
    s.samples_per_s = trained_h > 0 ? perf_hours_ / trained_h : 0;
    s.value = trained_h > 0 ? value_hours_ / trained_h : 0;
    const double dollars = s.cost_per_h * hours;
    s.samples_per_dollar = dollars > 0 ? s.samples / dollars : 0;
    r.series = std::move(series_);
    return r;
  }

  const sim_options& o_;
  const int full_stages_; // the profile's S
  int stages_;            // the current plan's
  py_heap<event, event_less> events_;
  std::vector<instance> nodes_;
  std::vector<int> live_; // in insertion order, as the original's dict
  system_status status_ = system_status::stopped;
  std::vector<int> rendezvous_;
  std::uint64_t version_ = 0;
  int pipelines_ = 0;
  int waiting_ = 0;
  std::int64_t steps_ = 0;
  int fatal_ = 0;
  int removals_ = 0;
  int running_losses_ = 0;
  std::int64_t step_ms_ = 0;
  std::optional<std::pair<std::int64_t, std::int64_t>> fallback_; // (steps, ms)
  bool fallback_handled_ = false;
  std::int64_t prev_step_ms_ = 0;
  std::int64_t start_ms_ = -1;              // when training first started
  std::int64_t last_step_ms_ = -1;          // when the last step completed
  double perf_hours_ = 0, value_hours_ = 0; // integrals over the steps' stretches
  std::int64_t checkpoint_step_ = 0, checkpoint_ms_ = 0;
  bool restore_ = false;
  double last_perf_ = 0;
  std::int64_t last_series_ms_ = -60000;
  cluster_plan plan_;
  redundancy_mode mode_ = redundancy_mode::lazy;
  instance_series instances_;
  std::vector<series_point> series_;
};

sim_result simulate_on_demand(const sim_options& o) {
  sim_result r;
  auto& s = r.summary;
  const auto& p = o.prof;
  const double step = p.on_demand_step_s > 0 ? p.on_demand_step_s : p.step_seconds(1);
  const int n = p.on_demand_instances > 0 ? p.on_demand_instances : p.stages;
  double seconds = o.duration_ms ? *o.duration_ms / 1e3 : p.target_steps * step;
  s.steps = static_cast<std::int64_t>(seconds / step);
  s.samples = s.steps * p.samples_per_step;
  s.hours = seconds / 3600.0;
  s.mean_instances = n;
  s.cost_per_h = n * o.on_demand_price;
  s.samples_per_s = p.samples_per_step / step;
  s.value = s.samples_per_s / s.cost_per_h;
  s.samples_per_dollar = s.samples / (s.cost_per_h * std::max(s.hours, 1e-9));
  if (o.record_series) {
    r.series.push_back({0, n, s.samples_per_s, s.cost_per_h, 0, 1, "start", p.stages});
    r.series.push_back(
        {s.hours, n, s.samples_per_s, s.cost_per_h, s.steps, 1, "end", p.stages});
  }
  return r;
}

} // namespace

sim_result simulate(const std::vector<trace_event>& trace, const sim_options& o) {
  if (o.policy == policy_kind::on_demand)
    return simulate_on_demand(o);
  engine e(o);
  return e.run(trace);
}

} // namespace bamboo::sim
