#include "actors/net/inspect_endpoint.hpp"

#include <caf/all.hpp>

#include "actors/actor_board.hpp"
#include "actors/errors.hpp"
#include "actors/net/gateway.hpp"
#include "actors/net/inspect_board.hpp"
#include "actors/net/network.hpp"
#include "actors/run_controls.hpp"
#include "log/log.hpp"

namespace bamboo {

void inspect_endpoint::close() const {
  if (gateway)
    caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
}

caf::expected<inspect_endpoint>
open_inspect_endpoint(caf::actor_system& sys, const inspect_options& opts,
                      const heartbeat_policy& heartbeats) {
  inspect_endpoint e;
  e.board = std::make_shared<inspect_board>();
  e.controls = std::make_shared<run_controls>();
  e.actors = actor_board::make();
  gateway_spec gs;
  gs.token = opts.token;
  gs.operator_token = opts.operator_token;
  gs.heartbeats = heartbeats;
  gs.board = e.board;
  gs.controls = e.controls;
  gs.actors = e.actors;
  gs.observers_only = true;
  e.gateway = spawn_gateway(sys, gs);
  auto bound = publish_gateway(sys, e.gateway, opts.port, opts.bind, opts.token);
  if (!bound) {
    e.close();
    return make_error(errc::transport_failure,
                      "--inspect-port: cannot listen on " + opts.bind + ":" +
                          std::to_string(opts.port) + ": " + sys.render(bound.error()));
  }
  log::get("bamboo.gateway")
      ->info("observers (bamboo-inspect) may attach at {}:{}", opts.bind, *bound);
  if (opts.on_listening)
    opts.on_listening(*bound);
  return e;
}

} // namespace bamboo
