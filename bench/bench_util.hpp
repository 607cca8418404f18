// Shared by the benchmarks: figures are medians, since these machines are noisy.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace bamboo::bench {

inline double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// "min 0.120 / median 0.125 / max 0.140 s (n=5)"
inline std::string spread(std::vector<double> v, const char* unit = "s") {
  if (v.empty())
    return "no samples";
  std::sort(v.begin(), v.end());
  char buf[128];
  std::snprintf(buf, sizeof(buf), "min %.4f / median %.4f / max %.4f %s (n=%zu)",
                v.front(), median(v), v.back(), unit, v.size());
  return buf;
}

} // namespace bamboo::bench
