// The state of a stage actor and of a shadow (actors/stage_actor.hpp), one
// job per file: its behaviors (stage_actor.cpp), running a step and failing
// over (stage_step.cpp), and the shadow's synchronisation, state copies and
// commits (stage_sync.cpp). Included by those files only.
#pragma once

#include "actors/stage_actor.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <caf/all.hpp>
#include <chrono>

#include "actors/actor_board.hpp"
#include "actors/errors.hpp"
#include "actors/plan/preemption.hpp"
#include "actors/shadow_state.hpp"
#include "actors/shard_writer.hpp"
#include "log/log.hpp"
#include "model/allocator.hpp"
#include "model/checkpoint.hpp"
#include "model/schedule.hpp"
#include "model/stage_executor.hpp"
#include "transport/transport_registry.hpp"

// Weak so that we link with or without OpenBLAS; it keeps its own thread pool,
// which must not oversubscribe the cores the stages already use.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace bamboo {

struct gradient_list {
  std::vector<at::Tensor> grads;
};

inline std::vector<int> to_vector(const std::set<int>& s) {
  return {s.begin(), s.end()};
}

inline state_copy copy_of(const at::Tensor& flat) {
  auto c = flat.contiguous();
  const auto bytes = static_cast<std::size_t>(c.numel()) * c.element_size();
  return {fnv1a_words(c.data_ptr(), bytes), bytes};
}

struct stage_state {
  static inline const char* name = "bamboo.stage";

  explicit stage_state(stage_actor::pointer self) : self_(self) {}

  void init(stage_actor_spec spec, caf::actor supervisor, const char* kind);

  // What bamboo-inspect shows of this actor (its own mailbox: only it may look).
  void say(const char* state, const std::string& doing);
  static std::string step_words(std::int64_t k, const char* what);

  stage_actor::behavior_type active();

  stage_actor::behavior_type shadow();

private:
  // Named by the stage, whichever pipeline runs it (the pipelines hold the same).
  std::vector<param_blob> blobs() const;
  // This stage's file of the checkpoint of step k, written off this thread.
  caf::result<checkpoint_shard> write_checkpoint(const std::string& step_dir,
                                                 std::int64_t k);

  void prepare_thread();

  // Preemption: the whole node goes, this actor last.
  void die(std::int64_t k, int index);

  void fail(std::int64_t k, const std::string& why);

  // This stage's endpoint of the current generation's group (a shadow uses
  // the endpoint of its node's stage, the predecessor's rank).
  bool connect(std::int64_t k) { return connect(k, stage_); }
  bool connect(std::int64_t k, int rank);
  bool join(int rank, std::string& error);

  // Owner, at the boundary of step k: its exact state to the rank before its
  // own, where a new shadow waits for it (re-homing across processes).
  caf::result<state_copy> send_state(std::uint64_t gen, std::int64_t k);

  // A new shadow: its owner's state of the boundary of step k, loaded; the
  // digest is of what it holds now, so the manager checks the whole path.
  caf::result<state_copy> load_state(std::uint64_t gen, std::int64_t k);

  void run_step(std::int64_t k);

  schema::step_report make_report(std::int64_t k, const step_outcome& out) const;

  stage_progress progress() const;

  void resume(const resume_order& o);

  void commit(const schema::commit& c);

  // The rank of the node holding this stage's replica: (p, s-1 mod S).
  int predecessor() const;

  // Owner: step k's gradients to the node holding the replica (rank s-1).
  void send_sync(std::int64_t k, const at::Tensor& flat);

  // Shadow: the owner's gradients of step k, then the same update.
  void receive_sync(const schema::commit& c);

  stage_actor::pointer self_;
  stage_actor_spec spec_;
  caf::actor supervisor_;
  bool has_shadow_ = false;
  stage_actor shadow_; // in-process shadows only
  std::shared_ptr<tensor_transport> transport_;
  std::shared_ptr<spdlog::logger> logger_;
  std::vector<instruction> ops_;
  int stage_ = 0;
  std::uint64_t gen_ = 1;
  bool thread_ready_ = false;
  bool frc_enabled_ = false;
  schema::step_report last_;
  actor_board::entry row_; // leaves the board with this state
  at::Tensor last_sync_;   // the gradients last sent to the shadow (re-sent on demand)
};

} // namespace bamboo
