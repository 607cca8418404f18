#include "actors/net/frame_session.hpp"

#include <map>
#include <utility>

#include <caf/node_id.hpp>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

namespace bamboo {

const char* to_string(seal_check c) {
  switch (c) {
  case seal_check::ok: return "ok";
  case seal_check::unsealed: return "no MAC";
  case seal_check::no_session: return "a MAC, but no session with its sender";
  case seal_check::malformed: return "a malformed MAC";
  case seal_check::bad_mac: return "a wrong MAC (forged or altered)";
  case seal_check::replayed: return "a counter seen before (a replay)";
  case seal_check::too_old: return "a counter older than the replay window";
  }
  return "?";
}

frame_session::frame_session(std::vector<std::uint8_t> key, std::string own_id,
                             std::string peer_id)
    : key_(std::move(key)), own_(std::move(own_id)), peer_(std::move(peer_id)) {}

namespace {

void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::uint64_t get_u64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

} // namespace

std::vector<std::uint8_t>
frame_session::mac(const std::string& from, const std::string& to, std::uint64_t counter,
                   const std::vector<std::uint8_t>& frame) const {
  // Length-prefixed names, so that no two (from, to) pairs share a message.
  std::vector<std::uint8_t> head;
  for (const auto* s : {&from, &to}) {
    put_u64(head, s->size());
    head.insert(head.end(), s->begin(), s->end());
  }
  put_u64(head, counter);
  put_u64(head, frame.size());
  // The HMAC fetched once (OpenSSL 3's provider lookup is not free).
  static EVP_MAC* const hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                               OSSL_PARAM_construct_end()};
  std::vector<std::uint8_t> out(EVP_MAX_MD_SIZE);
  std::size_t len = 0;
  EVP_MAC_CTX* ctx = hmac ? EVP_MAC_CTX_new(hmac) : nullptr;
  const bool fine = ctx && EVP_MAC_init(ctx, key_.data(), key_.size(), params) == 1 &&
                    EVP_MAC_update(ctx, head.data(), head.size()) == 1 &&
                    EVP_MAC_update(ctx, frame.data(), frame.size()) == 1 &&
                    EVP_MAC_final(ctx, out.data(), &len, out.size()) == 1;
  EVP_MAC_CTX_free(ctx);
  out.resize(fine ? len : 0);
  return out;
}

std::vector<std::uint8_t> frame_session::seal(const std::vector<std::uint8_t>& frame) {
  std::uint64_t counter;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    counter = ++sent_;
  }
  std::vector<std::uint8_t> out;
  out.reserve(seal_bytes);
  put_u64(out, counter);
  auto m = mac(own_, peer_, counter, frame);
  out.insert(out.end(), m.begin(), m.end());
  return out;
}

seal_check frame_session::open(const std::vector<std::uint8_t>& frame,
                               const std::vector<std::uint8_t>& seal) {
  if (seal.empty())
    return seal_check::unsealed;
  if (seal.size() != seal_bytes)
    return seal_check::malformed;
  const std::uint64_t counter = get_u64(seal.data());
  const auto expected = mac(peer_, own_, counter, frame);
  if (counter == 0 || expected.size() != session_mac_bytes ||
      CRYPTO_memcmp(expected.data(), seal.data() + 8, session_mac_bytes) != 0)
    return seal_check::bad_mac;
  std::lock_guard<std::mutex> lock(mutex_);
  if (counter > highest_) {
    const auto shift = counter - highest_;
    seen_ = shift >= replay_window ? std::bitset<replay_window>{} : seen_ << shift;
    seen_.set(0);
    highest_ = counter;
    return seal_check::ok;
  }
  const auto age = highest_ - counter;
  if (age >= replay_window)
    return seal_check::too_old;
  if (seen_.test(age))
    return seal_check::replayed;
  seen_.set(age);
  return seal_check::ok;
}

namespace session_book {
namespace {
std::mutex mutex;
std::map<std::pair<caf::node_id, caf::node_id>, std::shared_ptr<frame_session>> sessions;
} // namespace

std::shared_ptr<frame_session> open(const caf::node_id& own, const caf::node_id& peer,
                                    std::vector<std::uint8_t> key) {
  auto s = std::make_shared<frame_session>(std::move(key), caf::to_string(own),
                                           caf::to_string(peer));
  std::lock_guard<std::mutex> lock(mutex);
  sessions[{own, peer}] = s;
  return s;
}

std::shared_ptr<frame_session> find(const caf::node_id& own, const caf::node_id& peer) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = sessions.find({own, peer});
  return it == sessions.end() ? nullptr : it->second;
}

void close(const caf::node_id& own, const caf::node_id& peer,
           const frame_session* which) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = sessions.find({own, peer});
  if (it != sessions.end() && (!which || it->second.get() == which))
    sessions.erase(it);
}

std::size_t size() {
  std::lock_guard<std::mutex> lock(mutex);
  return sessions.size();
}

} // namespace session_book

} // namespace bamboo
