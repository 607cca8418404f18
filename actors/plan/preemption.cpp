#include "actors/plan/preemption.hpp"

#include <cmath>
#include <regex>

#include "model/rng.hpp"

namespace bamboo {

std::optional<std::string> parse_preempt(const std::string& text,
                                         std::vector<preempt_spec>& kills, double& rate) {
  static const std::regex node_re(R"(node=(\d+)@step=(\d+)(\.op=(\d+))?)");
  static const std::regex rate_re(R"(rate=([0-9]*\.?[0-9]+))");
  std::smatch m;
  try {
    if (std::regex_match(text, m, node_re)) {
      preempt_spec p;
      p.node = std::stoi(m[1]);
      p.step = std::stoll(m[2]);
      p.op = m[4].matched ? std::stoi(m[4]) : 0;
      kills.push_back(p);
      return std::nullopt;
    }
    if (std::regex_match(text, m, rate_re)) {
      rate = std::stod(m[1]);
      return std::nullopt;
    }
  } catch (const std::exception&) {
    return "--preempt '" + text + "': number out of range";
  }
  return "--preempt '" + text + "' is neither node=N@step=K[.op=J] nor rate=R";
}

std::vector<preempt_spec> poisson_kills(double rate_per_100, std::int64_t steps,
                                        int nodes, int ops, std::uint64_t seed) {
  std::vector<preempt_spec> out;
  if (rate_per_100 <= 0 || nodes < 1)
    return out;
  rng64 gen(mix_seed({seed, 0x7072656d70ULL}));
  const double lambda = rate_per_100 / 100.0;
  for (std::int64_t k = 0; k < steps; ++k) {
    // Knuth's method: fine for the small rates per step used here.
    const double limit = std::exp(-lambda);
    double p = gen.uniform();
    while (p > limit) {
      out.push_back({static_cast<int>(gen.below(nodes)), k,
                     static_cast<int>(gen.below(static_cast<std::uint64_t>(ops) + 1))});
      p *= gen.uniform();
    }
  }
  return out;
}

preemption_injector::preemption_injector(std::vector<preempt_spec> kills)
    : kills_(std::move(kills)), used_(kills_.size(), false) {}

void preemption_injector::kill_now(int node, std::int64_t k) {
  std::lock_guard<std::mutex> guard{mtx_};
  fired_.push_back({preempt_spec{node, k, 0}, clock::now()});
  now_.push_back(node);
}

bool preemption_injector::should_kill(int node, std::int64_t k, int index, int ops) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto it = std::find(now_.begin(), now_.end(), node); it != now_.end()) {
    now_.erase(it);
    return true;
  }
  for (std::size_t i = 0; i < kills_.size(); ++i) {
    const auto& s = kills_[i];
    if (used_[i] || s.node != node || s.step != k)
      continue;
    if (s.op == index || (index == ops && s.op > ops)) {
      used_[i] = true;
      fired_.push_back({s, clock::now()});
      return true;
    }
  }
  return false;
}

bool preemption_injector::claim_announced(int node, std::int64_t k) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (std::size_t i = 0; i < kills_.size(); ++i)
    if (!used_[i] && kills_[i].node == node && kills_[i].step <= k) {
      used_[i] = true; // no kill time: the launcher's clock is not ours
      return true;
    }
  return false;
}

std::vector<preemption_injector::fired_kill> preemption_injector::fired() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return fired_;
}

std::optional<preemption_injector::fired_kill>
preemption_injector::fired_for(int node) const {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto it = fired_.rbegin(); it != fired_.rend(); ++it)
    if (it->spec.node == node)
      return *it;
  return std::nullopt;
}

} // namespace bamboo
