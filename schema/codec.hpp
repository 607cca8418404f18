// Control frames as plain C++ values, and their Cap'n Proto wire encoding.
// This header is the only view of the wire format the rest of bamboo has; the
// generated capnp code stays inside codec.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace bamboo::schema {

inline constexpr std::uint16_t major_version = 1;
inline constexpr std::uint16_t minor_version = 10;
// Control frames are small; anything bigger is hostile or a bug.
inline constexpr std::size_t default_frame_limit = 1 << 20;

// One actor as bamboo-inspect lists it (see ActorRow in control.capnp).
struct actor_row {
  std::string kind;
  std::int32_t node = -1, stage = -1;
  std::string state, doing;
  std::uint32_t mailbox = 0;
  std::int64_t age_ms = 0;
};

struct heartbeat {
  std::uint32_t node = 0;
  std::uint64_t generation = 0;
  std::uint64_t step = 0;
  std::int64_t time_ms = 0;
  std::vector<actor_row> actors; // a worker's actors (1.9)
};

struct preemption_notice {
  std::uint32_t node = 0;
  std::int64_t deadline_ms = 0;
};

struct join_request {
  std::uint32_t node = 0;
  std::string zone;
  std::string version;
  std::vector<std::uint8_t> proof;
  std::string model, model_digest; // 1.8: a trainer's own model ("": built-ins)
};

struct stage_assignment {
  std::uint32_t pipeline = 0;
  std::uint32_t stage = 0;
  std::uint32_t node = 0;
  std::uint32_t shadow_node = 0;
};

struct plan {
  std::uint64_t generation = 0;
  std::uint32_t pipelines = 0;
  std::uint32_t stages = 0;
  std::vector<stage_assignment> assignments;
  std::string redundancy;
  std::uint32_t global_batch = 0;
  std::uint32_t micro_batch = 0;
  std::uint64_t cursor = 0;
  std::string checkpoint;
};

struct step_report {
  std::uint32_t node = 0;
  std::uint32_t stage = 0;
  std::uint64_t generation = 0;
  std::uint64_t step = 0;
  double loss_sum = 0;
  double grad_squares = 0;
  std::uint32_t forwards = 0;
  std::uint32_t backwards = 0;
  std::uint32_t frc = 0;
  std::uint32_t inherited = 0;
  // 1.10: each parameter tensor's squared gradient norm, in global layer order:
  // the manager sums them one by one in that order, so that the global norm
  // (and the clip) is the same to the bit whatever the stages' boundaries.
  std::vector<double> tensor_squares;
};

struct commit {
  std::uint64_t generation = 0;
  std::uint64_t step = 0;
  double clip_coef = 1.0;
};

struct challenge_request {
  std::uint32_t node = 0xffffffffu;
  std::vector<std::uint8_t> nonce; // 1.6
  std::string identity;            // 1.6
};

struct join_challenge {
  std::vector<std::uint8_t> nonce;
  std::vector<std::uint8_t> proof; // 1.6
  std::string identity;            // 1.6
};

struct join_accept {
  std::uint32_t node = 0;
  std::uint64_t generation = 0;
  std::uint16_t store_port = 0;
  std::uint32_t heartbeat_ms = 0; // 0: the worker's own setting
  // 1.5: the manager's heartbeats come at heartbeat_ms too; this many periods
  // without one and the worker takes the manager for lost (0: it does not).
  std::uint32_t heartbeat_misses = 0;
};

struct join_refused {
  std::string reason;
};

struct frame_rejected {
  std::string reason;
};

// --- training across processes (1.2) ---------------------------------------

struct train_settings {
  std::string model = "gpt";
  std::uint32_t layers = 0, d_model = 0, heads = 0, seq_len = 0, vocab = 0, mlp_ratio = 0;
  double dropout = 0;
  double lr = 0, min_lr_ratio = 0;
  std::uint32_t warmup_steps = 0;
  double beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, clip_norm = 0;
  std::uint32_t stages = 0, micro_batch = 0, global_batch = 0, steps = 0;
  std::uint64_t seed = 0;
  std::string data;
  std::uint32_t threads = 1;
  std::string redundancy;
  std::uint32_t pipelines = 1; // 1.7
  std::string model_digest;    // 1.8: of a trainer's own model (named by model)
};

struct assign {
  std::uint32_t node = 0;
  std::uint32_t stage = 0;
  std::int32_t shadow_stage = -1;
  std::uint64_t generation = 0;
  train_settings config;
  std::string resume; // 1.5: a checkpoint's step directory to start from
};

struct attach {
  std::string role;
  std::uint64_t generation = 0; // 1.5: of the plan it belongs to
};

struct run_step {
  std::uint64_t generation = 0;
  std::uint64_t step = 0;
};

struct progress_request {
  std::uint64_t generation = 0;
  std::uint64_t request = 0;
};

struct progress_report {
  std::uint64_t request = 0;
  std::uint32_t stage = 0;
  std::int64_t step = 0;
  std::vector<std::uint32_t> forwards, backwards, frc;
  bool complete = false;
  step_report report;
};

struct resume {
  std::uint64_t generation = 0;
  std::uint64_t step = 0;
  std::vector<std::uint32_t> resend_activations, resend_gradients;
  std::vector<std::uint32_t> delivered_activations, delivered_gradients;
  bool frc_enabled = false;
  std::int32_t sum_source = -1;           // 1.7
  std::vector<std::uint32_t> sum_targets; // 1.7
};

struct shadow_link {
  bool present = false;
};

struct stage_done {
  std::uint64_t generation = 0;
  std::uint64_t step = 0;
  std::uint32_t stage = 0;
};
struct committed : stage_done {};
struct synced : stage_done {};
struct sync_lost : stage_done {}; // a shadow did not get the owner's gradients
struct resync : stage_done {};    // the owner sends them again

struct step_failed {
  std::uint64_t generation = 0;
  std::uint64_t step = 0;
  std::uint32_t stage = 0;
  std::string reason;
};

struct generation_end {
  std::uint64_t generation = 0;
  std::string reason;
};

struct leave {
  std::string reason;
  bool stay = false; // 1.5: keep the membership, wait for a new assignment
};

// 1.3: digests of a stage's state, by tensor name.
struct tensor_digest {
  std::string name;
  std::uint64_t count = 0;
  std::uint64_t digest = 0;
};

struct state_request {
  std::uint64_t request = 0;
};

struct state_report {
  std::uint64_t request = 0;
  std::vector<tensor_digest> tensors;
};

// 1.4: an owner's state copied to a new replica in another process.
struct state_copy {
  std::uint64_t generation = 0;
  std::uint64_t step = 0;
  std::uint64_t request = 0;
};

struct state_copied {
  std::uint64_t request = 0;
  std::uint64_t digest = 0;
  std::uint64_t bytes = 0;
  std::string error; // empty when copied
};

// 1.5: an owner writes its checkpoint file.
struct checkpoint_request {
  std::uint64_t request = 0;
  std::uint64_t step = 0;
  std::string dir;
};

struct checkpoint_written {
  std::uint64_t request = 0;
  std::string file, sha256;
  std::uint64_t bytes = 0, tensors = 0;
  std::string error; // empty when written
};

// The rendezvous store's operations (c10d::Store's).
enum class store_op : std::uint8_t {
  set = 0,
  get = 1,
  add = 2,
  compare_set = 3,
  remove = 4,
  check = 5,
  num_keys = 6,
  wait = 7,
};
inline constexpr std::uint8_t store_op_count = 8;

struct store_request {
  std::uint64_t request = 0;
  store_op op = store_op::get;
  std::vector<std::string> keys;
  std::vector<std::uint8_t> value, expected;
  std::int64_t delta = 0;
  std::uint32_t timeout_ms = 0;
};

struct store_reply {
  std::uint64_t request = 0;
  std::vector<std::uint8_t> value;
  std::int64_t number = 0;
  std::string error; // empty on success
};

// The inspector's frames (1.8).
struct observe_request {
  std::vector<std::uint8_t> proof;
  std::vector<std::uint8_t>
      operator_proof; // 1.10: empty for an observer that only watches
};

struct snapshot_request {
  std::uint64_t request = 0;
};

struct node_status {
  std::uint32_t node = 0;
  std::string zone, state;
  std::int64_t heartbeat_age_ms = -1;
};

struct cluster_event {
  std::int64_t time_ms = 0;
  std::string text;
};

struct cluster_snapshot {
  std::uint64_t request = 0;
  std::string model;
  std::uint64_t generation = 0;
  std::int64_t step = -1, steps = 0;
  double loss = 0, samples_per_s = 0;
  std::uint32_t pipelines = 0, stages = 0;
  std::vector<std::int32_t> owners, shadows;
  std::vector<node_status> nodes;
  std::vector<cluster_event> events;
  std::vector<double> losses;
  std::int64_t uptime_ms = 0;
  std::vector<actor_row> actors; // 1.9
  bool paused = false;
  std::string redundancy;
};

struct command {
  std::uint64_t request = 0;
  std::vector<std::string> words;
};

struct command_answer {
  std::uint64_t request = 0;
  bool ok = false;
  std::string text;
};

struct order {
  std::string kind; // "preempt" or "notice"
  double seconds = 0;
  std::string reason;
};

using frame =
    std::variant<heartbeat, preemption_notice, join_request, plan, step_report, commit,
                 challenge_request, join_challenge, join_accept, join_refused,
                 frame_rejected, assign, attach, run_step, progress_request,
                 progress_report, resume, shadow_link, committed, synced, step_failed,
                 generation_end, leave, sync_lost, resync, state_request, state_report,
                 state_copy, state_copied, checkpoint_request, checkpoint_written,
                 store_request, store_reply, observe_request, snapshot_request,
                 cluster_snapshot, command, command_answer, order>;

// The actor a frame is for, among those one process stands for (1.2): its
// stage, the replica it was assigned, or (1.4) a replica of stage s added
// after a failover, numbered 3 + s.
enum class target : std::uint32_t { none = 0, stage = 1, shadow = 2 };
inline constexpr std::uint32_t first_added_replica = 3;
inline target added_replica(int stage) {
  return static_cast<target>(first_added_replica + static_cast<std::uint32_t>(stage));
}
// The stage of an added replica's target; -1 for the others.
inline int added_replica_stage(target t) {
  const auto v = static_cast<std::uint32_t>(t);
  return v >= first_added_replica ? static_cast<int>(v - first_added_replica) : -1;
}

enum class codec_errc {
  none,
  too_large,     // over the frame size limit
  malformed,     // not a valid Cap'n Proto message
  unknown_major, // written by an incompatible major version
  unknown_body,  // a body kind this reader does not know (newer minor)
};

const char* to_string(codec_errc e);

struct decoded {
  codec_errc error = codec_errc::none;
  std::string detail; // human-readable reason when error != none
  frame value;
  schema::target target = schema::target::none;
  explicit operator bool() const { return error == codec_errc::none; }
};

std::vector<std::uint8_t> encode(const frame& f, target to = target::none);
decoded decode(const std::uint8_t* data, std::size_t size,
               std::size_t limit = default_frame_limit);
inline decoded decode(const std::vector<std::uint8_t>& bytes,
                      std::size_t limit = default_frame_limit) {
  return decode(bytes.data(), bytes.size(), limit);
}

} // namespace bamboo::schema
