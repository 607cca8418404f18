// Joining a cluster proves the cluster token both ways without sending it.
// The worker sends a fresh nonce and its identity; the manager answers with its
// own nonce, its identity and HMAC-SHA256(token, "bamboo-manager" + the
// handshake); the worker checks it and answers HMAC-SHA256(token, "bamboo-worker"
// + the handshake). An identity is the CAF node id that the other side sees the
// sender as: a peer that relays the handshake between the two has another node
// id, so neither proof checks out for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bamboo {

inline constexpr std::size_t nonce_bytes = 32;
// Shorter tokens are refused: a guessable token makes every proof worthless.
inline constexpr std::size_t min_token_bytes = 16;

struct handshake {
  std::vector<std::uint8_t> worker_nonce, manager_nonce;
  std::string worker_id, manager_id;
};

// An observer (bamboo-inspect) proves the token as a worker does, under its
// own role: its proof cannot join as a node. An operator proves, over the same
// handshake, a second token (the operator token) that commands need. The
// session key that seals later frames (actors/net/frame_session.hpp) is one
// more value of the handshake that only holders of the token can compute.
// The door's roles prove the token on a connection before CAF's protocol
// (actors/net/door_proof.hpp).
enum class proof_role {
  manager,
  worker,
  observer,
  operator_,
  session,
  door_client,
  door_server
};

std::vector<std::uint8_t> make_nonce();
std::vector<std::uint8_t> prove(const std::string& token, proof_role role,
                                const handshake& h);
inline std::vector<std::uint8_t> session_key(const std::string& token,
                                             const handshake& h) {
  return prove(token, proof_role::session, h);
}
// Constant-time comparison of the expected proof with the given one.
bool check_proof(const std::string& token, proof_role role, const handshake& h,
                 const std::vector<std::uint8_t>& proof);

// The worker's check of the manager's answer (h with the manager's nonce):
// why the manager is refused, or nullopt when it answers as the node `h` names
// and proves the token over the handshake.
std::optional<std::string> refuse_manager(const std::string& token, const handshake& h,
                                          const std::string& answered_as,
                                          const std::vector<std::uint8_t>& proof);

// The token from a file (first line, a trailing \r dropped) if given, else
// $BAMBOO_TOKEN. Refused, nullopt and `error` set: a file that group or others
// can read (as ssh refuses such keys), and a token shorter than min_token_bytes.
std::optional<std::string> load_token(const std::string& file, std::string& error);

// The operator token, from a file (as load_token) if given, else
// $BAMBOO_OPERATOR_TOKEN; nullopt with `error` empty when neither is set.
std::optional<std::string> load_operator_token(const std::string& file,
                                               std::string& error);

} // namespace bamboo
