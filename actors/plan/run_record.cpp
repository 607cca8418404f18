#include "actors/plan/run_record.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace bamboo {

const char* to_string(failover_cause c) {
  switch (c) {
  case failover_cause::preempted: return "preempted";
  case failover_cause::preemption_notice: return "preemption notice";
  case failover_cause::actor_down: return "actor down";
  case failover_cause::connection_lost: return "connection lost";
  case failover_cause::missed_heartbeats: return "missed heartbeats";
  }
  return "unknown";
}

bool is_preemption(failover_cause c) {
  return c == failover_cause::preempted || c == failover_cause::preemption_notice;
}

std::string describe(const failover_record& f) {
  std::string out = to_string(f.cause);
  if (!f.detail.empty())
    out += " (" + f.detail + ")";
  return out;
}

std::uint64_t fnv1a(const void* data, std::size_t size) {
  std::uint64_t h = 14695981039346656037ull;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::uint64_t fnv1a_words(const void* data, std::size_t size) {
  std::uint64_t h = 14695981039346656037ull;
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, bytes + i, 8);
    h ^= w;
    h *= 1099511628211ull;
  }
  for (; i < size; ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return h;
}

schema::tensor_digest digest_of(const param_blob& b) {
  return {b.name, b.values.size(), fnv1a(b.values.data(), 4 * b.values.size())};
}

std::vector<schema::tensor_digest> digests_of(const std::vector<param_blob>& blobs) {
  std::vector<schema::tensor_digest> out;
  for (const auto& b : blobs)
    out.push_back(digest_of(b));
  return out;
}

void add_plan(run_result& run, run_result& plan) {
  std::move(plan.failovers.begin(), plan.failovers.end(),
            std::back_inserter(run.failovers));
  std::move(plan.steps.begin(), plan.steps.end(), std::back_inserter(run.steps));
  plan.failovers.clear();
  plan.steps.clear();
}

void roll_back(run_result& run, std::int64_t to_step, int lost) {
  run.steps.erase(std::remove_if(run.steps.begin(), run.steps.end(),
                                 [&](const step_record& s) { return s.step >= to_step; }),
                  run.steps.end());
  ++run.rollbacks;
  run.rollback_losses += lost;
}

run_result finish_run(run_result&& run, run_result&& last) {
  last.steps = std::move(run.steps);
  last.failovers = std::move(run.failovers);
  last.rollbacks = run.rollbacks;
  last.rollback_losses = run.rollback_losses;
  last.replans = run.replans;
  return std::move(last);
}

} // namespace bamboo
