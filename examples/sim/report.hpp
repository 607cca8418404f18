// Simulator output: the summary as JSON, the time series as CSV, a plot as SVG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "examples/sim/simulator.hpp"

namespace bamboo::sim {

// One run's summary as a JSON object (the --summary file is an array of them).
std::string summary_json(const sim_summary& s, const std::string& policy,
                         const std::string& model, std::uint64_t seed);
std::string series_csv(const std::vector<series_point>& series);
// Instances, throughput, cost and useful progress over the first `hours` hours,
// one panel each, every run overlaid (those that go on longer are cut there).
struct plot_line {
  std::string label;
  const std::vector<series_point>* series;
};
std::string plot_svg(const std::vector<plot_line>& lines, double hours);

} // namespace bamboo::sim
