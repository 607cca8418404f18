// Test only: every control frame's fields as a tuple, so that values compare
// field by field (C++17 has no defaulted ==), and one frame of every body kind
// with every field set to a distinct value that is not its default: a field
// that the codec drops on either side shows as a difference.
#pragma once

#include <tuple>
#include <variant>
#include <vector>

#include "schema/codec.hpp"

namespace bamboo::schema {

inline auto fields(const actor_row& x) {
  return std::tie(x.kind, x.node, x.stage, x.state, x.doing, x.mailbox, x.age_ms);
}
inline bool operator==(const actor_row& a, const actor_row& b) {
  return fields(a) == fields(b);
}
inline auto fields(const heartbeat& x) {
  return std::tie(x.node, x.generation, x.step, x.time_ms, x.actors);
}
inline auto fields(const preemption_notice& x) {
  return std::tie(x.node, x.deadline_ms);
}
inline auto fields(const join_request& x) {
  return std::tie(x.node, x.zone, x.version, x.proof, x.model, x.model_digest);
}
inline auto fields(const stage_assignment& x) {
  return std::tie(x.pipeline, x.stage, x.node, x.shadow_node);
}
inline bool operator==(const stage_assignment& a, const stage_assignment& b) {
  return fields(a) == fields(b);
}
inline auto fields(const plan& x) {
  return std::tie(x.generation, x.pipelines, x.stages, x.assignments, x.redundancy,
                  x.global_batch, x.micro_batch, x.cursor, x.checkpoint);
}
inline auto fields(const step_report& x) {
  return std::tie(x.node, x.stage, x.generation, x.step, x.loss_sum, x.grad_squares,
                  x.forwards, x.backwards, x.frc, x.inherited, x.tensor_squares);
}
inline bool operator==(const step_report& a, const step_report& b) {
  return fields(a) == fields(b);
}
inline auto fields(const commit& x) {
  return std::tie(x.generation, x.step, x.clip_coef);
}
inline auto fields(const challenge_request& x) {
  return std::tie(x.node, x.nonce, x.identity);
}
inline auto fields(const join_challenge& x) {
  return std::tie(x.nonce, x.proof, x.identity);
}
inline auto fields(const join_accept& x) {
  return std::tie(x.node, x.generation, x.store_port, x.heartbeat_ms, x.heartbeat_misses);
}
inline auto fields(const join_refused& x) {
  return std::tie(x.reason);
}
inline auto fields(const frame_rejected& x) {
  return std::tie(x.reason);
}
inline auto fields(const train_settings& x) {
  return std::tie(x.model, x.layers, x.d_model, x.heads, x.seq_len, x.vocab, x.mlp_ratio,
                  x.dropout, x.lr, x.min_lr_ratio, x.warmup_steps, x.beta1, x.beta2,
                  x.eps, x.weight_decay, x.clip_norm, x.stages, x.micro_batch,
                  x.global_batch, x.steps, x.seed, x.data, x.threads, x.redundancy,
                  x.pipelines, x.model_digest);
}
inline bool operator==(const train_settings& a, const train_settings& b) {
  return fields(a) == fields(b);
}
inline auto fields(const assign& x) {
  return std::tie(x.node, x.stage, x.shadow_stage, x.generation, x.config, x.resume);
}
inline auto fields(const attach& x) {
  return std::tie(x.role, x.generation);
}
inline auto fields(const run_step& x) {
  return std::tie(x.generation, x.step);
}
inline auto fields(const progress_request& x) {
  return std::tie(x.generation, x.request);
}
inline auto fields(const progress_report& x) {
  return std::tie(x.request, x.stage, x.step, x.forwards, x.backwards, x.frc, x.complete,
                  x.report);
}
inline auto fields(const resume& x) {
  return std::tie(x.generation, x.step, x.resend_activations, x.resend_gradients,
                  x.delivered_activations, x.delivered_gradients, x.frc_enabled,
                  x.sum_source, x.sum_targets);
}
inline auto fields(const shadow_link& x) {
  return std::tie(x.present);
}
inline auto fields(const stage_done& x) {
  return std::tie(x.generation, x.step, x.stage);
}
inline auto fields(const step_failed& x) {
  return std::tie(x.generation, x.step, x.stage, x.reason);
}
inline auto fields(const generation_end& x) {
  return std::tie(x.generation, x.reason);
}
inline auto fields(const leave& x) {
  return std::tie(x.reason, x.stay);
}
inline auto fields(const tensor_digest& x) {
  return std::tie(x.name, x.count, x.digest);
}
inline bool operator==(const tensor_digest& a, const tensor_digest& b) {
  return fields(a) == fields(b);
}
inline auto fields(const state_request& x) {
  return std::tie(x.request);
}
inline auto fields(const state_report& x) {
  return std::tie(x.request, x.tensors);
}
inline auto fields(const state_copy& x) {
  return std::tie(x.generation, x.step, x.request);
}
inline auto fields(const state_copied& x) {
  return std::tie(x.request, x.digest, x.bytes, x.error);
}
inline auto fields(const checkpoint_request& x) {
  return std::tie(x.request, x.step, x.dir);
}
inline auto fields(const checkpoint_written& x) {
  return std::tie(x.request, x.file, x.sha256, x.bytes, x.tensors, x.error);
}
inline auto fields(const store_request& x) {
  return std::tie(x.request, x.op, x.keys, x.value, x.expected, x.delta, x.timeout_ms);
}
inline auto fields(const store_reply& x) {
  return std::tie(x.request, x.value, x.number, x.error);
}
inline auto fields(const observe_request& x) {
  return std::tie(x.proof, x.operator_proof);
}
inline auto fields(const snapshot_request& x) {
  return std::tie(x.request);
}
inline auto fields(const node_status& x) {
  return std::tie(x.node, x.zone, x.state, x.heartbeat_age_ms);
}
inline bool operator==(const node_status& a, const node_status& b) {
  return fields(a) == fields(b);
}
inline auto fields(const cluster_event& x) {
  return std::tie(x.time_ms, x.text);
}
inline bool operator==(const cluster_event& a, const cluster_event& b) {
  return fields(a) == fields(b);
}
inline auto fields(const cluster_snapshot& x) {
  return std::tie(x.request, x.model, x.generation, x.step, x.steps, x.loss,
                  x.samples_per_s, x.pipelines, x.stages, x.owners, x.shadows, x.nodes,
                  x.events, x.losses, x.uptime_ms, x.actors, x.paused, x.redundancy);
}
inline auto fields(const command& x) {
  return std::tie(x.request, x.words);
}
inline auto fields(const command_answer& x) {
  return std::tie(x.request, x.ok, x.text);
}
inline auto fields(const order& x) {
  return std::tie(x.kind, x.seconds, x.reason);
}

// Equal kinds and equal fields.
inline bool same_frame(const frame& a, const frame& b) {
  if (a.index() != b.index())
    return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        return fields(x) == fields(std::get<T>(b));
      },
      a);
}

inline train_settings sample_settings() {
  train_settings s;
  s.model = "bert";
  s.layers = 3;
  s.d_model = 48;
  s.heads = 6;
  s.seq_len = 24;
  s.vocab = 300;
  s.mlp_ratio = 5;
  s.dropout = 0.125;
  s.lr = 3e-4;
  s.min_lr_ratio = 0.2;
  s.warmup_steps = 7;
  s.beta1 = 0.85;
  s.beta2 = 0.975;
  s.eps = 1e-7;
  s.weight_decay = 0.05;
  s.clip_norm = 0.9;
  s.stages = 3;
  s.micro_batch = 2;
  s.global_batch = 12;
  s.steps = 33;
  s.seed = 0x1234567890ull;
  s.data = "/data/tokens.bin";
  s.threads = 2;
  s.redundancy = "eager";
  s.pipelines = 2;
  s.model_digest = "9f86d081";
  return s;
}

// One frame of every body kind, every field away from its default.
inline std::vector<frame> every_kind() {
  const step_report rep{1, 2, 3, 4, 5.25, 6.5, 7, 8, 9, 10, {0.25, 6.25}};
  plan p{11, 2, 3, {{0, 1, 2, 3}, {1, 2, 3, 4}}, "lazy", 16, 4, 320, "ckpt/step-9"};
  auto done = [](std::uint64_t g, std::uint64_t k, std::uint32_t s, auto tag) {
    decltype(tag) d;
    d.generation = g;
    d.step = k;
    d.stage = s;
    return d;
  };
  return {
      heartbeat{3, 2, 17, -123456, {{"stage", 3, 5, "active", "step 17 B2", 4, 30}}},
      preemption_notice{4, 30000},
      join_request{5, "zone-a", "0.1.0", {1, 2, 3}, "conv-classifier", "9f86d081"},
      p,
      rep,
      commit{12, 17, 0.75},
      challenge_request{13, {1, 2, 3}, "worker-node"},
      join_challenge{{9, 8, 7, 6}, {5, 4}, "manager-node"},
      join_accept{14, 15, 29500, 40, 3},
      join_refused{"wrong cluster token"},
      frame_rejected{"malformed: short"},
      assign{16, 1, 2, 17, sample_settings(), "/ckpt/step-00000005"},
      attach{"shadow", 46},
      run_step{18, 19},
      progress_request{20, 21},
      progress_report{22, 1, 23, {0, 1}, {0}, {1}, true, rep},
      resume{24, 25, {1}, {2, 3}, {4}, {5, 6}, true, 1, {0, 2}},
      shadow_link{true},
      done(26, 27, 2, committed{}),
      done(28, 29, 1, synced{}),
      step_failed{30, 31, 2, "timeout: no tensor"},
      generation_end{32, "node 3 lost"},
      leave{"fenced", true},
      done(33, 34, 1, sync_lost{}),
      done(35, 36, 2, resync{}),
      state_request{37},
      state_report{
          38, {{"layer1.weight", 1024, 0xdeadbeefcafef00dull}, {"stage0#steps", 1, 42}}},
      state_copy{39, 40, 41},
      state_copied{42, 0x0123456789abcdefull, 4096, "aborted: node 2 lost"},
      checkpoint_request{43, 44, "/ckpt/step-00000044"},
      checkpoint_written{45, "stage-1.safetensors", "ab12", 4096, 7, "disk full"},
      store_request{46, store_op::compare_set, {"bamboo/gen2/0"}, {1, 2}, {3}, -5, 250},
      store_reply{46, {9, 9}, 7, "timeout"},
      observe_request{{4, 5, 6}, {7, 8}},
      snapshot_request{47},
      cluster_snapshot{48,
                       "gpt",
                       3,
                       17,
                       40,
                       2.5,
                       812.5,
                       2,
                       2,
                       {0, 1, 2, 3},
                       {1, -1, 3, 2},
                       {{0, "a", "active", 12}, {4, "b", "lost", -1}},
                       {{1500, "node 4 lost in step 16"}},
                       {2.75, 2.5},
                       90000,
                       {{"manager", -1, -1, "paused", "before step 18", 2, 5},
                        {"shadow", 1, 0, "shadow", "idle", 0, 120}},
                       true,
                       "eager"},
      command{49, {"preempt", "2"}},
      command_answer{49, true, "node 2 preempted"},
      order{"notice", 30, "an operator's command"}};
}

} // namespace bamboo::schema
