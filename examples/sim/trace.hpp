// Spot-instance traces: the two published formats, and generated ones.
//   events:  "delta_ms,add|remove,nodeID" (ms since the trace start)
//   counts:  "YYYY-MM-DD, HH:MM:SS, count" (not always in time order)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bamboo::sim {

struct trace_event {
  std::int64_t ms = 0;
  bool add = true;
  std::string node;
};

struct trace_result {
  std::vector<trace_event> events;
  std::string error; // non-empty: what is wrong, with the line number
  explicit operator bool() const { return error.empty(); }
};

trace_result parse_trace_text(const std::string& text, const std::string& origin);
trace_result load_trace(const std::string& path);

// Generated traces, seeded. hourly: per hour of day, the probability that an
// instance is added / removed in that hour (the original's default diurnal
// pattern, or drawn per hour when `random_hours`), towards `capacity`. Constant:
// each live node is removed with probability `removal_per_hour` in each hour.
struct generate_options {
  std::uint64_t seed = 1;
  int capacity = 48;
  double hours = 12;
  bool random_hours = false;
  double removal_per_hour = -1; // >= 0: constant removal probability per node-hour
};

std::vector<trace_event> generate_trace(const generate_options& o);

} // namespace bamboo::sim
