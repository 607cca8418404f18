// Where a manager's nodes live. Embedded mode has them as actors of this
// process (actors/embedded_cluster); across processes they are worker
// processes behind proxies (actors/net/cluster_runner). The manager's code is
// the same for both: only this interface differs.
#pragma once

#include <cstdint>
#include <string>

#include <caf/fwd.hpp>

#include "actors/node.hpp"

namespace bamboo {

enum class shadow_source {
  clone, // in memory, from the owner's executor
  copy,  // through the tensor transport, checked by digest
};

class node_backend {
public:
  virtual ~node_backend() = default;
  // The node's actors, monitored by the manager.
  virtual node_handles spawn(caf::local_actor* manager, const node_assignment& a) = 0;
  // How shadows get their owners' gradients (the manager sends a shadow the
  // commit too when they come through the transport).
  virtual shadow_sync sync() const = 0;
  // Ends generation `gen`: every transfer of it fails now, not at a timeout.
  virtual void end_generation(std::uint64_t gen, const std::string& reason) = 0;
  // The node's name in records (a worker process's member number).
  virtual int node_id(int node) const { return node; }
  // How a stage left without a shadow gets a new one at a step boundary.
  virtual shadow_source reshadowing() const = 0;
  // shadow_source::clone: a new shadow on `node`'s group from its owner's
  // exact state (a clone in memory).
  virtual stage_actor add_shadow(caf::local_actor* manager, int node,
                                 std::shared_ptr<node_group> group,
                                 const replica_handle& replica) = 0;
  // shadow_source::copy: a new, empty shadow of `stage` on `node`; it loads
  // its owner's state when both are sent (copy_atom, gen, k).
  virtual stage_actor add_empty_shadow(caf::local_actor* manager, int node,
                                       int stage) = 0;
};

} // namespace bamboo
