// The first bytes on the manager's port, before a byte of CAF's protocol: the
// door greets with its nonce; the client answers with a nonce of its own, the
// CAF node id it will shake hands as, and HMAC-SHA256(token, both nonces and
// that id); the door answers with its own proof over the same values, so the
// client knows the manager holds the token before CAF speaks. A stranger
// without the token never reaches CAF, and a token holder's connection is
// bound to the node id it proved (actors/net/front_door.hpp holds CAF's
// handshake to it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/net/auth.hpp"

namespace bamboo {

inline constexpr std::size_t door_magic_bytes = 8;
inline constexpr std::size_t door_proof_bytes = 32; // HMAC-SHA256
// A CAF node id as text: 40 hex digits of host hash, '#', a pid.
inline constexpr std::size_t door_max_node_id = 64;
inline constexpr std::size_t door_greeting_bytes = door_magic_bytes + nonce_bytes;
// The hello's fixed head (magic, nonce, the node id's length), then the node
// id and the proof.
inline constexpr std::size_t door_hello_head = door_magic_bytes + nonce_bytes + 1;

std::vector<std::uint8_t> door_greeting(const std::vector<std::uint8_t>& door_nonce);
// The door's nonce, or nullopt when the bytes are no door's greeting.
std::optional<std::vector<std::uint8_t>> read_door_greeting(const std::uint8_t* bytes,
                                                            std::size_t n);

struct door_hello {
  std::vector<std::uint8_t> nonce;
  std::string node;
  std::vector<std::uint8_t> proof;
};

// The client's hello, its proof computed with `token`.
std::vector<std::uint8_t> door_hello_bytes(const std::string& token,
                                           const std::vector<std::uint8_t>& door_nonce,
                                           const std::vector<std::uint8_t>& client_nonce,
                                           const std::string& node);

// Reading a hello as its bytes come: how many bytes it has in all once its
// head is in (0: not known yet, or not a hello: see `why`).
class door_hello_reader {
public:
  // The bytes the next read may take (never past the hello's end).
  std::size_t wanted() const;
  // Takes n bytes (at most wanted()); false when they cannot be a hello.
  bool feed(const std::uint8_t* bytes, std::size_t n);
  bool complete() const { return total_ > 0 && in_.size() == total_; }
  door_hello hello() const;
  const std::string& why() const { return why_; }
  std::size_t size() const { return in_.size(); }

private:
  std::vector<std::uint8_t> in_;
  std::size_t total_ = 0;
  std::string why_;
};

// Whether `text` is a CAF node id exactly as CAF writes one (40 hex digits
// of host hash, '#', the process id): one spelling per node, nothing that
// could forge a log line.
bool canonical_node_id(const std::string& text);

bool check_door_hello(const std::string& token,
                      const std::vector<std::uint8_t>& door_nonce, const door_hello& h);
// The door's answer: its proof over the hello it checked.
std::vector<std::uint8_t> door_answer(const std::string& token,
                                      const std::vector<std::uint8_t>& door_nonce,
                                      const door_hello& h);
bool check_door_answer(const std::string& token,
                       const std::vector<std::uint8_t>& door_nonce, const door_hello& h,
                       const std::vector<std::uint8_t>& answer);

} // namespace bamboo
