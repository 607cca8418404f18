// The inspector's frames (and the orders its commands become) to and from
// Cap'n Proto, for codec.cpp, which keeps to the training frames.
#pragma once

#include "control.capnp.h"
#include "schema/codec.hpp"

namespace bamboo::schema {

void put_actor_rows(capnp::List<wire::ActorRow>::Builder b,
                    const std::vector<actor_row>& rows);
std::vector<actor_row> get_actor_rows(capnp::List<wire::ActorRow>::Reader r);
void put_snapshot(wire::ClusterSnapshot::Builder b, const cluster_snapshot& x);
cluster_snapshot get_snapshot(wire::ClusterSnapshot::Reader r);
void put_command(wire::Command::Builder b, const command& x);
command get_command(wire::Command::Reader r);
void put_command_answer(wire::CommandAnswer::Builder b, const command_answer& x);
command_answer get_command_answer(wire::CommandAnswer::Reader r);
void put_order(wire::Order::Builder b, const order& x);
order get_order(wire::Order::Reader r);

} // namespace bamboo::schema
