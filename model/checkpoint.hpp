// Checkpoints: a directory per checkpoint, DIR/step-00000006/, holding
// state.safetensors (every parameter and both AdamW moments, named by global
// layer path: "layers.3.attn.qkv.weight", "...#exp_avg", "...#exp_avg_sq", so
// any pipeline depth loads them) and manifest.json (step, configuration, seed,
// global batch, and the SHA-256 and size of the state file), written last: a
// checkpoint without a manifest, or whose file does not match it, is not
// complete. A background writer takes snapshots off the training path.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/config.hpp"

namespace bamboo {

struct checkpoint {
  std::int64_t step = 0; // the next step to run: steps [0, step) are in it
  std::string config;    // checkpoint_config() of the run that wrote it
  std::map<std::string, std::vector<float>> tensors;
};

// What a checkpoint must share with the run that resumes it (the model, the
// seed and the global batch: the sample order and every random draw).
std::string checkpoint_config(const train_config& cfg);

// Writes the checkpoint (the manifest last), then removes all but the newest
// `keep` complete ones (keep <= 0: none removed). False and `error` on failure;
// earlier checkpoints are never touched by a failed write.
bool write_checkpoint(const std::string& dir, const checkpoint& c, int keep,
                      std::string& error);

// The newest complete, intact checkpoint in `dir`; each damaged or incomplete
// one passed over gets a line in `skipped`. nullopt and `error` when none is.
std::optional<checkpoint> load_latest_checkpoint(const std::string& dir,
                                                 std::vector<std::string>& skipped,
                                                 std::string& error);

// One background thread writing submitted checkpoints in order.
class checkpoint_writer {
public:
  checkpoint_writer(std::string dir, int keep);
  ~checkpoint_writer();
  checkpoint_writer(const checkpoint_writer&) = delete;
  checkpoint_writer& operator=(const checkpoint_writer&) = delete;

  void submit(checkpoint c);
  // Waits until every submitted checkpoint is written; returns the failures.
  std::vector<std::string> finish();

private:
  void run();
  std::string dir_;
  int keep_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<checkpoint> queue_;
  bool busy_ = false, stop_ = false;
  std::vector<std::string> failures_;
  std::thread thread_;
};

} // namespace bamboo
