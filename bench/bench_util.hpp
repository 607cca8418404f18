// Shared by the benchmarks: figures are medians, since these machines are noisy.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace bamboo::bench {

// The benchmark GPT (4 blocks, d 256, 8 heads, seq 128, dropout 0.1, G=32 in
// micro-batches of 4, one thread per stage, no redundancy): pipeline and step
// speed alone; bamboo-bench-redundancy measures what shadows cost.
inline train_config benchmark_gpt(int stages) {
  train_config c;
  c.model.layers = 4;
  c.model.d_model = 256;
  c.model.heads = 8;
  c.model.seq_len = 128;
  c.model.dropout = 0.1;
  c.stages = stages;
  c.micro_batch = 4;
  c.global_batch = 32;
  c.steps = 10;
  c.threads = 1;
  c.redundancy = redundancy_mode::off;
  return c;
}

inline double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2; // even n: not the upper one
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

// The cells of one CSV line (no quoting: our metrics files have none).
inline std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= line.size(); ++i)
    if (i == line.size() || line[i] == ',') {
      cells.push_back(line.substr(start, i - start));
      start = i + 1;
    }
  return cells;
}

} // namespace bamboo::bench
