// Simulator output: the summary as JSON, the time series as CSV, a plot as SVG.
#pragma once

#include <string>
#include <vector>

#include "examples/sim/simulator.hpp"

namespace bamboo::sim {

std::string summary_json(const sim_summary& s, const std::string& policy,
                         const std::string& model);
std::string series_csv(const std::vector<series_point>& series);
// Instances, throughput and cost over time, one panel each; several runs overlay.
struct plot_line {
  std::string label;
  const std::vector<series_point>* series;
};
std::string plot_svg(const std::vector<plot_line>& lines, double hours);

} // namespace bamboo::sim
