// An operator's hold on a run (bamboo-inspect's commands that are not a
// worker's business): pause and resume, a checkpoint now, another redundancy
// mode; in embedded mode also a node's preemption, notice or drain, which a
// worker process would carry out itself. The gateway writes it, the manager
// reads it at step boundaries and on its ticks (a manager lives for one plan;
// this lives for the run). Plain and locked; tested without actors.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace bamboo {

class run_controls {
public:
  struct answer {
    bool ok = false;
    std::string text;
  };
  enum class node_action { preempt, notice, drain };
  struct node_order {
    node_action action = node_action::preempt;
    int node = -1;      // the member id, as snapshots name it
    double seconds = 0; // notice: the deadline (0: the default)
  };

  // The runner's.
  void set_checkpoints(bool available);
  void set_redundancy(redundancy_mode current); // the plan now running
  // The manager's, at each step boundary and loss: the nodes an order may name
  // (embedded mode only; across processes the gateway knows its members).
  void set_live(std::vector<int> ids);

  // The operator's: what is done, in one line.
  answer pause();
  answer resume();
  answer checkpoint();
  answer redundancy(redundancy_mode wanted);
  answer order(node_action action, int node, double seconds);

  // The manager's.
  bool paused() const;
  bool take_checkpoint();                    // once per request
  redundancy_mode wanted_redundancy() const; // the current one unless changed
  std::vector<node_order> take_orders();
  // The snapshot's.
  redundancy_mode redundancy() const;

private:
  mutable std::mutex mtx_;
  bool paused_ = false, checkpoint_ = false, checkpoints_ = false;
  redundancy_mode current_ = redundancy_mode::lazy;
  std::optional<redundancy_mode> wanted_;
  std::set<int> live_;
  std::vector<node_order> orders_;
};

} // namespace bamboo
