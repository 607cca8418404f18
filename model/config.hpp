// Model and training configuration: plain values, validated in one place so that
// every front end (CLI, custom trainers, tests) rejects bad input the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace bamboo {

enum class model_kind { gpt, bert };

const char* to_string(model_kind k);

// How stages are protected: off (no shadows), lazy (shadows in sync, lost work
// recomputed on failover), eager (lazy plus forward redundant computation).
enum class redundancy_mode { off, lazy, eager };

const char* to_string(redundancy_mode m);

struct model_config {
  model_kind kind = model_kind::gpt;
  int layers = 4; // transformer blocks
  int d_model = 128;
  int heads = 4;
  int seq_len = 64;
  int vocab = 256; // token ids in [0, vocab); BERT adds one [MASK] id
  int mlp_ratio = 4;
  double dropout = 0.1;

  // Pipeline layers: embedding, the blocks, the head.
  int pipeline_layers() const { return layers + 2; }
  // Size of the embedding table / the head's output.
  int input_vocab() const { return kind == model_kind::bert ? vocab + 1 : vocab; }
  int mask_token() const { return vocab; }
};

struct optimizer_config {
  double lr = 3e-3;
  double min_lr_ratio = 0.1; // cosine decays to lr * min_lr_ratio
  int warmup_steps = 5;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double clip_norm = 1.0; // global-norm clipping; 0 disables it
};

class model_definition;

struct train_config {
  model_config model; // the built-in model (GPT or BERT), unless custom_model
  // A trainer's own model (model/model_definition.hpp); null: model's.
  std::shared_ptr<const model_definition> custom_model;
  optimizer_config optim;
  int stages = 1;    // per pipeline
  int pipelines = 1; // data-parallel pipelines; each takes M / P micro-batches
  int micro_batch = 4;
  int global_batch = 16;
  int steps = 30;
  std::uint64_t seed = 1;
  std::string data = "synthetic";
  int threads = 1; // intra-op threads per stage
  redundancy_mode redundancy = redundancy_mode::lazy;

  int micro_batches() const { return global_batch / micro_batch; }
  // Pipeline layers of the run's model (custom or built-in); defined with the
  // model interface (model_definition.cpp), which this torch-free header only names.
  int model_layers() const;
  // A pipeline's share: pipeline p runs global micro-batches [p*Mp, (p+1)*Mp).
  int pipeline_micro_batches() const { return micro_batches() / pipelines; }
  // Stage (pipeline) p*S+s runs: the "coordinate" that names it in plans,
  // reports and transport ranks (== the stage when there is one pipeline).
  int coordinates() const { return pipelines * stages; }
};

// Micro-batches a step may have: they are numbered in 10 bits of a tensor's tag
// (transport/tensor_transport.hpp).
inline constexpr int max_micro_batches = 1024;

// The first problem found, as one line for the user; nullopt when valid.
std::optional<std::string> validate(const train_config& cfg);

} // namespace bamboo
