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
  // A new shadow on `node`'s group, from its owner's exact state (a clone);
  // invalid when this backend cannot make one.
  virtual stage_actor add_shadow(caf::local_actor* manager, int node,
                                 std::shared_ptr<node_group> group,
                                 const replica_handle& replica) = 0;
  // Whether add_shadow can succeed: the manager asks owners for clones only then.
  virtual bool can_reshadow() const = 0;
};

} // namespace bamboo
