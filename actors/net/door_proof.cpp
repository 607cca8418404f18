#include "actors/net/door_proof.hpp"

#include <algorithm>
#include <cstring>

#include <caf/node_id.hpp>

#include "actors/net/auth.hpp"

namespace bamboo {

namespace {

// Distinct magics: a greeting replayed as a hello is no hello.
constexpr char greeting_magic[door_magic_bytes + 1] = "BMBDOOR1";
constexpr char hello_magic[door_magic_bytes + 1] = "BMBHELO1";

// The proofs are those of the join (actors/net/auth.hpp) under roles of their
// own, over the door's values.
handshake values(const std::vector<std::uint8_t>& door_nonce, const door_hello& h) {
  return {h.nonce, door_nonce, h.node, "bamboo-door"};
}

bool magic_is(const std::uint8_t* bytes, const char* magic) {
  return std::memcmp(bytes, magic, door_magic_bytes) == 0;
}

} // namespace

std::vector<std::uint8_t> door_greeting(const std::vector<std::uint8_t>& door_nonce) {
  std::vector<std::uint8_t> out(greeting_magic, greeting_magic + door_magic_bytes);
  out.insert(out.end(), door_nonce.begin(), door_nonce.end());
  return out;
}

std::optional<std::vector<std::uint8_t>> read_door_greeting(const std::uint8_t* bytes,
                                                            std::size_t n) {
  if (n != door_greeting_bytes || !magic_is(bytes, greeting_magic))
    return std::nullopt;
  return std::vector<std::uint8_t>(bytes + door_magic_bytes, bytes + n);
}

std::vector<std::uint8_t> door_hello_bytes(const std::string& token,
                                           const std::vector<std::uint8_t>& door_nonce,
                                           const std::vector<std::uint8_t>& client_nonce,
                                           const std::string& node) {
  door_hello h{client_nonce, node, {}};
  h.proof = prove(token, proof_role::door_client, values(door_nonce, h));
  std::vector<std::uint8_t> out(hello_magic, hello_magic + door_magic_bytes);
  out.insert(out.end(), client_nonce.begin(), client_nonce.end());
  out.push_back(static_cast<std::uint8_t>(node.size()));
  out.insert(out.end(), node.begin(), node.end());
  out.insert(out.end(), h.proof.begin(), h.proof.end());
  return out;
}

std::size_t door_hello_reader::wanted() const {
  if (!why_.empty())
    return 0;
  return (total_ > 0 ? total_ : door_hello_head) - in_.size();
}

bool door_hello_reader::feed(const std::uint8_t* bytes, std::size_t n) {
  if (n > wanted())
    return why_ = "more bytes than a hello has", false;
  in_.insert(in_.end(), bytes, bytes + n);
  if (in_.size() >= door_magic_bytes && !magic_is(in_.data(), hello_magic))
    return why_ = "no proof of the cluster token (not a bamboo client, or one older "
                  "than the door)",
           false;
  if (total_ == 0 && in_.size() == door_hello_head) {
    const std::size_t id = in_.back();
    if (id == 0 || id > door_max_node_id)
      return why_ = "a node id of " + std::to_string(id) + " bytes", false;
    total_ = door_hello_head + id + door_proof_bytes;
  }
  return true;
}

door_hello door_hello_reader::hello() const {
  door_hello h;
  if (!complete())
    return h;
  const auto* p = in_.data() + door_magic_bytes;
  h.nonce.assign(p, p + nonce_bytes);
  const std::size_t id = in_[door_hello_head - 1];
  p = in_.data() + door_hello_head;
  h.node.assign(reinterpret_cast<const char*>(p), id);
  h.proof.assign(p + id, p + id + door_proof_bytes);
  return h;
}

bool canonical_node_id(const std::string& text) {
  const auto hash = text.find('#');
  if (hash != 40 || text.size() < 42 || text.size() > 51)
    return false;
  const auto pid = text.substr(hash + 1);
  if (pid.find_first_not_of("0123456789") != std::string::npos ||
      (pid.size() > 1 && pid[0] == '0'))
    return false;
  const auto n = std::stoull(pid);
  if (n > 0xffffffffull)
    return false;
  auto node = caf::make_node_id(static_cast<std::uint32_t>(n), text.substr(0, hash));
  return node && caf::to_string(*node) == text;
}

bool check_door_hello(const std::string& token,
                      const std::vector<std::uint8_t>& door_nonce, const door_hello& h) {
  return h.nonce.size() == nonce_bytes &&
         check_proof(token, proof_role::door_client, values(door_nonce, h), h.proof);
}

std::vector<std::uint8_t> door_answer(const std::string& token,
                                      const std::vector<std::uint8_t>& door_nonce,
                                      const door_hello& h) {
  return prove(token, proof_role::door_server, values(door_nonce, h));
}

bool check_door_answer(const std::string& token,
                       const std::vector<std::uint8_t>& door_nonce, const door_hello& h,
                       const std::vector<std::uint8_t>& answer) {
  return check_proof(token, proof_role::door_server, values(door_nonce, h), answer);
}

} // namespace bamboo
