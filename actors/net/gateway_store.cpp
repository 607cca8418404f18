// The gateway's rendezvous store for members' tensor transports.
#include "actors/net/gateway_state.hpp"

namespace bamboo {

void gateway_state::handle(const schema::store_request& r) {
  auto sender = self_->current_sender();
  if (!members_.count(sender))
    return stranger("a store request");
  if (auto reply = store_.apply(r)) {
    reply_to(sender, *reply);
    if (reply->error.empty() && changes(r.op))
      answer_waiters();
    return;
  }
  if (waiters_.size() >= max_strangers) {
    reply_to(sender, schema::store_reply{r.request, {}, 0, "too many waiting requests"});
    return;
  }
  const auto timeout = std::chrono::milliseconds(r.timeout_ms);
  waiters_.push_back({sender, r, clock_type::now() + timeout});
}

bool gateway_state::changes(schema::store_op op) {
  return op == schema::store_op::set || op == schema::store_op::add ||
         op == schema::store_op::compare_set;
}

void gateway_state::reply_to(const peer& p, const schema::store_reply& r) {
  send_frame(self_, caf::actor_cast<caf::actor>(p), r);
}

void gateway_state::answer_waiters() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (auto reply = store_.apply(it->request)) {
      reply_to(it->who, *reply);
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void gateway_state::expire_waiters(clock_type::time_point now) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    const bool gone = !members_.count(it->who);
    if (gone || now >= it->deadline) {
      if (!gone)
        reply_to(it->who, schema::store_reply{it->request.request, {}, 0, "timeout"});
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

} // namespace bamboo
