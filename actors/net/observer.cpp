#include "actors/net/observer.hpp"

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/net/auth.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/frame_session.hpp"

namespace bamboo {

observer::observer(caf::actor_system& sys, caf::actor gateway)
    : self_(sys), gateway_(std::move(gateway)) {
  self_->monitor(gateway_);
}

observer::~observer() {
  session_book::close(self_->home_system().node(), gateway_->node());
}

caf::expected<schema::frame>
observer::next(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return make_error(errc::node_lost, "the manager did not answer in time");
    std::optional<caf::expected<schema::frame>> out;
    self_->receive(
        [&](const wire_frame& w) {
          // Only the gateway's frames, sealed with this observer's session.
          const auto& sender = self_->current_sender();
          std::string why;
          if (!sender || sender->node() != gateway_->node())
            return;
          if (auto f = open_from(self_->home_system().node(), sender->node(), w,
                                 schema::default_frame_limit, why))
            out = caf::expected<schema::frame>{std::move(f->body)};
        },
        [&](const caf::down_msg&) {
          out = caf::expected<schema::frame>{
              make_error(errc::node_lost, "the manager is gone (its connection closed)")};
        },
        caf::after(left) >> [] {});
    if (out)
      return *out;
  }
}

caf::expected<schema::cluster_snapshot>
observer::attach(const std::string& token, std::chrono::milliseconds timeout,
                 const std::string& operator_token) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  handshake h{make_nonce(),
              {},
              caf::to_string(self_->home_system().node()),
              caf::to_string(gateway_->node())};
  self_->send(gateway_, to_wire(schema::challenge_request{0xffffffffu, h.worker_nonce,
                                                          h.worker_id}));
  for (;;) {
    auto f = next(deadline);
    if (!f)
      return f.error();
    if (auto* refused = std::get_if<schema::join_refused>(&*f))
      return make_error(errc::invalid_config, "refused: " + refused->reason);
    if (auto* c = std::get_if<schema::join_challenge>(&*f)) {
      h.manager_nonce = c->nonce;
      if (auto why = refuse_manager(token, h, c->identity, c->proof))
        return make_error(errc::invalid_config, "refused the manager: " + *why);
      schema::observe_request o{prove(token, proof_role::observer, h), {}};
      if (!operator_token.empty())
        o.operator_proof = prove(operator_token, proof_role::operator_, h);
      const auto own = self_->home_system().node();
      send_frame(&*self_, gateway_, o); // before the session: it carries its proofs
      session_book::open(own, gateway_->node(), session_key(token, h));
    } else if (auto* s = std::get_if<schema::cluster_snapshot>(&*f))
      return *s;
  }
}

// Sends `ask` and waits for the answer of type T carrying its request number.
template <class T>
caf::expected<T> observer::ask(const schema::frame& ask, std::uint64_t request,
                               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  send_frame(&*self_, gateway_, ask);
  for (;;) {
    auto f = next(deadline);
    if (!f)
      return f.error();
    if (auto* a = std::get_if<T>(&*f); a && a->request == request)
      return *a;
    if (auto* refused = std::get_if<schema::join_refused>(&*f))
      return make_error(errc::invalid_config, "refused: " + refused->reason);
  }
}

caf::expected<schema::cluster_snapshot>
observer::snapshot(std::chrono::milliseconds timeout) {
  const auto request = ++request_;
  return ask<schema::cluster_snapshot>(schema::snapshot_request{request}, request,
                                       timeout);
}

caf::expected<schema::command_answer>
observer::command(const std::vector<std::string>& words,
                  std::chrono::milliseconds timeout) {
  const auto request = ++request_;
  return ask<schema::command_answer>(schema::command{request, words}, request, timeout);
}

} // namespace bamboo
