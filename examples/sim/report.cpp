#include "examples/sim/report.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

namespace bamboo::sim {

std::string summary_json(const sim_summary& s, const std::string& policy,
                         const std::string& model) {
  char buf[1024];
  std::snprintf(
      buf, sizeof(buf),
      "{\n  \"policy\": \"%s\",\n  \"model\": \"%s\",\n  \"steps\": %lld,\n"
      "  \"samples\": %lld,\n  \"preemptions\": %d,\n  \"fatal_failures\": %d,\n"
      "  \"hours\": %.6f,\n  \"mean_instances\": %.6f,\n  \"samples_per_s\": %.6f,\n"
      "  \"cost_per_h\": %.6f,\n  \"value\": %.6f,\n  \"samples_per_dollar\": %.3f\n}\n",
      policy.c_str(), model.c_str(), static_cast<long long>(s.steps),
      static_cast<long long>(s.samples), s.preemptions, s.fatal_failures, s.hours,
      s.mean_instances, s.samples_per_s, s.cost_per_h, s.value, s.samples_per_dollar);
  return buf;
}

std::string series_csv(const std::vector<series_point>& series) {
  std::string out = "hours,instances,samples_per_s,cost_per_h,steps,pipelines,event\n";
  char buf[256];
  for (const auto& p : series) {
    std::snprintf(buf, sizeof(buf), "%.6f,%d,%.4f,%.4f,%lld,%d,%s\n", p.hours,
                  p.instances, p.samples_per_s, p.cost_per_h,
                  static_cast<long long>(p.steps), p.pipelines, p.event.c_str());
    out += buf;
  }
  return out;
}

std::string plot_svg(const std::vector<plot_line>& lines, double hours) {
  const int width = 900, panel = 220, left = 70, right = 20, top = 30, gap = 40;
  const char* colors[] = {"#1b9e77", "#d95f02", "#7570b3",
                          "#e7298a", "#66a61e", "#e6ab02"};
  struct metric {
    const char* title;
    std::function<double(const series_point&)> get;
  };
  std::vector<metric> metrics{
      {"instances", [](const series_point& p) { return double(p.instances); }},
      {"throughput (samples/s)", [](const series_point& p) { return p.samples_per_s; }},
      {"cost ($/h)", [](const series_point& p) { return p.cost_per_h; }}};
  const int height = top + static_cast<int>(metrics.size()) * (panel + gap) + 40;
  std::string svg;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" "
                "height=\"100%%\" fill=\"white\"/>\n",
                width, height);
  svg += buf;
  if (hours <= 0)
    hours = 1;
  for (std::size_t m = 0; m < metrics.size(); ++m) {
    const int y0 = top + static_cast<int>(m) * (panel + gap);
    double ymax = 0;
    for (const auto& l : lines)
      for (const auto& p : *l.series)
        ymax = std::max(ymax, metrics[m].get(p));
    ymax = ymax > 0 ? ymax * 1.1 : 1;
    std::snprintf(
        buf, sizeof(buf),
        "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">%s</text>\n"
        "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
        "stroke=\"#888\"/>\n<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f</text>\n"
        "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>\n",
        left, y0 - 6, metrics[m].title, left, y0, width - left - right, panel, left - 4,
        y0 + 10, ymax, left - 4, y0 + panel);
    svg += buf;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      std::string pts;
      double prev_y = -1;
      for (const auto& p : *lines[i].series) {
        const double x = left + (width - left - right) * std::min(p.hours / hours, 1.0);
        const double y = y0 + panel - panel * metrics[m].get(p) / ymax;
        if (prev_y >= 0) { // a step function: hold the value until it changes
          std::snprintf(buf, sizeof(buf), "%.1f,%.1f ", x, prev_y);
          pts += buf;
        }
        std::snprintf(buf, sizeof(buf), "%.1f,%.1f ", x, y);
        pts += buf;
        prev_y = y;
      }
      svg += "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"";
      svg += colors[i % 6];
      svg += "\" points=\"" + pts + "\"/>\n";
    }
  }
  const int ly = top + static_cast<int>(metrics.size()) * (panel + gap) - 10;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::snprintf(buf, sizeof(buf),
                  "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                  "<text x=\"%d\" y=\"%d\">%s</text>\n",
                  left + static_cast<int>(i) * 200, ly, colors[i % 6],
                  left + 16 + static_cast<int>(i) * 200, ly + 11, lines[i].label.c_str());
    svg += buf;
  }
  std::snprintf(buf, sizeof(buf),
                "<text x=\"%d\" y=\"%d\">time (hours, 0 - %.1f)</text>\n", width / 2 - 60,
                height - 8, hours);
  svg += buf;
  svg += "</svg>\n";
  return svg;
}

} // namespace bamboo::sim
