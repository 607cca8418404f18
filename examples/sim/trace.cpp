#include "examples/sim/trace.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "model/rng.hpp"

namespace bamboo::sim {

namespace {

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ','))
    out.push_back(trim(cell));
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
std::int64_t days_from_civil(int y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097LL + static_cast<std::int64_t>(doe) - 719468;
}

bool parse_timestamp(const std::string& date, const std::string& time, std::int64_t& ms) {
  int y, mo, d, h, mi, s;
  char c1, c2, c3, c4;
  std::istringstream ds(date), ts(time);
  if (!(ds >> y >> c1 >> mo >> c2 >> d) || c1 != '-' || c2 != '-' || !ds.eof())
    return false;
  if (!(ts >> h >> c3 >> mi >> c4 >> s) || c3 != ':' || c4 != ':' || !ts.eof())
    return false;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
      s < 0 || s > 60)
    return false;
  ms = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000LL + s * 1000LL;
  return true;
}

// A line's cells as the user wrote them, for an error: "'5,explode,n1'".
std::string shown(const std::vector<std::string>& cells, const char* sep) {
  std::string text;
  for (std::size_t i = 0; i < cells.size(); ++i)
    text += (i ? sep : "") + cells[i];
  if (text.size() > 80)
    text = text.substr(0, 77) + "...";
  return "'" + text + "'";
}

trace_result
parse_events(const std::vector<std::pair<int, std::vector<std::string>>>& rows,
             const std::string& origin) {
  trace_result r;
  std::set<std::string> live, seen;
  std::int64_t last = 0;
  for (const auto& [line, cells] : rows) {
    auto where = origin + ":" + std::to_string(line) + ": ";
    if (cells.size() != 3 || !all_digits(cells[0]) ||
        (cells[1] != "add" && cells[1] != "remove") || cells[2].empty()) {
      r.error = where + shown(cells, ",") + " is not 'delta_ms,add|remove,node'";
      return r;
    }
    trace_event e;
    try {
      e.ms = std::stoll(cells[0]);
    } catch (const std::exception&) {
      r.error = where + "time out of range";
      return r;
    }
    if (e.ms < last) {
      r.error = where + "time " + cells[0] + " goes back (previous " +
                std::to_string(last) + ")";
      return r;
    }
    last = e.ms;
    e.add = cells[1] == "add";
    e.node = cells[2];
    if (e.add) {
      if (seen.count(e.node)) {
        r.error = where + "node '" + e.node + "' added twice";
        return r;
      }
      seen.insert(e.node);
      live.insert(e.node);
    } else {
      if (!live.count(e.node)) {
        r.error = where + "removal of unknown node '" + e.node + "'";
        return r;
      }
      live.erase(e.node);
    }
    r.events.push_back(e);
  }
  return r;
}

trace_result
parse_counts(const std::vector<std::pair<int, std::vector<std::string>>>& rows,
             const std::string& origin) {
  trace_result r;
  std::vector<std::pair<std::int64_t, int>> points;
  for (const auto& [line, cells] : rows) {
    std::int64_t ms = 0;
    if (cells.size() != 3 || !parse_timestamp(cells[0], cells[1], ms) ||
        !all_digits(cells[2])) {
      r.error = origin + ":" + std::to_string(line) + ": " + shown(cells, ", ") +
                " is not 'YYYY-MM-DD, HH:MM:SS, count'";
      return r;
    }
    points.push_back({ms, std::stoi(cells[2])});
  }
  // Sorted by time, stable so that equal timestamps keep their file order.
  std::stable_sort(points.begin(), points.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::int64_t t0 = points.front().first;
  std::vector<std::string> live; // oldest first: removals take the oldest node
  int next_id = 1;
  for (const auto& [ms, count] : points) {
    while (static_cast<int>(live.size()) < count) {
      live.push_back("node" + std::to_string(next_id++));
      r.events.push_back({ms - t0, true, live.back()});
    }
    while (static_cast<int>(live.size()) > count) {
      r.events.push_back({ms - t0, false, live.front()});
      live.erase(live.begin());
    }
  }
  return r;
}

} // namespace

trace_result parse_trace_text(const std::string& text, const std::string& origin) {
  std::vector<std::pair<int, std::vector<std::string>>> rows;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    auto t = trim(line);
    if (t.empty() || t[0] == '#')
      continue;
    rows.push_back({n, split(t)});
  }
  trace_result r;
  if (rows.empty()) {
    r.error = origin + ": the trace is empty";
    return r;
  }
  const auto& first = rows.front().second;
  const bool counts = first.size() == 3 && first[0].find('-') != std::string::npos;
  r = counts ? parse_counts(rows, origin) : parse_events(rows, origin);
  if (r && r.events.empty())
    r.error = origin + ": the trace has no events";
  return r;
}

trace_result load_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    trace_result r;
    r.error = "cannot read trace '" + path + "'";
    return r;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_trace_text(ss.str(), path);
}

std::vector<trace_event> generate_trace(const generate_options& o) {
  // The original simulator's diurnal defaults, by hour of the day.
  static const double add_p[24] = {0.05, 0.05, 0.05, 0.5,  0.5,  0.5,  0.05, 0.05,
                                   0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0,
                                   0,    0,    0,    0,    0,    0,    0,    0.05};
  static const double remove_p[24] = {0.05, 0.05, 0.05, 0.01, 0.01, 0.01, 0.05, 0.05,
                                      0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.25,
                                      0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.05};
  rng64 gen(mix_seed({o.seed, 0x73696dULL}));
  double add[24], rem[24];
  for (int h = 0; h < 24; ++h) {
    add[h] = o.random_hours ? gen.uniform() : add_p[h];
    rem[h] = o.removal_per_hour >= 0 ? o.removal_per_hour
             : o.random_hours        ? gen.uniform()
                                     : remove_p[h];
  }
  if (o.removal_per_hour >= 0)
    for (double& a : add)
      a = 1.0; // constant-removal mode: replacements come back within the hour
  std::vector<trace_event> out;
  std::vector<std::string> live;
  int next_id = 1;
  const int hours = static_cast<int>(o.hours + 0.999);
  for (int h = 0; h < hours; ++h) {
    const std::int64_t base = h * 3600000LL;
    std::vector<trace_event> hour;
    for (const auto& name : live)
      if (gen.uniform() < rem[h % 24])
        hour.push_back(
            {base + static_cast<std::int64_t>(gen.below(3600)) * 1000, false, name});
    const int room =
        o.capacity - static_cast<int>(live.size()) + static_cast<int>(hour.size());
    for (int i = 0; i < room; ++i)
      if (h == 0 || gen.uniform() < add[h % 24])
        hour.push_back(
            {h == 0 ? 0 : base + static_cast<std::int64_t>(gen.below(3600)) * 1000, true,
             "node" + std::to_string(next_id++)});
    std::stable_sort(hour.begin(), hour.end(),
                     [](const auto& a, const auto& b) { return a.ms < b.ms; });
    for (auto& e : hour) {
      if (e.add) {
        live.push_back(e.node);
      } else {
        auto it = std::find(live.begin(), live.end(), e.node);
        if (it == live.end())
          continue;
        live.erase(it);
      }
      out.push_back(e);
    }
  }
  return out;
}

} // namespace bamboo::sim
