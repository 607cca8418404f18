// Checkpoints: a directory per checkpoint, DIR/step-00000006/, holding one
// safetensors file per stage that wrote it (stage-2.safetensors: its
// parameters and both AdamW moments, named by global layer path:
// "layers.3.attn.qkv.weight", "...#exp_avg", "...#exp_avg_sq", so any pipeline
// depth loads the union) and manifest.json (step, data cursor, seed,
// configuration, generation and plan of the run that wrote it, and the SHA-256
// and size of every file), written last: a checkpoint without a manifest, or
// whose files do not match it, is not complete. Each stage writes its own file
// off the training path (in its own process across processes); the manager
// writes the manifest once every file is there.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/checkpoint_types.hpp"
#include "model/config.hpp"

namespace bamboo {

struct checkpoint {
  std::int64_t step = 0; // the next step to run: steps [0, step) are in it
  std::string config;    // checkpoint_config() of the run that wrote it
  std::map<std::string, std::vector<float>> tensors;
};

// What the manifest records besides the files.
struct checkpoint_manifest {
  std::int64_t step = 0;
  std::string config;
  std::uint64_t seed = 0;
  std::int64_t cursor = 0; // samples consumed: step * global batch
  std::uint64_t generation = 0;
  std::string plan; // owner node of each stage, for the record (resume ignores it)
  std::vector<checkpoint_shard> files;
  // HMAC-SHA256 (hex) of all of the above under the checkpoint key, "" when the
  // run keys none (checkpoint_manifest.hpp).
  std::string mac;
};

// DIR/step-00000006
std::string checkpoint_step_dir(const std::string& dir, std::int64_t step);

// Writes `tensors` atomically as `file` in `step_dir` (created if missing).
std::optional<checkpoint_shard> write_checkpoint_shard(
    const std::string& step_dir, const std::string& file, std::int64_t step,
    const std::map<std::string, std::vector<float>>& tensors, std::string& error);

// Writes the manifest of step m.step (its files already written) and removes
// all but the newest `keep` complete checkpoints (keep <= 0: none removed).
bool write_checkpoint_manifest(const std::string& dir, const checkpoint_manifest& m,
                               int keep, std::string& error);

// One directory DIR/step-N checked against its manifest, every file merged.
std::optional<checkpoint> load_checkpoint_dir(const std::string& path,
                                              std::string& error);

// Whether `dir` holds a checkpoint with a manifest (not checked further).
bool has_complete_checkpoint(const std::string& dir);

// How many step directories `dir` holds, complete or not (0 when `dir` is missing).
std::size_t checkpoint_dirs(const std::string& dir);

// What a checkpoint must share with the run that resumes it (the model, the
// seed and the global batch: the sample order and every random draw).
std::string checkpoint_config(const train_config& cfg);

// Writes the checkpoint as one file (the manifest last), then removes all but the newest
// `keep` complete ones (keep <= 0: none removed). False and `error` on failure;
// earlier checkpoints are never touched by a failed write.
bool write_checkpoint(const std::string& dir, const checkpoint& c, int keep,
                      std::string& error);

// The newest complete, intact checkpoint in `dir`; each damaged or incomplete
// one passed over gets a line in `skipped`. nullopt and `error` when none is.
// `incomplete` (may be unset) names what a checkpoint that loads lacks for
// this run (a stage's tensors): it is passed over too.
std::optional<checkpoint> load_latest_checkpoint(
    const std::string& dir, std::vector<std::string>& skipped, std::string& error,
    const std::function<std::string(const checkpoint&)>& incomplete = {});

// Lowers the calling thread's priority (nice 10), so that a checkpoint writer
// yields to the training threads but still finishes within a few steps. Not
// the idle class (SCHED_IDLE): on busy cores it starves a writer for many
// steps, and a node that dies takes its unfinished shard with it, leaving a
// rollback without a recent checkpoint. False where the system refuses.
inline constexpr int checkpoint_writer_nice = 10;
bool lower_writer_priority();

// CPU seconds the calling thread has used (user and system).
double thread_cpu_seconds();

// CPU seconds spent writing checkpoints in this process so far (shard files
// and manifests, counted by add_checkpoint_cpu): what checkpoints would take
// from training if no core were ever idle.
double checkpoint_cpu_seconds();
void add_checkpoint_cpu(double seconds);

// Wall seconds the stages spent taking checkpoint snapshots (copying their
// state to memory between steps, on the training thread: the part of a
// checkpoint that training waits for), counted by add_checkpoint_snapshot.
double checkpoint_snapshot_seconds();
void add_checkpoint_snapshot(double seconds);

// One background thread writing submitted manifests in order (their stages
// wrote the files).
class checkpoint_writer {
public:
  checkpoint_writer(std::string dir, int keep);
  ~checkpoint_writer();
  checkpoint_writer(const checkpoint_writer&) = delete;
  checkpoint_writer& operator=(const checkpoint_writer&) = delete;

  const std::string& dir() const { return dir_; }
  void submit(checkpoint_manifest m);
  // A checkpoint that will not be complete (a stage could not write its file).
  void failed(std::int64_t step, const std::string& why);
  // Waits until every submitted manifest is written; returns the failures.
  std::vector<std::string> finish();
  // Called on the writer's thread with each checkpoint whose manifest is on
  // disk (its step and step directory); set before the first submit.
  void on_written(std::function<void(std::int64_t step, const std::string& dir)> f) {
    on_written_ = std::move(f);
  }

private:
  void run();
  std::string dir_;
  int keep_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<checkpoint_manifest> queue_;
  bool busy_ = false, stop_ = false;
  std::vector<std::string> failures_;
  std::function<void(std::int64_t, const std::string&)> on_written_;
  std::thread thread_;
};

} // namespace bamboo
