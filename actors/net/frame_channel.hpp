// Control frames between processes: every message that crosses a process
// boundary is a Cap'n Proto frame from schema/, carried by CAF as opaque bytes
// and decoded here, in one place. A frame that is too large, of an unknown
// major version, or not decodable is logged and answered with frame_rejected;
// the receiver goes on.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>

#include "schema/codec.hpp"

namespace bamboo {

// `seal`: empty, or the counter and MAC of the session between the two
// processes (actors/net/frame_session.hpp). Frames between actors of one
// process carry none.
struct wire_frame {
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint8_t> seal;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_frame& x) {
  return f(caf::meta::type_name("wire_frame"), x.bytes, x.seal);
}

inline wire_frame to_wire(const schema::frame& f,
                          schema::target to = schema::target::none) {
  return {schema::encode(f, to), {}};
}

// A decoded frame and the actor it is for.
struct opened_frame {
  schema::frame body;
  schema::target target = schema::target::none;
};

// `w` as `dest` must receive it: sealed with the session of dest's node when
// dest lives in another process (this process, `own`, has one with it once
// the join is proven); else unchanged.
wire_frame sealed_for(const caf::node_id& own, const caf::actor& dest, wire_frame w);

// Sends a frame to `dest`, sealed where it crosses a process boundary.
template <class Self>
void send_frame(Self* self, const caf::actor& dest, const schema::frame& f,
                schema::target to = schema::target::none) {
  self->send(dest, sealed_for(self->node(), dest, to_wire(f, to)));
}

// The frames a peer sends before it has a session: the join's and the
// observer's handshake, and the refusals of a join.
bool before_session(const schema::frame& f);

// Decodes a frame that `from` (a node of another process) sent to this
// process (`own`), for a receiver that is not an actor: its seal is checked
// first, and frames without one are taken only before_session. `why` says
// what was wrong.
std::optional<opened_frame> open_from(const caf::node_id& own, const caf::node_id& from,
                                      const wire_frame& w, std::size_t limit,
                                      std::string& why);

// Decodes like open_frame and also says which actor the frame is for.
std::optional<opened_frame> open_targeted(caf::local_actor* self, const wire_frame& w,
                                          std::size_t limit, const char* component,
                                          std::string* why = nullptr);

// Decodes the frame the current message carries, after checking its seal
// when the sender is in another process (open_from); on failure logs the
// reason and the sender and returns nullopt (the caller may answer with frame_rejected,
// once per peer, so that two incompatible peers never bounce rejections).
std::optional<schema::frame> open_frame(caf::local_actor* self, const wire_frame& w,
                                        std::size_t limit, const char* component,
                                        std::string* why = nullptr);

void register_frames(caf::actor_system_config& cfg);

// For an actor that peers can address: exit and error messages and messages
// it has no handler for are dropped unless they come from an actor of this
// process (`dropped` is called with what it was, to log it once per peer); an
// exit from this process ends the actor as CAF's default would. The front door
// keeps them off the wire already; this holds behind TLS too (except CAF's
// untrappable `kill`, which only the front door stops).
void guard_from_strangers(caf::scheduled_actor* self,
                          std::function<void(const char* what)> dropped);

// Sends `m` as an actor of this process where none is at hand (a functor run as
// an actor ends, a backend without an actor): receivers take messages other
// than frames only from actors of their own process, and an anonymous one
// could as well come from a peer.
void send_from_this_process(caf::actor_system& sys, const caf::actor& dest,
                            caf::message m);

} // namespace bamboo
