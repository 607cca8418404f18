// The session MAC on control frames, as plain objects: what opens, and what
// a forger, a replayer or a reflector gets.
#include <catch2/catch.hpp>

#include <caf/node_id.hpp>

#include "actors/net/auth.hpp"
#include "actors/net/frame_session.hpp"

using namespace bamboo;

namespace {

const std::string manager_id = "manager-node", worker_id = "worker-node";

handshake some_handshake() {
  return {make_nonce(), make_nonce(), worker_id, manager_id};
}

struct pair_of_sessions {
  handshake h = some_handshake();
  std::string token = "a cluster token of 32 bytes here";
  frame_session manager{session_key(token, h), manager_id, worker_id};
  frame_session worker{session_key(token, h), worker_id, manager_id};
};

const std::vector<std::uint8_t> frame{1, 2, 3, 4, 5, 6, 7, 8};

} // namespace

TEST_CASE("a sealed frame opens on the other side once - and a replay, an altered "
          "byte, a reflection or another key is refused",
          "[actors]") {
  pair_of_sessions s;
  auto seal = s.worker.seal(frame);
  REQUIRE(seal.size() == seal_bytes);
  CHECK(s.manager.open(frame, seal) == seal_check::ok);
  CHECK(s.manager.open(frame, seal) == seal_check::replayed);

  auto next = s.worker.seal(frame);
  auto altered = frame;
  altered[3] ^= 1;
  CHECK(s.manager.open(altered, next) == seal_check::bad_mac);
  auto bad_counter = next;
  bad_counter[0] ^= 1; // the counter is covered by the MAC too
  CHECK(s.manager.open(frame, bad_counter) == seal_check::bad_mac);
  CHECK(s.manager.open(frame, next) == seal_check::ok); // the refusals moved nothing

  // Sent back to its sender (a reflection), a frame does not open.
  auto mine = s.manager.seal(frame);
  CHECK(s.manager.open(frame, mine) == seal_check::bad_mac);
  CHECK(s.worker.open(frame, mine) == seal_check::ok);

  // Another join's key (another handshake, or the token under another role).
  frame_session other{session_key(s.token, some_handshake()), manager_id, worker_id};
  CHECK(other.open(frame, s.worker.seal(frame)) == seal_check::bad_mac);
  frame_session by_proof{prove(s.token, proof_role::worker, s.h), manager_id, worker_id};
  CHECK(by_proof.open(frame, s.worker.seal(frame)) == seal_check::bad_mac);

  CHECK(s.manager.open(frame, {}) == seal_check::unsealed);
  CHECK(s.manager.open(frame, std::vector<std::uint8_t>(seal_bytes - 1)) ==
        seal_check::malformed);
}

TEST_CASE("frames that arrive out of order within the replay window open - and one "
          "older than the window is refused",
          "[actors]") {
  pair_of_sessions s;
  std::vector<std::vector<std::uint8_t>> seals;
  for (std::size_t i = 0; i < replay_window + 10; ++i)
    seals.push_back(s.worker.seal(frame));
  // The newest first, then back through the window.
  CHECK(s.manager.open(frame, seals.back()) == seal_check::ok);
  for (std::size_t i = seals.size() - 2; i >= seals.size() - replay_window; --i)
    CHECK(s.manager.open(frame, seals[i]) == seal_check::ok);
  CHECK(s.manager.open(frame, seals[seals.size() - 5]) == seal_check::replayed);
  CHECK(s.manager.open(frame, seals[0]) == seal_check::too_old);
}

TEST_CASE("the session book keeps one session per pair of nodes - and a close names "
          "the session it means",
          "[actors]") {
  const caf::node_id a =
      *caf::make_node_id(1, "0102030405060708090a0b0c0d0e0f1011121314");
  const caf::node_id b =
      *caf::make_node_id(2, "1102030405060708090a0b0c0d0e0f1011121314");
  const auto before = session_book::size();
  auto first = session_book::open(a, b, std::vector<std::uint8_t>(32, 1));
  CHECK(session_book::find(a, b) == first);
  CHECK(session_book::find(b, a) == nullptr);
  auto second = session_book::open(a, b, std::vector<std::uint8_t>(32, 2));
  session_book::close(a, b, first.get()); // replaced already: stays
  CHECK(session_book::find(a, b) == second);
  session_book::close(a, b, second.get());
  CHECK(session_book::find(a, b) == nullptr);
  CHECK(session_book::size() == before);
}
