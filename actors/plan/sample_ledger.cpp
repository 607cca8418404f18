#include "actors/plan/sample_ledger.hpp"

#include <istream>
#include <map>
#include <set>
#include <sstream>

namespace bamboo {

namespace {

constexpr const char* header_tag = "# bamboo ledger v1";

std::string nodes(const std::vector<int>& v) {
  std::string out;
  for (int n : v)
    out += (out.empty() ? "" : " ") + (n < 0 ? std::string("-") : std::to_string(n));
  return out;
}

std::vector<std::string> split(const std::string& line, char sep, std::size_t max) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (out.size() + 1 < max) {
    auto pos = line.find(sep, start);
    if (pos == std::string::npos)
      break;
    out.push_back(line.substr(start, pos - start));
    start = pos + 1;
  }
  out.push_back(line.substr(start));
  return out;
}

template <class T>
bool number(const std::string& s, T& out) {
  if (s.empty())
    return false;
  std::istringstream in(s);
  in >> out;
  return in && in.peek() == std::char_traits<char>::eof();
}

bool node_list(const std::string& s, std::vector<int>& out) {
  out.clear();
  std::istringstream in(s);
  for (std::string w; in >> w;) {
    int n = -1;
    if (w != "-" && (!number(w, n) || n < 0))
      return false;
    out.push_back(w == "-" ? -1 : n);
  }
  return !out.empty();
}

std::optional<ledger_header> parse_header(const std::string& line) {
  auto cells = split(line, ',', 8);
  if (cells.size() != 4 || cells[0] != header_tag)
    return std::nullopt;
  ledger_header h;
  auto field = [&](const std::string& cell, const char* key, auto& out) {
    const std::string prefix = std::string(key) + "=";
    return cell.rfind(prefix, 0) == 0 && number(cell.substr(prefix.size()), out);
  };
  if (!field(cells[1], "seed", h.seed) ||
      !field(cells[2], "samples_per_epoch", h.samples_per_epoch) ||
      !field(cells[3], "global_batch", h.global_batch) || h.samples_per_epoch <= 0 ||
      h.global_batch <= 0 || h.samples_per_epoch > max_ledger_samples ||
      h.global_batch > max_ledger_samples)
    return std::nullopt; // a size from the file bounds what verify allocates
  return h;
}

bool same(const ledger_header& a, const ledger_header& b) {
  return a.seed == b.seed && a.samples_per_epoch == b.samples_per_epoch &&
         a.global_batch == b.global_batch;
}

} // namespace

std::string format_header(const ledger_header& h) {
  return std::string(header_tag) + ",seed=" + std::to_string(h.seed) +
         ",samples_per_epoch=" + std::to_string(h.samples_per_epoch) +
         ",global_batch=" + std::to_string(h.global_batch);
}

std::string format_commit(const ledger_commit& c) {
  return "commit," + std::to_string(c.step) + "," + std::to_string(c.generation) + "," +
         std::to_string(c.first) + "," + std::to_string(c.end) + "," + nodes(c.owners) +
         "," + nodes(c.shadows);
}

std::string format_rollback(const ledger_rollback& r) {
  std::string reason = r.reason;
  for (auto& ch : reason)
    if (ch == '\n')
      ch = ' ';
  return "rollback," + std::to_string(r.to_step) + "," + reason;
}

std::optional<ledger_file> parse_ledger(std::istream& in, std::string& error) {
  ledger_file f;
  bool have_header = false;
  int n = 0;
  auto bad = [&](const std::string& why) {
    error = "line " + std::to_string(n) + ": " + why;
    return std::nullopt;
  };
  std::int64_t bytes = 0, positions = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    bytes += static_cast<std::int64_t>(line.size()) + 1;
    if (line.empty())
      continue;
    if (line[0] == '#') {
      auto h = parse_header(line);
      if (!h)
        return bad(
            "not a bamboo ledger v1 header (seed=N,samples_per_epoch=N,global_batch=N, "
            "each size from 1 to " +
            std::to_string(max_ledger_samples) + ")");
      if (have_header && !same(*h, f.header))
        return bad("a header of another run (seed, epoch size or global batch differ)");
      f.header = *h;
      have_header = true;
      continue;
    }
    if (!have_header)
      return bad("an entry before the ledger's header");
    auto cells = split(line, ',', 7);
    if (cells[0] == "commit") {
      ledger_commit c;
      if (cells.size() != 7 || !number(cells[1], c.step) ||
          !number(cells[2], c.generation) || !number(cells[3], c.first) ||
          !number(cells[4], c.end) || !node_list(cells[5], c.owners) ||
          !node_list(cells[6], c.shadows) || c.step < 0 || c.first < 0 ||
          c.first > c.end || c.end - c.first > f.header.global_batch ||
          c.step > max_ledger_samples)
        return bad("a malformed commit (want commit,STEP,GENERATION,FIRST,END,OWNERS,"
                   "SHADOWS)");
      positions += c.end - c.first;
      f.entries.emplace_back(std::move(c));
    } else if (cells[0] == "rollback") {
      auto r = split(line, ',', 3);
      ledger_rollback rb;
      if (r.size() < 2 || !number(r[1], rb.to_step) || rb.to_step < 0)
        return bad("a malformed rollback (want rollback,TO_STEP,REASON)");
      rb.reason = r.size() > 2 ? r[2] : "";
      f.entries.emplace_back(std::move(rb));
    } else {
      return bad("an unknown entry '" + cells[0] + "'");
    }
  }
  if (!have_header)
    return bad("no ledger header (an empty file?)");
  // What verification costs (an epoch's order, every committed position) is
  // bounded by the file's size, never by the sizes it claims.
  const auto budget = ledger_work_budget(bytes);
  if (f.header.samples_per_epoch + positions > budget) {
    error = "claims " + std::to_string(f.header.samples_per_epoch) +
            " samples per epoch and " + std::to_string(positions) +
            " committed positions: more than a ledger of " + std::to_string(bytes) +
            " bytes can vouch for (at most " + std::to_string(budget) + " in all)";
    return std::nullopt;
  }
  return f;
}

ledger_verdict verify_ledger(const ledger_file& f,
                             const std::function<std::int64_t(std::int64_t)>& sample_at) {
  ledger_verdict v;
  const auto g = f.header.global_batch;
  std::map<std::int64_t, ledger_commit> standing; // step -> its commit
  auto problem = [&](const std::string& p) {
    if (v.problems.size() < 20)
      v.problems.push_back(p);
    else if (v.problems.size() == 20)
      v.problems.push_back("(more problems not shown)");
  };
  std::int64_t next = 0;
  for (const auto& e : f.entries) {
    if (const auto* rb = std::get_if<ledger_rollback>(&e)) {
      ++v.rollbacks;
      if (rb->to_step > next)
        problem("a rollback to step " + std::to_string(rb->to_step) +
                ", past the last standing step " + std::to_string(next - 1));
      for (auto it = standing.lower_bound(rb->to_step); it != standing.end();) {
        ++v.rolled_back;
        it = standing.erase(it);
      }
      next = std::min(next, rb->to_step);
      continue;
    }
    const auto& c = std::get<ledger_commit>(e);
    const auto k = c.step;
    if (standing.count(k))
      problem("step " + std::to_string(k) +
              " committed twice without a rollback: its "
              "samples would count twice");
    else if (k != next)
      problem("step " + std::to_string(k) + " committed after step " +
              std::to_string(next - 1) + ": steps are missing between them");
    if (c.first != k * g || c.end != (k + 1) * g)
      problem("step " + std::to_string(k) + " took positions [" +
              std::to_string(c.first) + ", " + std::to_string(c.end) + "), not [" +
              std::to_string(k * g) + ", " + std::to_string((k + 1) * g) + ")");
    if (c.owners.size() != c.shadows.size())
      problem("step " + std::to_string(k) + ": " + std::to_string(c.owners.size()) +
              " owners but " + std::to_string(c.shadows.size()) + " shadows");
    standing[k] = c;
    next = std::max(next, k + 1);
  }
  v.committed = static_cast<std::int64_t>(standing.size());

  // Every standing position, mapped to its sample: each sample once an epoch.
  const auto n = f.header.samples_per_epoch;
  struct epoch_use {
    std::vector<bool> seen; // a bit per sample
    std::int64_t count = 0;
  };
  std::map<std::int64_t, epoch_use> used; // epoch -> samples
  for (const auto& [k, c] : standing)
    for (auto p = c.first; p < c.end; ++p) {
      const auto epoch = p / n;
      const auto sample = sample_at(p);
      if (sample < 0 || sample >= n) {
        problem("position " + std::to_string(p) + " maps to no sample of the epoch");
        continue;
      }
      auto& u = used[epoch];
      if (u.seen.empty())
        u.seen.resize(static_cast<std::size_t>(n));
      if (u.seen[static_cast<std::size_t>(sample)])
        problem("sample " + std::to_string(sample) + " used twice in epoch " +
                std::to_string(epoch) + " (step " + std::to_string(k) + ")");
      else
        u.seen[static_cast<std::size_t>(sample)] = true, ++u.count;
    }
  for (const auto& [epoch, u] : used)
    v.epochs.push_back("epoch " + std::to_string(epoch) + ": " + std::to_string(u.count) +
                       " of " + std::to_string(n) + " samples, each once" +
                       (u.count == n ? " (complete)" : ""));

  // The plan history of the standing steps: runs of one generation and plan.
  const ledger_commit* first = nullptr;
  std::int64_t last = -1;
  auto flush = [&] {
    if (!first)
      return;
    v.plans.push_back("steps " + std::to_string(first->step) + "-" +
                      std::to_string(last) + ", generation " +
                      std::to_string(first->generation) + ": stage owners " +
                      nodes(first->owners) + ", shadows " + nodes(first->shadows));
  };
  for (const auto& [k, c] : standing) {
    if (!first || c.generation != first->generation || c.owners != first->owners ||
        c.shadows != first->shadows || k != last + 1) {
      flush();
      first = &c;
    }
    last = k;
  }
  flush();
  return v;
}

} // namespace bamboo
