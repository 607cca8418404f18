// The plain values of a checkpoint that actors pass around (model/checkpoint.hpp
// writes and reads them), kept light for actors/protocol.hpp.
#pragma once

#include <cstdint>
#include <string>

namespace bamboo {

// One stage's file of a checkpoint, as written.
struct checkpoint_shard {
  std::string file; // its name inside the step's directory
  std::string sha256;
  std::uint64_t bytes = 0;
  std::uint64_t tensors = 0;
};

} // namespace bamboo
