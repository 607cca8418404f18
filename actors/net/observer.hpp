// An observer's side of the manager's gateway (bamboo-inspect, and any tool):
// the challenge a worker answers, the manager's proof checked, the token
// proven under the observer's role (it never counts as a node), then snapshots
// of the run on request. Blocking calls with deadlines, for a program's main
// thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>

#include "schema/codec.hpp"

namespace bamboo {

class observer {
public:
  observer(caf::actor_system& sys, caf::actor gateway);
  // errc::invalid_config "refused: ..." (a wrong token, a manager that does
  // not prove it), errc::node_lost when the manager is gone or silent. With
  // an operator token, also proves it: the manager then takes its commands.
  caf::expected<schema::cluster_snapshot> attach(const std::string& token,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string& operator_token = {});
  ~observer();
  caf::expected<schema::cluster_snapshot> snapshot(std::chrono::milliseconds timeout);
  // The manager's answer to an operator's command ("preempt 2").
  caf::expected<schema::command_answer> command(const std::vector<std::string>& words,
                                                std::chrono::milliseconds timeout);

private:
  // The next frame from the gateway, or an error when it is gone or silent.
  caf::expected<schema::frame> next(std::chrono::steady_clock::time_point deadline);
  template <class T>
  caf::expected<T> ask(const schema::frame& ask, std::uint64_t request,
                       std::chrono::milliseconds timeout);
  caf::scoped_actor self_;
  caf::actor gateway_;
  std::uint64_t request_ = 0;
};

} // namespace bamboo
