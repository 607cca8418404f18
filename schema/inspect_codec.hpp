// The inspector's frames to and from Cap'n Proto, for codec.cpp (the snapshot
// is the largest struct on the wire; it keeps codec.cpp to the training frames).
#pragma once

#include "control.capnp.h"
#include "schema/codec.hpp"

namespace bamboo::schema {

void put_snapshot(wire::ClusterSnapshot::Builder b, const cluster_snapshot& x);
cluster_snapshot get_snapshot(wire::ClusterSnapshot::Reader r);

} // namespace bamboo::schema
