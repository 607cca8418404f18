// Runs one stage's instructions for a step: forwards and backwards of its layers,
// receiving and sending activations and gradients through a tensor transport, and
// the optimizer update once the step commits. Knows no actor and no plan.
//
// A step is resumable: when the transport is aborted (a peer was lost), run()
// returns and keeps everything done so far; after the manager's re-plan, resend()
// replays the tensors a peer still needs and run() continues where it stopped.
// The same class holds a shadow replica: it applies the owner's gradients, runs
// forward redundant computation (FRC), and becomes the owner on promotion.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "model/partition.hpp"
#include "model/schedule.hpp"
#include "transport/tensor_transport.hpp"

namespace bamboo {

// What a stage has done in the current step.
struct step_progress {
  std::int64_t step = -1;
  std::set<int> forwards;  // forward computed (own, or inherited from FRC)
  std::set<int> backwards; // backward computed
  std::set<int> frc;       // FRC this stage ran for its successor
  std::set<int> inherited; // forwards present from FRC when promoted
  bool reduced = false;    // P > 1: the gradients are the sum over the pipelines
  bool complete = false;   // every instruction done (and the sum, with P > 1)
};

struct step_outcome {
  transport_status status; // not ok: interrupted (aborted) or failed
  bool killed = false;     // the preemption hook fired
  double loss_sum = 0;     // sum of micro-batch losses in order (last stage)
  double grad_squares = 0; // squared gradient norm of this stage's parameters
  std::vector<double> tensor_squares; // each parameter's, in layer order
};

// Called before compute instruction `index` of step k; true means "this node
// dies now" (the stage actor asks again, with index == ops.size(), at commit).
using kill_hook = std::function<bool(std::int64_t k, int index)>;

struct checkpoint;
class frc_worker;

class stage_executor {
public:
  // Stage `stage` of data-parallel pipeline `pipeline` (cfg.pipelines of them):
  // its micro-batches are the pipeline's share (numbered 0..Mp-1 in its schedule
  // and tags, by their global number for data and dropout), its peers the ranks
  // of the same pipeline, p*S+s.
  stage_executor(const train_config& cfg, int stage, stage_range range,
                 std::shared_ptr<const token_corpus> corpus, int pipeline = 0);
  ~stage_executor();

  int stage() const { return stage_; }
  int pipeline() const { return pipeline_; }
  // Its name in plans, reports and transport ranks: p*S+s.
  int coordinate() const { return rank_of(stage_); }
  int rank_of(int stage) const { return pipeline_ * cfg_.stages + stage; }
  bool is_first() const { return stage_ == 0; }
  bool is_last() const { return stage_ == cfg_.stages - 1; }

  // Runs (or continues) step k's ops. `replica`: the successor's shadow, for FRC.
  // With P > 1 pipelines, the stage's gradients are then summed with the same
  // stage of the others (sum_gradients) before the step is complete.
  step_outcome run(std::int64_t k, const std::vector<instruction>& ops,
                   tensor_transport& t, stage_executor* replica = nullptr,
                   const kill_hook& hook = {});
  // Sends again kept tensors a peer lost: activations to s+1, gradients to s-1.
  transport_status resend(const std::vector<int>& activations,
                          const std::vector<int>& gradients, tensor_transport& t);
  // Peers already hold these: do not send them again in this step.
  void set_delivered(std::int64_t k, const std::vector<int>& activations,
                     const std::vector<int>& gradients);
  // FRC on a replica: this stage's forward of micro-batch j of step k, its graph
  // kept so that a promotion needs only the backward. False: `stop` was set
  // and the forward given up (nothing kept).
  bool frc(std::int64_t k, int j, const at::Tensor& activation,
           const std::atomic<bool>* stop = nullptr);

  // Owner at commit: clips in place and returns the gradients (for the shadow,
  // which may apply them while the owner runs apply_update).
  std::vector<at::Tensor> clip_gradients(double clip_coef);
  void apply_update(std::int64_t k);
  // Shadow: the same update from the owner's (clipped) gradients.
  void apply_gradients(std::int64_t k, const std::vector<at::Tensor>& grads);
  // Steps whose update has been applied (== k+1 once step k committed here).
  std::int64_t updates() const { return opt_->steps_taken(); }

  const step_progress& progress() const { return progress_; }
  // Recovery with P > 1, when some pipeline of this stage already has step k's
  // gradient sum: those without it take it from pipeline `source` (which sends
  // it with send_sum) instead of summing again.
  void set_sum_source(std::int64_t k, int source);
  transport_status send_sum(const std::vector<int>& pipelines, tensor_transport& t);
  // Marks promotion: FRC'd forwards of step k count as inherited.
  void promote(std::int64_t k);
  // A new replica of this stage with this stage's exact state (between steps).
  std::shared_ptr<stage_executor> clone() const;
  // This stage's exact state from another's adamw::flat_state() at the
  // boundary of step `steps` (a new shadow across processes).
  bool load_state(const at::Tensor& flat, std::int64_t steps);
  // This stage's layers from a checkpoint (any depth wrote it); "" or the error.
  std::string load_checkpoint(const checkpoint& c);

  // Parameters named by global layer path ("layers.3.attn.qkv.weight").
  const std::vector<named_tensor>& parameters() const { return opt_->params(); }
  const adamw& optimizer() const { return *opt_; }

private:
  struct in_flight {
    at::Tensor input;  // leaf that receives the input gradient (undefined on stage 0)
    at::Tensor output; // activation sent on, or the loss on the last stage
  };
  void begin_step(std::int64_t k);
  step_outcome run_ops(std::int64_t k, const std::vector<instruction>& ops,
                       tensor_transport& t, stage_executor* replica,
                       const kill_hook& hook);
  transport_status forward(std::int64_t k, int j, tensor_transport& t);
  transport_status backward(std::int64_t k, int j, tensor_transport& t);
  // Undefined if `stop` was set before the last layer ran.
  at::Tensor run_layers(std::int64_t k, int j, at::Tensor x,
                        const std::atomic<bool>* stop = nullptr);
  at::Tensor recv_buffer(const tensor_transport& t, int layer) const;
  micro_batch batch(std::int64_t k, int j);
  transport_status sum_gradients(std::int64_t k, tensor_transport& t);
  void queue_frc(std::int64_t k, int j, stage_executor* replica);
  // Waits for the FRC thread (finish: its queue too) and records what ran;
  // "" or the error of a task that threw.
  std::string settle_frc(bool finish);
  int rank_of_pipeline(int p) const { return p * cfg_.stages + stage_; }
  int global_micro_batch(int j) const {
    return pipeline_ * cfg_.pipeline_micro_batches() + j;
  }

  train_config cfg_;
  int stage_;
  int pipeline_;
  stage_range range_;
  std::shared_ptr<const token_corpus> corpus_; // the built-in models' data
  std::shared_ptr<const model_definition> model_;
  sample_order order_;
  std::vector<layer_ptr> layers_;
  std::unique_ptr<adamw> opt_;

  // Per-step state, kept until the next step begins (lazy redundancy: a
  // promoted successor or predecessor may need the tensors again).
  step_progress progress_;
  std::size_t next_op_ = 0;
  std::map<int, in_flight> pending_;
  std::map<int, at::Tensor> sent_act_, sent_grad_;
  std::map<int, double> losses_;
  std::set<int> delivered_act_, delivered_grad_;
  std::set<int> frc_queued_; // eager: FRC handed to the FRC thread in this step
  at::Tensor local_grads_;   // P > 1: this pipeline's packed gradients of the step
  at::Tensor sum_;           // P > 1: the packed sum over the pipelines, once known
  int sum_source_ = -1;      // -1: the sum is made (by pipeline 0); else taken
  std::unique_ptr<frc_worker> frc_; // eager: FRC off this stage's thread
  std::mutex frc_mu_;               // replica: FRC from two threads (frc())
};

// A stage's gradients as one flat tensor (what an owner sends its shadow across
// processes, and what the pipelines of one stage sum): a defined-mask, then
// every gradient, zeros where undefined. Summed packs unpack as the sum, a
// gradient defined where any pipeline had it.
at::Tensor pack_gradients(const stage_executor& ex, const std::vector<at::Tensor>& grads);
std::vector<at::Tensor> unpack_gradients(const stage_executor& ex,
                                         const at::Tensor& flat);
// The length of a packed tensor of ex's gradients.
long packed_size(const stage_executor& ex);

} // namespace bamboo
