#include "actors/net/control_store.hpp"

#include <stdexcept>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/protocol.hpp"

namespace bamboo {

namespace {

// One round trip through the agent: the reply, or a runtime_error that names
// the operation (c10d's stores throw, and Gloo's rendezvous reports it).
schema::store_reply call(const caf::actor& agent, schema::store_request r,
                         std::chrono::milliseconds waits = {}) {
  caf::scoped_actor self{agent.home_system()};
  std::optional<schema::store_reply> out;
  std::string error;
  self->request(agent, waits + store_reply_timeout, store_atom::value, to_wire(r))
      .receive(
          [&](const wire_frame& w) {
            auto d = schema::decode(w.bytes);
            if (d && std::holds_alternative<schema::store_reply>(d.value))
              out = std::get<schema::store_reply>(std::move(d.value));
            else
              error = "an unreadable reply";
          },
          [&](caf::error& e) { error = describe(e); });
  if (out && out->error.empty())
    return *out;
  const auto key = r.keys.empty() ? std::string() : " '" + r.keys.front() + "'";
  throw std::runtime_error("rendezvous store" + key + ": " + (out ? out->error : error));
}

schema::store_request request(schema::store_op op, std::vector<std::string> keys) {
  schema::store_request r;
  r.op = op;
  r.keys = std::move(keys);
  return r;
}

std::uint32_t millis(std::chrono::milliseconds t) {
  return static_cast<std::uint32_t>(std::max<std::int64_t>(0, t.count()));
}

} // namespace

void control_store::set(const std::string& key, const std::vector<std::uint8_t>& value) {
  auto r = request(schema::store_op::set, {key});
  r.value = value;
  call(agent_, std::move(r));
}

std::vector<std::uint8_t> control_store::get(const std::string& key,
                                             std::chrono::milliseconds timeout) {
  auto r = request(schema::store_op::get, {key});
  r.timeout_ms = millis(timeout);
  return call(agent_, std::move(r), timeout).value;
}

std::int64_t control_store::add(const std::string& key, std::int64_t delta) {
  auto r = request(schema::store_op::add, {key});
  r.delta = delta;
  return call(agent_, std::move(r)).number;
}

std::vector<std::uint8_t>
control_store::compare_set(const std::string& key,
                           const std::vector<std::uint8_t>& expected,
                           const std::vector<std::uint8_t>& desired) {
  auto r = request(schema::store_op::compare_set, {key});
  r.expected = expected;
  r.value = desired;
  return call(agent_, std::move(r)).value;
}

bool control_store::remove(const std::string& key) {
  return call(agent_, request(schema::store_op::remove, {key})).number != 0;
}

bool control_store::check(const std::vector<std::string>& keys) {
  return call(agent_, request(schema::store_op::check, keys)).number != 0;
}

std::int64_t control_store::num_keys() {
  return call(agent_, request(schema::store_op::num_keys, {})).number;
}

void control_store::wait(const std::vector<std::string>& keys,
                         std::chrono::milliseconds timeout) {
  auto r = request(schema::store_op::wait, keys);
  r.timeout_ms = millis(timeout);
  call(agent_, std::move(r), timeout);
}

} // namespace bamboo
