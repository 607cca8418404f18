// The cluster manager: drives the steps of a run (run, report, commit), owns the
// plan and its generation, supervises the nodes' actors and fails a lost node's
// stage over to its shadow in the middle of a step.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/messages.hpp"
#include "actors/node_agent.hpp"
#include "model/config.hpp"
#include "model/partition.hpp"

namespace bamboo {

class token_corpus;
class preemption_injector;
class transport_registry;

struct step_record {
  std::int64_t step = 0;
  double loss = 0;
  double seconds = 0;
  double samples_per_s = 0;
  std::uint64_t generation = 0;
  double lr = 0;
  double grad_norm = 0;
  // "" (nothing), "preempted+failover" (a node was preempted and its stage moved),
  // "failover" (lost otherwise: missed heartbeats, a crash), "degraded" (a stage
  // still has no shadow).
  std::string event;
  std::vector<schema::step_report> work; // each stage's report, by stage
};

struct failover_record {
  int node = 0;  // the lost node
  int stage = 0; // the stage it ran
  int heir = 0;  // the node that took the stage over
  std::int64_t step = 0;
  std::string cause;           // "preempted", "preemption notice", "actor down", ...
  double detect_s = 0;         // kill -> manager knew (when the kill time is known)
  double latency_s = 0;        // kill -> the step's completion
  int recomputed_forwards = 0; // lost stage's finished forwards redone by the heir
  int recomputed_backwards = 0;
  int inherited = 0;        // forwards the heir already had from FRC
  bool at_boundary = false; // handed off between steps (a preemption notice)
};

// Filled in by the manager before it answers train_atom.
struct run_result {
  std::vector<step_record> steps;
  std::vector<failover_record> failovers;
  std::vector<param_blob> parameters;      // owners' state, when asked for, by name
  std::vector<param_blob> shadow_state;    // live shadows' state, when asked for
  std::vector<double> heartbeat_max_gap_s; // per node
  std::vector<int> heartbeats;             // per node
};

struct manager_spec {
  train_config cfg;
  std::vector<stage_range> parts;
  std::shared_ptr<const token_corpus> corpus;
  std::shared_ptr<preemption_injector> injector; // may be null
  std::shared_ptr<transport_registry> transports;
  std::chrono::milliseconds heartbeat_period{200};
  int heartbeat_misses = 5;
  bool collect_parameters = false;
  std::function<void(const step_record&)> on_step; // called on the manager's thread
  std::shared_ptr<run_result> result;
  // Across processes: the nodes' actors stand for a worker's (default:
  // spawn_node), shadows sync through the transport, and the end of a
  // generation is announced to every process (called on the manager's thread).
  node_factory make_node;
  bool sync_through_transport = false;
  std::function<void(std::uint64_t generation, const std::string& reason)> end_generation;
  bool reshadow = true; // new shadows cloned in process (embedded mode only)
};

// A node's notice of its coming preemption (SIGTERM): at the next step
// boundary its stages move to their shadows, so nothing is recomputed.
using notice_atom = caf::atom_constant<caf::atom("notice")>;

// (train_atom) -> (done_atom) once all steps committed, or an error
// (errc::unrecoverable_failure when shadows cannot cover a loss).
// (notice_atom, node, deadline_ms): a preemption notice for the node.
caf::actor spawn_manager(caf::actor_system& sys, manager_spec spec);

} // namespace bamboo
