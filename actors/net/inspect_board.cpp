#include "actors/net/inspect_board.hpp"

#include <algorithm>
#include <cstdio>

namespace bamboo {

std::int64_t inspect_board::ms_since_start(clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t - start_).count();
}

void inspect_board::add_event(const std::string& text, clock::time_point now) {
  events_.push_back({ms_since_start(now), text});
  if (events_.size() > max_events)
    events_.pop_front();
}

void inspect_board::set_run(const std::string& model, int pipelines, int stages,
                            std::int64_t steps) {
  std::lock_guard<std::mutex> guard{mtx_};
  run_.model = model;
  run_.pipelines = static_cast<std::uint32_t>(pipelines);
  run_.stages = static_cast<std::uint32_t>(stages);
  run_.steps = steps;
}

void inspect_board::on_step(const step_record& r) {
  std::lock_guard<std::mutex> guard{mtx_};
  run_.step = r.step;
  run_.generation = r.generation;
  run_.loss = r.loss;
  run_.samples_per_s = r.samples_per_s;
  run_.owners.assign(r.owners.begin(), r.owners.end());
  run_.shadows.assign(r.shadows.begin(), r.shadows.end());
  // A re-plan may change the shape; the plan says it.
  if (run_.pipelines > 0 && !r.owners.empty())
    run_.stages = static_cast<std::uint32_t>(r.owners.size()) / run_.pipelines;
  losses_.push_back(r.loss);
  if (losses_.size() > max_losses)
    losses_.pop_front();
  // A state that lasts (degraded, step after step) is one event, when it starts.
  if (!r.event.empty() && r.event != last_step_event_)
    add_event("step " + std::to_string(r.step) + ": " + r.event, clock::now());
  last_step_event_ = r.event;
}

void inspect_board::on_failover(const failover_record& f) {
  char text[256];
  std::snprintf(text, sizeof text,
                "node %d lost in step %lld (%s): stage %d moved to node %d, %.3f s, %d "
                "forwards and %d backwards recomputed",
                f.node, static_cast<long long>(f.step), to_string(f.cause), f.stage,
                f.heir, f.latency_s, f.recomputed_forwards, f.recomputed_backwards);
  event(text);
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = members_.find(f.node);
  if (it != members_.end() && it->second.gone.empty())
    it->second.gone = f.cause == failover_cause::preemption_notice ? "left" : "lost";
}

void inspect_board::on_draining(int node) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = members_.find(node);
  if (it != members_.end())
    it->second.draining = true;
}

void inspect_board::event(const std::string& text, clock::time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  add_event(text, now);
}

void inspect_board::on_join(int node, const std::string& zone, clock::time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  members_[node] = {zone, "", false};
  add_event("node " + std::to_string(node) + " joined (zone '" + zone + "')", now);
}

void inspect_board::on_gone(int node, const std::string& state, clock::time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = members_.find(node);
  if (it == members_.end() || !it->second.gone.empty())
    return;
  it->second.gone = state;
  add_event("node " + std::to_string(node) + " " + state, now);
}

schema::cluster_snapshot
inspect_board::snapshot(std::uint64_t request,
                        const std::map<int, std::int64_t>& heartbeat_age_ms,
                        clock::time_point now) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto out = run_;
  out.request = request;
  out.uptime_ms = ms_since_start(now);
  out.events.assign(events_.begin(), events_.end());
  out.losses.assign(losses_.begin(), losses_.end());
  for (const auto& [node, m] : members_) {
    std::string state = m.gone;
    if (state.empty() && m.draining)
      state = "draining";
    if (state.empty()) {
      const auto owned = std::count(out.owners.begin(), out.owners.end(), node);
      const bool shadow =
          std::find(out.shadows.begin(), out.shadows.end(), node) != out.shadows.end();
      state = owned > 1    ? "degraded"
              : owned == 1 ? "active"
              : shadow     ? "shadow"
                           : "standby";
    }
    auto age = heartbeat_age_ms.find(node);
    out.nodes.push_back(
        {static_cast<std::uint32_t>(node), m.zone, state,
         age == heartbeat_age_ms.end() || !m.gone.empty() ? -1 : age->second});
  }
  return out;
}

} // namespace bamboo
