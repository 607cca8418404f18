// Shared by the benchmarks: figures are medians, since these machines are noisy.
#pragma once

#include <algorithm>
#include <vector>

namespace bamboo::bench {

inline double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace bamboo::bench
