#include "actors/net/frame_channel.hpp"

#include <caf/all.hpp>

#include "actors/net/frame_session.hpp"
#include "log/log.hpp"

namespace bamboo {

wire_frame sealed_for(const caf::node_id& own, const caf::actor& dest, wire_frame w) {
  if (!dest || dest->node() == own)
    return w;
  if (auto s = session_book::find(own, dest->node()))
    w.seal = s->seal(w.bytes);
  return w;
}

bool before_session(const schema::frame& f) {
  return std::holds_alternative<schema::challenge_request>(f) ||
         std::holds_alternative<schema::join_challenge>(f) ||
         std::holds_alternative<schema::join_request>(f) ||
         std::holds_alternative<schema::observe_request>(f) ||
         std::holds_alternative<schema::join_refused>(f) ||
         std::holds_alternative<schema::frame_rejected>(f);
}

std::optional<opened_frame> open_from(const caf::node_id& own, const caf::node_id& from,
                                      const wire_frame& w, std::size_t limit,
                                      std::string& why) {
  auto check = seal_check::unsealed;
  // A seal this side has no session for (the peer sealed with a session this
  // side already closed, as a fenced worker that joins again has) proves
  // nothing: the frame is judged as an unsealed one, so only a handshake passes.
  if (auto s = w.seal.empty() ? nullptr : session_book::find(own, from)) {
    check = s->open(w.bytes, w.seal);
    if (check != seal_check::ok) {
      why = std::string("unauthenticated: ") + to_string(check);
      return std::nullopt;
    }
  }
  auto d = schema::decode(w.bytes, limit);
  if (!d) {
    why = std::string(schema::to_string(d.error)) + ": " + d.detail;
    return std::nullopt;
  }
  if (check == seal_check::unsealed && !before_session(d.value)) {
    why = std::string("unauthenticated: ") +
          (w.seal.empty() ? "a frame without the session's MAC"
                          : to_string(seal_check::no_session)) +
          " (only a join's handshake may come without one)";
    return std::nullopt;
  }
  return opened_frame{std::move(d.value), d.target};
}

std::optional<opened_frame> open_targeted(caf::local_actor* self, const wire_frame& w,
                                          std::size_t limit, const char* component,
                                          std::string* why) {
  const auto& sender = self->current_sender();
  std::string reason;
  std::optional<opened_frame> f;
  if (!sender)
    reason = "unauthenticated: a frame from an anonymous sender";
  else if (sender->node() == self->node()) {
    if (auto d = schema::decode(w.bytes, limit))
      f = opened_frame{std::move(d.value), d.target};
    else
      reason = std::string(schema::to_string(d.error)) + ": " + d.detail;
  } else
    f = open_from(self->node(), sender->node(), w, limit, reason);
  if (f)
    return f;
  log::get(component)->warn("rejected a frame of {} bytes from {}: {}", w.bytes.size(),
                            caf::to_string(sender), reason);
  if (why)
    *why = reason;
  return std::nullopt;
}

std::optional<schema::frame> open_frame(caf::local_actor* self, const wire_frame& w,
                                        std::size_t limit, const char* component,
                                        std::string* why) {
  auto f = open_targeted(self, w, limit, component, why);
  if (!f)
    return std::nullopt;
  return std::move(f->body);
}

void send_from_this_process(caf::actor_system& sys, const caf::actor& dest,
                            caf::message m) {
  // Spawned with arguments: CAF 0.17 binds a null reference for an actor
  // function without any (UBSan reports it).
  sys.spawn([](caf::event_based_actor* self, const caf::actor& to,
               const caf::message& what) { self->send(to, what); },
            dest, std::move(m));
}

void guard_from_strangers(caf::scheduled_actor* self,
                          std::function<void(const char* what)> dropped) {
  auto local = [self] {
    auto& sender = self->current_sender();
    return sender && sender->node() == self->node();
  };
  self->set_exit_handler([self, local, dropped](caf::exit_msg& m) {
    if (local() || (!self->current_sender() && m.source.node() == self->node()))
      self->quit(std::move(m.reason));
    else
      dropped("an exit message");
  });
  self->set_error_handler([self, local, dropped](caf::error& e) {
    if (local())
      self->quit(std::move(e)); // CAF's default
    else
      dropped("an error message");
  });
  self->set_default_handler(
      [dropped](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
        dropped("a message of a type it does not take");
        return caf::message{};
      });
}

void register_frames(caf::actor_system_config& cfg) {
  cfg.add_message_type<wire_frame>("bamboo::wire_frame");
}

} // namespace bamboo
