#include "actors/net/auth.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace bamboo {

namespace {

// Each field length-prefixed, so no two handshakes share a message.
void append(std::vector<std::uint8_t>& out, const std::uint8_t* data, std::size_t n) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.insert(out.end(), data, data + n);
}
void append(std::vector<std::uint8_t>& out, const std::string& s) {
  append(out, reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}
void append(std::vector<std::uint8_t>& out, const std::vector<std::uint8_t>& v) {
  append(out, v.data(), v.size());
}

const char* label(proof_role role) {
  switch (role) {
  case proof_role::manager: return "bamboo-manager";
  case proof_role::worker: return "bamboo-worker";
  case proof_role::observer: return "bamboo-inspect";
  case proof_role::operator_: return "bamboo-operator";
  case proof_role::session: return "bamboo-session";
  case proof_role::door_client: return "bamboo-door-client";
  case proof_role::door_server: return "bamboo-door";
  }
  return "?";
}

} // namespace

std::vector<std::uint8_t> make_nonce() {
  std::vector<std::uint8_t> n(nonce_bytes);
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    throw std::runtime_error("no random bytes for a join nonce");
  return n;
}

std::vector<std::uint8_t> prove(const std::string& token, proof_role role,
                                const handshake& h) {
  std::vector<std::uint8_t> msg;
  append(msg, std::string(label(role)));
  append(msg, h.worker_nonce);
  append(msg, h.manager_nonce);
  append(msg, h.worker_id);
  append(msg, h.manager_id);
  std::vector<std::uint8_t> mac(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), msg.data(), msg.size(),
       mac.data(), &len);
  mac.resize(len);
  return mac;
}

bool check_proof(const std::string& token, proof_role role, const handshake& h,
                 const std::vector<std::uint8_t>& proof) {
  auto expected = prove(token, role, h);
  return proof.size() == expected.size() &&
         CRYPTO_memcmp(proof.data(), expected.data(), expected.size()) == 0;
}

std::optional<std::string> refuse_manager(const std::string& token, const handshake& h,
                                          const std::string& answered_as,
                                          const std::vector<std::uint8_t>& proof) {
  if (answered_as != h.manager_id)
    return "the manager's identity is not the node it answers from (a relay?)";
  if (!check_proof(token, proof_role::manager, h, proof))
    return "the manager could not prove the cluster token";
  return std::nullopt;
}

namespace {

// A secret from a file (first line, a trailing \r dropped) or from $env; an
// empty string when neither is given.
std::optional<std::string> read_secret(const std::string& file, const char* env,
                                       std::string& error) {
  std::string secret;
  if (file.empty()) {
    const char* v = std::getenv(env);
    return std::string(v ? v : "");
  }
  // Opened first, then checked on the descriptor: the file read is the file checked.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0)
      ::close(fd);
    error = "cannot read token file '" + file + "'" +
            (fd >= 0 ? std::string(": not a regular file") : std::string());
    return std::nullopt;
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%03o", static_cast<unsigned>(st.st_mode & 0777));
    error = "token file '" + file + "' has mode " + mode +
            ": group and others must not have access (chmod 600 " + file + ")";
    return std::nullopt;
  }
  char buf[4096]; // a token is its first line; more is not read
  const auto n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  if (n < 0) {
    error = "cannot read token file '" + file + "'";
    return std::nullopt;
  }
  secret.assign(buf, static_cast<std::size_t>(n));
  secret = secret.substr(0, secret.find('\n'));
  if (!secret.empty() && secret.back() == '\r')
    secret.pop_back();
  return secret;
}

std::optional<std::string> long_enough(std::string token, const char* what,
                                       std::string& error) {
  if (token.size() < min_token_bytes) {
    error = std::string("the ") + what + " has " + std::to_string(token.size()) +
            " bytes: at least " + std::to_string(min_token_bytes) + " are needed";
    return std::nullopt;
  }
  return token;
}

} // namespace

std::optional<std::string> load_token(const std::string& file, std::string& error) {
  auto token = read_secret(file, "BAMBOO_TOKEN", error);
  if (!token)
    return std::nullopt;
  if (token->empty()) {
    error = "no cluster token: set BAMBOO_TOKEN or pass --token-file";
    return std::nullopt;
  }
  return long_enough(std::move(*token), "cluster token", error);
}

std::optional<std::string> load_operator_token(const std::string& file,
                                               std::string& error) {
  auto token = read_secret(file, "BAMBOO_OPERATOR_TOKEN", error);
  if (!token || token->empty())
    return std::nullopt;
  return long_enough(std::move(*token), "operator token", error);
}

} // namespace bamboo
