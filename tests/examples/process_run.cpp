// The helpers of the multi-process training tests (process_run.hpp).
// LibTorch first: its glog macros would replace Catch's CHECK otherwise.
#include <ATen/ATen.h>

#include "tests/examples/process_run.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "actors/embedded_cluster.hpp"

namespace bamboo::test {

train_config small_gpt(std::uint64_t seed) {
  train_config c;
  c.model.layers = 4;
  c.model.d_model = 64;
  c.model.heads = 4;
  c.model.seq_len = 32;
  c.stages = 4;
  c.micro_batch = 2;
  c.global_batch = 8;
  c.steps = 16;
  c.seed = seed;
  c.threads = 1;
  return c;
}

static std::string hex(std::uint64_t d) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(d));
  return buf;
}

reference embedded_reference(const train_config& cfg) {
  run_options o;
  o.collect_digests = true;
  auto r = run_embedded(cfg, o);
  REQUIRE(r);
  reference out;
  for (const auto& s : r->steps)
    out.losses.push_back(s.loss);
  for (const auto& d : r->digests)
    out.digests[d.name] = hex(d.digest);
  REQUIRE_FALSE(out.digests.empty());
  return out;
}

metrics_rows read_metrics(const std::string& path) {
  metrics_rows m;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line); // header
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ','))
      cells.push_back(cell);
    if (line.back() == ',')
      cells.push_back("");
    REQUIRE(cells.size() == 8);
    m.steps.push_back(std::stol(cells[0]));
    m.losses.push_back(std::stod(cells[1]));
    m.generations.push_back(std::stol(cells[3]));
    m.events.push_back(cells[7]);
  }
  return m;
}

void check_losses(const metrics_rows& m, const reference& ref) {
  REQUIRE(m.losses.size() == ref.losses.size());
  for (std::size_t k = 0; k < ref.losses.size(); ++k)
    CHECK(m.losses[k] == ref.losses[k]);
}

void check_state(const std::string& path, const reference& ref, bool shadows_left,
                 bool same_stages) {
  std::ifstream in(path);
  std::string line;
  REQUIRE(std::getline(in, line));
  CHECK(line == "role,name,count,digest");
  std::map<std::string, std::string> owners;
  std::vector<std::pair<std::string, std::string>> shadows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');)
      cells.push_back(cell);
    REQUIRE(cells.size() == 4);
    if (cells[0] == "owner")
      owners[cells[1]] = cells[3];
    else
      shadows.emplace_back(cells[1], cells[3]);
  }
  auto expected = ref.digests;
  if (!same_stages)
    for (auto* m : {&owners, &expected})
      for (auto it = m->begin(); it != m->end();)
        it = it->first.find("#steps") != std::string::npos ? m->erase(it) : std::next(it);
  CHECK(owners == expected);
  CHECK(shadows.empty() == !shadows_left);
  for (const auto& [name, digest] : shadows) {
    INFO("shadow of " << name);
    if (!same_stages && name.find("#steps") != std::string::npos)
      continue;
    CHECK(expected.count(name) == 1);
    CHECK(owners[name] == digest);
  }
}

bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_s, comm, state;
  if (!(stat >> pid_s >> comm >> state))
    return true;
  return state == "Z";
}

} // namespace bamboo::test
