// A stage's state as plain values: its gradients as one flat tensor (what the
// owner sends its shadow across processes: a defined-mask, then every gradient,
// zeros where undefined) and its parameters, AdamW moments and step counter as
// named blobs (for bit-for-bit comparisons).
#pragma once

#include <vector>

#include "actors/plan/run_record.hpp"

namespace at {
class Tensor;
}

namespace bamboo {

class stage_executor;

at::Tensor pack_gradients(const stage_executor& ex, const std::vector<at::Tensor>& grads);
std::vector<at::Tensor> unpack_gradients(const stage_executor& ex,
                                         const at::Tensor& flat);
// The length of a packed tensor of ex's gradients.
long packed_size(const stage_executor& ex);

std::vector<param_blob> state_blobs(const stage_executor& ex, int stage);

} // namespace bamboo
