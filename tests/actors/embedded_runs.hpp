// What the embedded-run tests share: a run with injected kills that collects
// the final parameters, and the bit-for-bit comparison of two runs.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"

namespace bamboo::test {

inline run_result run(const train_config& c, std::vector<preempt_spec> kills = {}) {
  run_options o;
  o.collect_parameters = true;
  o.preemptions = std::move(kills);
  auto r = run_embedded(c, o);
  if (!r)
    FAIL("run failed: " << describe(r.error()));
  return std::move(*r);
}

// Same losses and same final parameters (by name), to the last bit.
inline bool same_bits(const run_result& a, const run_result& b) {
  if (a.steps.size() != b.steps.size() || a.parameters.size() != b.parameters.size())
    return false;
  for (std::size_t k = 0; k < a.steps.size(); ++k)
    if (a.steps[k].loss != b.steps[k].loss)
      return false;
  for (std::size_t i = 0; i < a.parameters.size(); ++i) {
    const auto& x = a.parameters[i].values;
    const auto& y = b.parameters[i].values;
    if (a.parameters[i].name != b.parameters[i].name || x.size() != y.size() ||
        std::memcmp(x.data(), y.data(), 4 * x.size()) != 0)
      return false;
  }
  return true;
}

} // namespace bamboo::test
