#include "examples/sim/profile.hpp"

#include <fstream>
#include <sstream>

namespace bamboo::sim {

double profile::step_seconds(int pipelines) const {
  if (pipelines < 1 || step_s.empty())
    return 0;
  return step_s[std::min<std::size_t>(pipelines, step_s.size()) - 1];
}

std::optional<profile> builtin_profile(const std::string& name) {
  profile p;
  p.name = name;
  p.stages = 12;
  p.local_rendezvous_ms = 20000;
  if (name == "gpt2") {
    p.samples_per_step = 32;
    p.step_s = {1.200, 1.085, 1.046, 1.008};
    p.target_steps = 188828;
    p.on_demand_instances = 32;
    p.on_demand_step_s = 3.37;
    return p;
  }
  if (name == "bert") {
    p.samples_per_step = 264;
    p.step_s = {4.31, 2.39, 1.805, 1.45};
    p.target_steps = 22194;
    p.on_demand_instances = 20;
    p.on_demand_step_s = 2.51;
    return p;
  }
  return std::nullopt;
}

std::optional<profile> load_profile(const std::string& path, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read profile '" + path + "'";
    return std::nullopt;
  }
  profile p;
  p.name = path;
  std::string line;
  int n = 0;
  try {
    while (std::getline(in, line)) {
      ++n;
      if (line.empty() || line[0] == '#')
        continue;
      std::stringstream ss(line);
      std::string key, value;
      std::getline(ss, key, ',');
      std::vector<std::string> values;
      while (std::getline(ss, value, ','))
        values.push_back(value);
      if (values.empty())
        throw std::invalid_argument("no value");
      if (key == "name")
        p.name = values[0];
      else if (key == "stages")
        p.stages = std::stoi(values[0]);
      else if (key == "samples_per_step")
        p.samples_per_step = std::stoi(values[0]);
      else if (key == "step_s")
        for (auto& v : values)
          p.step_s.push_back(std::stod(v));
      else if (key == "local_rendezvous_ms")
        p.local_rendezvous_ms = std::stoll(values[0]);
      else if (key == "target_steps")
        p.target_steps = std::stoll(values[0]);
      else if (key == "on_demand_instances")
        p.on_demand_instances = std::stoi(values[0]);
      else if (key == "on_demand_step_s")
        p.on_demand_step_s = std::stod(values[0]);
      else if (key == "lazy_overhead" || key == "eager_overhead") {
        const double v = std::stod(values[0]);
        if (!(v >= 0 && v < 10))
          throw std::invalid_argument(key + " must be a fraction of the step time in "
                                            "[0, 10)");
        (key == "lazy_overhead" ? p.lazy_overhead : p.eager_overhead) = v;
      } else
        throw std::invalid_argument("unknown key '" + key + "'");
    }
  } catch (const std::exception& e) {
    error = path + ":" + std::to_string(n) + ": " + e.what();
    return std::nullopt;
  }
  if (p.stages < 1 || p.samples_per_step < 1 || p.step_s.empty()) {
    error = path + ": needs stages, samples_per_step and step_s";
    return std::nullopt;
  }
  for (double s : p.step_s)
    if (s <= 0) {
      error = path + ": step_s must be positive";
      return std::nullopt;
    }
  return p;
}

} // namespace bamboo::sim
