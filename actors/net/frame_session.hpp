// A MAC on every control frame between two joined processes. The join's
// challenge-response gives both sides a session key (actors/net/auth.hpp) that
// nobody without the cluster token can compute; from then on each frame carries
// a counter and HMAC-SHA256(key, sender, receiver, counter, frame), checked
// before the frame is decoded. The counter is taken when a frame is sealed, and
// frames from several actors of a process may reach the wire in another order:
// a window of recent counters (as IPsec's) refuses replays without needing order.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

namespace bamboo {

inline constexpr std::size_t session_mac_bytes = 32;
inline constexpr std::size_t seal_bytes = 8 + session_mac_bytes; // counter, MAC
inline constexpr std::size_t replay_window = 1024;

enum class seal_check { ok, unsealed, no_session, malformed, bad_mac, replayed, too_old };
const char* to_string(seal_check c);

class frame_session {
public:
  // `own_id` and `peer_id` name the two sides (their CAF node ids): a frame
  // sealed for one direction does not open in the other.
  frame_session(std::vector<std::uint8_t> key, std::string own_id, std::string peer_id);

  // The seal of a frame this side sends: the next counter and its MAC.
  std::vector<std::uint8_t> seal(const std::vector<std::uint8_t>& frame);
  // Whether a frame the peer sent opens: a valid MAC over a counter not seen
  // before (and not older than the window). Only a valid one moves the window.
  seal_check open(const std::vector<std::uint8_t>& frame,
                  const std::vector<std::uint8_t>& seal);

private:
  std::vector<std::uint8_t> mac(const std::string& from, const std::string& to,
                                std::uint64_t counter,
                                const std::vector<std::uint8_t>& frame) const;

  const std::vector<std::uint8_t> key_;
  const std::string own_, peer_;
  std::mutex mutex_;
  std::uint64_t sent_ = 0;
  std::uint64_t highest_ = 0;       // the highest counter received
  std::bitset<replay_window> seen_; // bit d: counter highest_ - d was received
};

// This process's sessions, by (own node, peer node): the gateway opens one at
// a join or an observer's attach, a worker or observer when it proves the
// token. Thread-safe: every actor that sends or receives frames uses it.
namespace session_book {
std::shared_ptr<frame_session> open(const caf::node_id& own, const caf::node_id& peer,
                                    std::vector<std::uint8_t> key);
std::shared_ptr<frame_session> find(const caf::node_id& own, const caf::node_id& peer);
// Closes the session with `peer`, if it is still `which` (a later join may
// have replaced it); null: whichever it is.
void close(const caf::node_id& own, const caf::node_id& peer,
           const frame_session* which = nullptr);
std::size_t size();
} // namespace session_book

} // namespace bamboo
