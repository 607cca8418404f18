// A stage's state as plain values: its parameters, AdamW moments and step
// counter as named blobs (for bit-for-bit comparisons). Its gradients as one
// flat tensor are model/stage_executor.hpp's pack_gradients.
#pragma once

#include <vector>

#include "actors/plan/run_record.hpp"
#include "model/stage_executor.hpp" // pack_gradients

namespace at {
class Tensor;
}

namespace bamboo {

class stage_executor;

std::vector<param_blob> state_blobs(const stage_executor& ex, int stage);

} // namespace bamboo
