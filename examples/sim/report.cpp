#include "examples/sim/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

namespace bamboo::sim {

std::string summary_json(const sim_summary& s, const std::string& policy,
                         const std::string& model, std::uint64_t seed) {
  char buf[1024];
  std::snprintf(
      buf, sizeof(buf),
      "{\n  \"policy\": \"%s\",\n  \"model\": \"%s\",\n  \"seed\": %llu,\n"
      "  \"steps\": %lld,\n"
      "  \"samples\": %lld,\n  \"preemptions\": %d,\n  \"fatal_failures\": %d,\n"
      "  \"hours\": %.6f,\n  \"mean_instances\": %.6f,\n  \"samples_per_s\": %.6f,\n"
      "  \"cost_per_h\": %.6f,\n  \"value\": %.6f,\n  \"samples_per_dollar\": %.3f\n}\n",
      policy.c_str(), model.c_str(), static_cast<unsigned long long>(seed),
      static_cast<long long>(s.steps), static_cast<long long>(s.samples), s.preemptions,
      s.fatal_failures, s.hours, s.mean_instances, s.samples_per_s, s.cost_per_h, s.value,
      s.samples_per_dollar);
  return buf;
}

std::string series_csv(const std::vector<series_point>& series) {
  std::string out =
      "hours,instances,samples_per_s,cost_per_h,steps,pipelines,stages,event\n";
  char buf[256];
  for (const auto& p : series) {
    std::snprintf(buf, sizeof(buf), "%.6f,%d,%.4f,%.4f,%lld,%d,%d,%s\n", p.hours,
                  p.instances, p.samples_per_s, p.cost_per_h,
                  static_cast<long long>(p.steps), p.pipelines, p.stages,
                  p.event.c_str());
    out += buf;
  }
  return out;
}

namespace {

// 1, 2 or 5 times a power of ten, about span/target apart.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw)
      return m * p;
  return 10 * p;
}

std::string number(double v) {
  char buf[32];
  if (v != 0 && std::fabs(v) < 10 && v != std::floor(v))
    std::snprintf(buf, sizeof(buf), "%.2g", v);
  else if (std::fabs(v) >= 1e6)
    std::snprintf(buf, sizeof(buf), "%.3gM", v / 1e6);
  else if (std::fabs(v) >= 1e4)
    std::snprintf(buf, sizeof(buf), "%.0fk", v / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  return buf;
}

// Tableau 10: distinct to most eyes; a line past the tenth is also dashed.
const char* const colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                              "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

struct metric {
  const char* title;
  std::function<double(const series_point&)> get;
  bool cumulative; // drawn point to point, not held until the next value
};

// The (hours, value) corners of one line in one panel, cut at `hours`: a
// held value turns at each change, a cumulative one is interpolated at the cut.
std::vector<std::pair<double, double>> corners(const std::vector<series_point>& series,
                                               const metric& m, double hours) {
  std::vector<std::pair<double, double>> out;
  const series_point* prev = nullptr;
  for (const auto& p : series) {
    const double v = m.get(p);
    if (p.hours > hours) {
      if (prev) {
        const double f = (hours - prev->hours) / std::max(p.hours - prev->hours, 1e-12);
        out.emplace_back(hours, m.cumulative ? m.get(*prev) + f * (v - m.get(*prev))
                                             : m.get(*prev));
      }
      return out;
    }
    if (prev && !m.cumulative)
      out.emplace_back(p.hours, m.get(*prev));
    out.emplace_back(p.hours, v);
    prev = &p;
  }
  return out;
}

} // namespace

std::string plot_svg(const std::vector<plot_line>& lines, double hours) {
  const int plot_w = 640, panel = 170, left = 70, legend_w = 230, top = 40, gap = 60;
  const int width = left + plot_w + 20 + legend_w;
  std::vector<metric> metrics{
      {"instances (the spot runs share the trace's)",
       [](const series_point& p) { return double(p.instances); }, false},
      {"throughput (samples/s, redone work included)",
       [](const series_point& p) { return p.samples_per_s; }, false},
      {"cost ($/h)", [](const series_point& p) { return p.cost_per_h; }, false},
      {"useful progress (steps kept: rolled-back steps are subtracted)",
       [](const series_point& p) { return double(p.steps); }, true}};
  const int height = top + static_cast<int>(metrics.size()) * (panel + gap);
  if (hours <= 0)
    hours = 1;
  std::string svg;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" "
                "height=\"100%%\" fill=\"white\"/>\n",
                width, height);
  svg += buf;
  const double xstep = nice_step(hours, 8);
  for (std::size_t m = 0; m < metrics.size(); ++m) {
    const int y0 = top + static_cast<int>(m) * (panel + gap);
    std::vector<std::vector<std::pair<double, double>>> shown;
    double ymax = 0;
    for (const auto& l : lines) {
      shown.push_back(corners(*l.series, metrics[m], hours));
      for (const auto& c : shown.back())
        ymax = std::max(ymax, c.second);
    }
    const double ystep = nice_step(ymax > 0 ? ymax : 1, 4);
    ymax = ystep * std::ceil((ymax > 0 ? ymax * 1.05 : 1) / ystep);
    std::snprintf(buf, sizeof(buf),
                  "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">%s</text>\n", left,
                  y0 - 8, metrics[m].title);
    svg += buf;
    for (double v = 0; v <= ymax * 1.0001; v += ystep) { // y ticks and grid
      const double y = y0 + panel - panel * v / ymax;
      std::snprintf(
          buf, sizeof(buf),
          "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
          "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
          left, y, left + plot_w, y, left - 5, y + 4, number(v).c_str());
      svg += buf;
    }
    for (double t = 0; t <= hours * 1.0001; t += xstep) { // x ticks
      const double x = left + plot_w * t / hours;
      std::snprintf(buf, sizeof(buf),
                    "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#888\"/>"
                    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                    x, y0 + panel, x, y0 + panel + 4, x, y0 + panel + 17,
                    number(t).c_str());
      svg += buf;
    }
    std::snprintf(buf, sizeof(buf),
                  "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                  "stroke=\"#888\"/>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
                  "fill=\"#555\">hours</text>\n",
                  left, y0, plot_w, panel, left + plot_w / 2, y0 + panel + 32);
    svg += buf;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      svg += "<polyline fill=\"none\" stroke-width=\"1.6\" stroke=\"";
      svg += colors[i % 10];
      svg += i >= 10 ? "\" stroke-dasharray=\"6,3" : "";
      svg += "\" points=\"";
      for (const auto& [t, v] : shown[i]) {
        std::snprintf(buf, sizeof(buf), "%.1f,%.1f ", left + plot_w * t / hours,
                      y0 + panel - panel * v / ymax);
        svg += buf;
      }
      svg += "\"/>\n";
    }
  }
  // The legend: one row per line, right of the panels, so any number fits.
  const int lx = left + plot_w + 20;
  svg += "<text x=\"" + std::to_string(lx) + "\" y=\"" + std::to_string(top - 8) +
         "\" font-weight=\"bold\">runs</text>\n";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const int ly = top + static_cast<int>(i) * 20;
    std::snprintf(buf, sizeof(buf),
                  "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                  "stroke-width=\"3\"%s/><text x=\"%d\" y=\"%d\">%s</text>\n",
                  lx, ly + 6, lx + 22, ly + 6, colors[i % 10],
                  i >= 10 ? " stroke-dasharray=\"6,3\"" : "", lx + 28, ly + 10,
                  lines[i].label.c_str());
    svg += buf;
  }
  svg += "</svg>\n";
  return svg;
}

} // namespace bamboo::sim
