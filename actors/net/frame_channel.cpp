#include "actors/net/frame_channel.hpp"

#include <caf/all.hpp>

#include "log/log.hpp"

namespace bamboo {

std::optional<opened_frame> open_targeted(caf::local_actor* self, const wire_frame& w,
                                          std::size_t limit, const char* component,
                                          std::string* why) {
  auto d = schema::decode(w.bytes, limit);
  if (d)
    return opened_frame{std::move(d.value), d.target};
  log::get(component)->warn("rejected a frame of {} bytes from {}: {} ({})",
                            w.bytes.size(), caf::to_string(self->current_sender()),
                            schema::to_string(d.error), d.detail);
  if (why)
    *why = std::string(schema::to_string(d.error)) + ": " + d.detail;
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
