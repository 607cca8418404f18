// The worker processes of a cluster run (actors/net/cluster_runner.hpp): who
// joined, waiting for them, placing them by zone, and the node backend that
// drives their stages through proxies.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/node_backend.hpp"
#include "model/config.hpp"

namespace bamboo {

struct process_member {
  int id = 0;
  caf::actor agent;
  std::string zone;
};

void remove_member(std::vector<process_member>& members, int id);

// Waits until `members` counts `count` live workers (joins added, losses
// removed as the gateway tells of them); false when the time ran out first, with
// those that came meanwhile kept.
bool await_members(caf::scoped_actor& self, std::vector<process_member>& members,
                   int count, std::chrono::milliseconds timeout);

// Joins and losses the gateway told of while the manager ran.
void update_members(caf::scoped_actor& self, std::vector<process_member>& members);

// The plan's members: the first P x S live ones (the caller checks there are
// that many), pipeline by pipeline, each pipeline's placed around its ring so
// that no stage's replica is in its zone where the zones allow it.
std::vector<process_member> plan_members(const std::vector<process_member>& live,
                                         int pipelines, int stages);

// Nodes as worker processes behind proxies (generation `generation`, from the
// checkpoint step directory `resume` or from scratch).
std::shared_ptr<node_backend>
make_process_nodes(train_config cfg, std::vector<process_member> members,
                   caf::actor gateway, std::size_t frame_limit, std::uint64_t generation,
                   std::string resume);

} // namespace bamboo
