#include "model/partition.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace bamboo {

std::vector<stage_range> partition(const std::vector<double>& costs, int stages) {
  const int n = static_cast<int>(costs.size());
  if (stages < 1 || stages > n)
    throw std::invalid_argument("partition: need 1 <= stages <= layers");
  if (std::any_of(costs.begin(), costs.end(), [](double c) { return c < 0; }))
    throw std::invalid_argument("partition: negative layer cost");
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + costs[i];
  auto span = [&](int a, int b) { return prefix[b] - prefix[a]; };
  // best[k][i]: minimal bottleneck of the first i layers in k stages; exact DP,
  // O(S n^2), fine for the few dozen layers a model has.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {
        double v = std::max(best[k - 1][j], span(j, i));
        if (v < best[k][i]) {
          best[k][i] = v;
          cut[k][i] = j;
        }
      }
  std::vector<stage_range> out(stages);
  int end = n;
  for (int k = stages; k >= 1; --k) {
    int begin = cut[k][end];
    out[k - 1].first = begin;
    out[k - 1].last = end;
    end = begin;
  }
  const double total = prefix[n] > 0 ? prefix[n] : 1.0;
  for (auto& r : out) {
    r.cost = span(r.first, r.last);
    r.share = r.cost / total;
  }
  return out;
}

std::string describe(const std::vector<stage_range>& parts) {
  std::string out;
  char buf[96];
  for (std::size_t s = 0; s < parts.size(); ++s) {
    std::snprintf(buf, sizeof(buf), "%sstage %zu: layers [%d,%d) %.1f%%", s ? " | " : "",
                  s, parts[s].first, parts[s].last, 100.0 * parts[s].share);
    out += buf;
  }
  return out;
}

} // namespace bamboo
