// What a run reports, as plain values: each step, each failover and why it
// happened, the final state when asked for. Filled in by the manager, read by
// the apps, the tests and custom trainers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schema/codec.hpp"

namespace bamboo {

// Why a node was lost, as the manager learns it.
enum class failover_cause : std::uint8_t {
  preempted,         // killed (an injected preemption)
  preemption_notice, // handed off at a step boundary after a notice (SIGTERM)
  actor_down,        // an actor of the node ended otherwise (a crash)
  connection_lost,   // the node's process dropped its connection (kill -9, a crash)
  missed_heartbeats, // silent for too long (a hang, a partition, SIGSTOP)
};

// "preempted", "preemption notice", "actor down", "connection lost", "missed heartbeats".
const char* to_string(failover_cause c);
// A preemption the node was told of or that killed it (the event column's
// "preempted+failover"), as opposed to any other loss.
bool is_preemption(failover_cause c);

// A tensor's values (parameters, optimizer moments), for bit-for-bit comparisons.
struct param_blob {
  std::string name;
  std::vector<float> values;
};

// A blob's digest (FNV-1a 64 of its float32 bytes) and element count: what a
// worker process reports of its state, so runs compare bit for bit across
// processes without moving the tensors.
schema::tensor_digest digest_of(const param_blob& b);
// FNV-1a 64 of `size` bytes.
std::uint64_t fnv1a(const void* data, std::size_t size);
// FNV-1a 64 taking 8-byte words (then the tail bytes): about 8x faster, for
// checking large copies (a re-homed shadow's state), not for --state-digests.
std::uint64_t fnv1a_words(const void* data, std::size_t size);
std::vector<schema::tensor_digest> digests_of(const std::vector<param_blob>& blobs);

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
  // still has no shadow: "degraded: stage 1 unprotected; node 0 runs stages 0 1").
  std::string event;
  // The plan the step committed under: the node of each stage and of its
  // shadow (-1: none), for the exactly-once ledger.
  std::vector<int> owners, shadows;
  std::vector<schema::step_report> work; // each stage's report, by stage
};

struct failover_record {
  int node = 0;  // the lost node
  int stage = 0; // the stage it ran
  int heir = 0;  // the node that took the stage over
  std::int64_t step = 0;
  failover_cause cause = failover_cause::actor_down;
  std::string detail; // how, in words (an exit reason), may be empty
  // The kill (or the last heartbeat of a node that fell silent) -> the manager
  // knew; -1 when nobody here knows when the node went (a worker process killed
  // from outside: its latency counts from the detection).
  double detect_s = 0;
  double latency_s = 0;        // kill -> the step's completion
  int recomputed_forwards = 0; // lost stage's finished forwards redone by the heir
  int recomputed_backwards = 0;
  int inherited = 0;        // forwards the heir already had from FRC
  bool at_boundary = false; // handed off between steps (a preemption notice)
};

// "connection lost (remote_link_unreachable)": the cause and its detail.
std::string describe(const failover_record& f);

// Filled in by the manager before it answers train_atom.
struct run_result {
  std::vector<step_record> steps;
  std::vector<failover_record> failovers;
  std::vector<param_blob> parameters;   // owners' state, when asked for, by name
  std::vector<param_blob> shadow_state; // live shadows' state, when asked for
  // Digests of the same, by name, when asked for (in every mode, processes too).
  std::vector<schema::tensor_digest> digests, shadow_digests;
  std::vector<double> heartbeat_max_gap_s; // per node
  std::vector<int> heartbeats;             // per node
  std::uint64_t generation = 0;            // the last one of the run
  std::vector<int> alive;                  // the nodes alive at the end
  // Rollbacks to a checkpoint, for losses shadows could not cover, and the
  // nodes lost in those losses (survived too, by the rollback).
  int rollbacks = 0;
  int rollback_losses = 0;
  // Checkpoints not written: "step 4: ...: No space left on device".
  std::vector<std::string> checkpoint_failures;
  // The plan ended before this step for a new one (-1: it did not), and why.
  std::int64_t replanned_at = -1;
  std::string replan_reason;
  int replans = 0; // of the whole run
  // A stop signal ended the run before its last step (its number; 0: none):
  // `steps` ends at the last committed step, and `stopped_abandoned` says the
  // step in flight then did not finish in time (no checkpoint of the boundary).
  int stopped_by = 0;
  bool stopped_abandoned = false;
};

// A run of several plans (each rollback starts one): the records of the plan
// that just ended join the run's.
void add_plan(run_result& run, run_result& plan);
// A rollback to `to_step` after `lost` nodes went: the steps from there on are undone.
void roll_back(run_result& run, std::int64_t to_step, int lost);
// The last plan's result (its final state) with the whole run's records.
run_result finish_run(run_result&& run, run_result&& last);

} // namespace bamboo
