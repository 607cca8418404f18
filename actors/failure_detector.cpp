#include "actors/failure_detector.hpp"

#include <caf/all.hpp>

#include "actors/actor_board.hpp"
#include "actors/protocol.hpp"

namespace bamboo {

namespace {

struct detector_state {
  static inline const char* name = "bamboo.detector";
  actor_board::entry row;
  std::uint64_t beats = 0;
};

caf::behavior detector_actor(caf::stateful_actor<detector_state>* self, int node,
                             caf::actor target, std::chrono::milliseconds period,
                             std::shared_ptr<actor_board> actors) {
  if (actors)
    self->state.row = actors->enter("detector", node, -1, "beating");
  auto beat = [=] {
    auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    self->send(target, schema::heartbeat{static_cast<std::uint32_t>(node),
                                         0,
                                         0,
                                         static_cast<std::int64_t>(now.count()),
                                         {}});
    self->state.row.set("beating", "heartbeat " + std::to_string(++self->state.beats),
                        self->mailbox().size());
    self->delayed_send(self, period, tick_atom::value);
  };
  beat();
  return {[=](tick_atom) { beat(); }};
}

} // namespace

caf::actor spawn_failure_detector(caf::local_actor* parent, int node, caf::actor target,
                                  std::chrono::milliseconds period,
                                  std::shared_ptr<actor_board> actors) {
  return parent->spawn<caf::monitored>(detector_actor, node, std::move(target), period,
                                       std::move(actors));
}

} // namespace bamboo
