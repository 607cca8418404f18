#include "actors/run_controls.hpp"

#include <utility>

namespace bamboo {

void run_controls::set_checkpoints(bool available) {
  std::lock_guard<std::mutex> guard{mtx_};
  checkpoints_ = available;
}

void run_controls::set_redundancy(redundancy_mode current) {
  std::lock_guard<std::mutex> guard{mtx_};
  current_ = current;
  if (wanted_ == current)
    wanted_.reset();
}

void run_controls::set_live(std::vector<int> ids) {
  std::lock_guard<std::mutex> guard{mtx_};
  live_ = std::set<int>(ids.begin(), ids.end());
}

run_controls::answer run_controls::pause() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (paused_)
    return {false, "already paused (resume goes on)"};
  paused_ = true;
  return {true, "paused: no step starts after the one under way, until resume"};
}

run_controls::answer run_controls::resume() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!paused_)
    return {false, "not paused"};
  paused_ = false;
  return {true, "resumed"};
}

run_controls::answer run_controls::checkpoint() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!checkpoints_)
    return {false, "this run takes no checkpoints (start it with --checkpoint-every "
                   "and --checkpoint-dir)"};
  if (checkpoint_)
    return {false, "a checkpoint is already asked for"};
  checkpoint_ = true;
  return {true, "a checkpoint is taken at the next step boundary"};
}

run_controls::answer run_controls::redundancy(redundancy_mode wanted) {
  std::lock_guard<std::mutex> guard{mtx_};
  const auto target = wanted_.value_or(current_);
  if (wanted == target)
    return {false, std::string("redundancy is ") + to_string(wanted) + " already"};
  if (wanted == current_) {
    wanted_.reset();
    return {true, std::string("redundancy stays ") + to_string(wanted) +
                      " (the change asked for is withdrawn)"};
  }
  wanted_ = wanted;
  return {true, std::string("redundancy ") + to_string(wanted) +
                    " from the next step boundary (a new plan from the state saved "
                    "there)"};
}

run_controls::answer run_controls::order(node_action action, int node, double seconds) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!live_.count(node))
    return {false, "node " + std::to_string(node) +
                       " is not in the plan (the snapshot lists it)"};
  orders_.push_back({action, node, seconds});
  const auto n = "node " + std::to_string(node);
  switch (action) {
  case node_action::preempt: return {true, n + " preempted: its actors are killed"};
  case node_action::notice:
    return {true, n + " has a preemption notice: its stages move at the next step "
                      "boundary"};
  case node_action::drain: break;
  }
  return {true, n + " drains: its stages move at the next step boundary, then it leaves"};
}

bool run_controls::paused() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return paused_;
}

bool run_controls::take_checkpoint() {
  std::lock_guard<std::mutex> guard{mtx_};
  const bool asked = checkpoint_;
  checkpoint_ = false;
  return asked;
}

redundancy_mode run_controls::wanted_redundancy() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return wanted_.value_or(current_);
}

std::vector<run_controls::node_order> run_controls::take_orders() {
  std::lock_guard<std::mutex> guard{mtx_};
  return std::exchange(orders_, {});
}

redundancy_mode run_controls::redundancy() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return current_;
}

} // namespace bamboo
