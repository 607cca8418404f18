#include "actors/plan/planner.hpp"

#include <algorithm>

namespace bamboo {

cluster_plan cluster_plan::initial(int stages, redundancy_mode mode) {
  cluster_plan p;
  p.stages = stages;
  p.mode = mode;
  for (int s = 0; s < stages; ++s) {
    p.owner.push_back(s);
    p.alive.push_back(true);
    // The replica of stage s lives on the node of stage s-1 (a ring).
    const bool shadows = mode != redundancy_mode::off && stages > 1;
    p.shadow.push_back(shadows ? (s + stages - 1) % stages : -1);
  }
  return p;
}

int same_zone_neighbours(const std::vector<std::string>& zones,
                         const std::vector<int>& ring) {
  const auto n = ring.size();
  int same = 0;
  for (std::size_t i = 0; n > 1 && i < n; ++i)
    same += zones.at(ring[i]) == zones.at(ring[(i + 1) % n]) && (n > 2 || i == 0);
  return same;
}

std::vector<int> zone_ring(const std::vector<std::string>& zones) {
  const int n = static_cast<int>(zones.size());
  std::vector<int> given(n);
  for (int i = 0; i < n; ++i)
    given[i] = i;
  if (same_zone_neighbours(zones, given) == 0)
    return given;
  // The zones in order of first appearance, then by size (stable: ties keep it).
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> members;
  for (int i = 0; i < n; ++i) {
    if (members[zones[i]].empty())
      order.push_back(zones[i]);
    members[zones[i]].push_back(i);
  }
  if (order.size() == 1)
    return given;
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return members[a].size() > members[b].size();
  });
  // Positions 0, 2, 4, ... then 1, 3, 5, ...: consecutive nodes of one zone
  // land two apart.
  std::vector<int> ring(n);
  int slot = 0;
  for (const auto& z : order)
    for (int node : members[z]) {
      ring[slot] = node;
      slot += 2;
      if (slot >= n)
        slot = 1;
    }
  return same_zone_neighbours(zones, ring) < same_zone_neighbours(zones, given) ? ring
                                                                                : given;
}

cluster_plan cluster_plan::assign(const std::vector<int>& nodes, int pipelines,
                                  int stages, redundancy_mode mode) {
  cluster_plan p;
  p.pipelines = pipelines;
  p.stages = stages;
  p.mode = mode;
  int max_id = 0;
  for (int n : nodes)
    max_id = std::max(max_id, n);
  p.alive.assign(max_id + 1, false);
  const bool shadows = mode != redundancy_mode::off && stages > 1;
  for (int c = 0; c < pipelines * stages; ++c) {
    p.owner.push_back(nodes.at(c));
    p.alive[nodes[c]] = true;
  }
  for (int c = 0; c < pipelines * stages; ++c) {
    const int pipe = c / stages, s = c % stages;
    p.shadow.push_back(shadows ? p.owner[pipe * stages + (s + stages - 1) % stages] : -1);
  }
  return p;
}

std::vector<int> cluster_plan::stages_of(int node) const {
  std::vector<int> out;
  for (int s = 0; s < static_cast<int>(owner.size()); ++s)
    if (owner[s] == node)
      out.push_back(s);
  return out;
}

int cluster_plan::live_nodes() const {
  return static_cast<int>(std::count(alive.begin(), alive.end(), true));
}

failover_decision plan_failover(const cluster_plan& plan, int node) {
  failover_decision d;
  d.plan = plan;
  d.plan.generation = plan.generation + 1;
  if (node < 0 || node >= static_cast<int>(plan.alive.size()) || !plan.alive[node]) {
    d.fatal = "node " + std::to_string(node) + " is not a live node";
    return d;
  }
  d.plan.alive[node] = false;
  auto lost = plan.stages_of(node);
  if (lost.size() > 1) {
    std::string list;
    for (int s : lost)
      list += (list.empty() ? "" : " and ") + std::to_string(s);
    // Named by stage: the caller names the node as its records do.
    d.fatal = "it ran stages " + list +
              " (it had taken over a lost neighbour's stage from its replica, and no "
              "other copy of that stage is left)";
    return d;
  }
  for (std::size_t s = 0; s < plan.shadow.size(); ++s)
    if (plan.shadow[s] == node)
      d.plan.shadow[s] = -1; // its replica died with it
  for (int s : lost) {
    const int heir = plan.shadow[s];
    if (heir < 0 || !plan.alive[heir]) {
      const auto stage = "stage " + std::to_string(s) + " lost";
      d.fatal =
          plan.mode == redundancy_mode::off ? stage + " with redundancy off"
          : plan.stages < 2
              ? stage + ": a pipeline of one stage has no shadow"
              : stage + " and its replica is gone too (two neighbouring nodes lost)";
      return d;
    }
    d.plan.owner[s] = heir;
    d.plan.shadow[s] = -1;
    d.promoted.push_back({s, heir});
  }
  return d;
}

std::vector<std::pair<int, int>> plan_reshadow(const cluster_plan& plan) {
  std::vector<std::pair<int, int>> out;
  if (plan.mode == redundancy_mode::off || plan.stages < 2)
    return out;
  for (int c = 0; c < static_cast<int>(plan.owner.size()); ++c) {
    if (plan.shadow[c] >= 0)
      continue;
    const int p = c / plan.stages, s = c % plan.stages;
    const int pred = p * plan.stages + (s + plan.stages - 1) % plan.stages;
    const int node = plan.owner[pred];
    if (node != plan.owner[c] && plan.alive[node])
      out.push_back({c, node});
  }
  return out;
}

depth_range resolve(depth_range r, int stages) {
  if (r.min <= 0)
    r.min = stages;
  if (r.max <= 0)
    r.max = stages;
  return r;
}

std::optional<std::string> check_depths(const depth_range& given, int stages, int layers,
                                        int lowest) {
  const auto r = resolve(given, stages);
  const auto n = [](int v) { return std::to_string(v); };
  if (given.min < 0 || given.max < 0)
    return std::string("--min-stages and --max-stages must not be negative");
  if (r.min > r.max)
    return "--min-stages " + n(r.min) + " is above --max-stages " + n(r.max);
  if (r.min < lowest)
    return "--min-stages " + n(r.min) + " is below " + n(lowest) +
           " (the fewest stages "
           "this mode runs)";
  if (r.max > layers)
    return "--max-stages " + n(r.max) + " is above the model's " + n(layers) +
           " layers (a stage holds one or more)";
  if (stages < r.min || stages > r.max)
    return "--stages " + n(stages) + " is outside --min-stages " + n(r.min) +
           " to --max-stages " + n(r.max);
  return std::nullopt;
}

int plan_depth(int live, const depth_range& r) {
  return std::max(r.min, std::min(r.max, live));
}

namespace {

// "node N runs stages X Y": the first live node that runs two or more stages
// (named by `ids` when given), or empty when there is none.
std::string overloaded_node(const cluster_plan& plan, const std::vector<int>& ids) {
  for (int n = 0; n < static_cast<int>(plan.alive.size()); ++n) {
    const auto stages = plan.stages_of(n);
    if (!plan.alive[n] || stages.size() < 2)
      continue;
    std::string list;
    for (int s : stages)
      list += " " + std::to_string(s);
    return "node " + std::to_string(n < static_cast<int>(ids.size()) ? ids[n] : n) +
           " runs stages" + list;
  }
  return {};
}

} // namespace

std::string replan_reason(const cluster_plan& plan, const depth_range& depths,
                          int standby, const std::vector<int>& ids) {
  const int live = plan.live_nodes();
  if (const auto node = overloaded_node(plan, ids); !node.empty()) {
    if (standby > 0)
      return node + " and " + std::to_string(standby) + " standby node(s) can take one";
    if (plan.pipelines == 1 && plan.stages > depths.min && live >= depths.min)
      return node + " and no node is standby: the layers are re-partitioned into " +
             std::to_string(plan_depth(live, depths)) + " stages";
    return {};
  }
  if (standby > 0 && plan.stages < depths.max)
    return "the pipeline has " + std::to_string(plan.stages) + " of " +
           std::to_string(depths.max) + " stages and " + std::to_string(standby) +
           " standby node(s) can deepen it";
  return {};
}

int fit_pipelines(int nodes, int stages, int micro_batches) {
  int p = stages > 0 ? nodes / stages : 0;
  while (p > 1 && micro_batches % p != 0)
    --p;
  return p;
}

plan_shape next_plan_shape(const shape_rules& r, int current_pipelines, int workers,
                           bool replan) {
  const int fit = fit_pipelines(workers, r.stages, r.micro_batches);
  plan_shape s;
  if (replan) {
    s.pipelines = r.auto_pipelines ? std::max(1, fit) : std::max(1, current_pipelines);
    s.stages = s.pipelines > 1 ? r.stages : plan_depth(workers, r.depths);
    if (s.pipelines * s.stages <= workers)
      return s;
  }
  s.pipelines = r.pipelines > 1 || r.auto_pipelines ? std::max(1, fit) : 1;
  s.stages = fit >= 1 && s.pipelines > 1 ? r.stages
                                         : std::max(1, std::min(r.depths.max, workers));
  return s;
}

plan_end after_plan(const plan_outcome& o) {
  if (!o.failed) // a stop then ends the new plan at its first boundary, checkpointed
    return o.replanned ? plan_end::replan : plan_end::finish;
  return o.unrecoverable && o.checkpoints && !o.stopping ? plan_end::roll_back
                                                         : plan_end::finish;
}

std::string pipeline_reason(const cluster_plan& plan, int standby, int micro_batches,
                            const std::vector<int>& ids) {
  const int live = plan.live_nodes();
  const int fit = fit_pipelines(live + standby, plan.stages, micro_batches);
  if (standby > 0 && fit > plan.pipelines)
    return std::to_string(standby) + " standby node(s) can form " +
           std::to_string(fit - plan.pipelines) +
           " more pipeline(s): " + std::to_string(plan.pipelines) + " -> " +
           std::to_string(fit);
  if (standby > 0 || plan.pipelines < 2)
    return {};
  const auto node = overloaded_node(plan, ids);
  if (node.empty())
    return {};
  return node + " and no node is standby: " + std::to_string(plan.pipelines) + " -> " +
         std::to_string(fit_pipelines(live, plan.stages, micro_batches)) +
         " pipeline(s) give every stage a node of its own";
}

std::vector<resume_order_plan> plan_resume(const std::vector<stage_done>& done,
                                           int pipelines) {
  const int n = static_cast<int>(done.size());
  const int stages = n / std::max(1, pipelines);
  std::vector<resume_order_plan> out(n);
  for (int c = 0; c < n; ++c) {
    auto& o = out[c];
    const bool has_next = c % stages + 1 < stages, has_prev = c % stages > 0;
    if (done[c].restarted) {
      // A restarted stage sends as it runs; it skips what its peers already hold.
      if (has_next)
        o.delivered_activations.assign(done[c + 1].forwards.begin(),
                                       done[c + 1].forwards.end());
      if (has_prev)
        o.delivered_gradients.assign(done[c - 1].backwards.begin(),
                                     done[c - 1].backwards.end());
      continue;
    }
    if (has_next)
      for (int j : done[c].forwards)
        if (!done[c + 1].forwards.count(j))
          o.resend_activations.push_back(j);
    if (has_prev)
      for (int j : done[c].backwards)
        if (!done[c - 1].backwards.count(j))
          o.resend_gradients.push_back(j);
  }
  return out;
}

std::vector<stage_done>
work_done(const std::vector<std::optional<stage_progress>>& progress,
          const std::set<int>& restarted, const std::vector<bool>& committed,
          std::int64_t step, int micro_batches, int pipelines) {
  const int n = static_cast<int>(progress.size());
  const int stages = n / std::max(1, pipelines);
  std::vector<stage_done> done(n);
  for (int c = 0; c < n; ++c) {
    if (restarted.count(c)) {
      if (committed[c]) { // the replica already has the update
        for (int j = 0; j < micro_batches; ++j) {
          done[c].forwards.insert(j);
          done[c].backwards.insert(j);
        }
        continue;
      }
      done[c].restarted = true;
      // FRC run by the predecessor is the heir's inherited forward work.
      if (c % stages > 0 && progress[c - 1] && progress[c - 1]->step == step)
        done[c].forwards.insert(progress[c - 1]->frc.begin(), progress[c - 1]->frc.end());
      continue;
    }
    if (progress[c] && progress[c]->step == step) {
      done[c].forwards.insert(progress[c]->forwards.begin(), progress[c]->forwards.end());
      done[c].backwards.insert(progress[c]->backwards.begin(),
                               progress[c]->backwards.end());
    }
  }
  return done;
}

std::vector<sum_order>
plan_sums(const std::vector<std::optional<stage_progress>>& progress,
          const std::set<int>& restarted, const std::vector<bool>& committed,
          std::int64_t step, int pipelines) {
  const int n = static_cast<int>(progress.size());
  const int stages = n / std::max(1, pipelines);
  std::vector<sum_order> out(stages);
  if (pipelines < 2)
    return out;
  auto has_sum = [&](int c) {
    return !restarted.count(c) && progress[c] && progress[c]->step == step &&
           progress[c]->complete;
  };
  for (int s = 0; s < stages; ++s) {
    auto& o = out[s];
    std::vector<int> needers;
    int source = -1, lost_sum = -1;
    for (int p = 0; p < pipelines; ++p) {
      const int c = p * stages + s;
      if (has_sum(c)) {
        if (source < 0)
          source = p;
      } else if (restarted.count(c) && committed[c]) {
        lost_sum = p; // its replica has the update, but not the sum
      } else {
        needers.push_back(p);
      }
    }
    if (needers.empty() || source >= 0) {
      o.source = needers.empty() ? -1 : source;
      if (o.source >= 0)
        o.targets = needers;
      continue;
    }
    if (lost_sum >= 0)
      o.fatal = "stage " + std::to_string(s) + "'s gradient sum of step " +
                std::to_string(step) + " is lost: pipeline " + std::to_string(lost_sum) +
                " committed it before its node went, and no other pipeline kept it";
  }
  return out;
}

} // namespace bamboo
