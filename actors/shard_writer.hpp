// A stage's checkpoint file written on a thread of its own, so that the stage
// trains on while the bytes go to disk: the stage copies its state at the step
// boundary (its mailbox orders the copy before the next step) and hands the
// copy to a detached writer, which answers with the file's digest and quits.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/protocol.hpp"

namespace bamboo {

// What the writer writes: the stage's state as of the boundary before `step`.
struct shard_snapshot {
  std::string step_dir, file;
  std::int64_t step = 0;
  std::map<std::string, std::vector<float>> tensors;
};

// The file's name for a stage: stage-2.safetensors.
std::string shard_file(int stage);

// The state of `blobs` a checkpoint keeps (the step counters are the manifest's).
shard_snapshot make_snapshot(std::vector<param_blob> blobs, const std::string& step_dir,
                             int stage, std::int64_t step);

// Writes the snapshot on a new detached actor and delivers its shard (or a
// checkpoint_failed error) to `rp`.
void write_shard(stage_actor::pointer self, shard_snapshot snap,
                 caf::typed_response_promise<checkpoint_shard> rp);

} // namespace bamboo

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(bamboo::shard_snapshot)
