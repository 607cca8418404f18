#include "actors/net/auth.hpp"

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace bamboo {

std::vector<std::uint8_t> make_nonce() {
  std::vector<std::uint8_t> n(nonce_bytes);
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    throw std::runtime_error("no random bytes for a join nonce");
  return n;
}

std::vector<std::uint8_t> prove_token(const std::string& token,
                                      const std::vector<std::uint8_t>& nonce) {
  std::vector<std::uint8_t> mac(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), nonce.data(),
       nonce.size(), mac.data(), &len);
  mac.resize(len);
  return mac;
}

bool check_proof(const std::string& token, const std::vector<std::uint8_t>& nonce,
                 const std::vector<std::uint8_t>& proof) {
  auto expected = prove_token(token, nonce);
  return proof.size() == expected.size() &&
         CRYPTO_memcmp(proof.data(), expected.data(), expected.size()) == 0;
}

std::optional<std::string> load_token(const std::string& file, std::string& error) {
  std::string token;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) {
      error = "cannot read token file '" + file + "'";
      return std::nullopt;
    }
    std::getline(in, token);
  } else if (const char* env = std::getenv("BAMBOO_TOKEN")) {
    token = env;
  }
  if (token.empty()) {
    error = "no cluster token: set BAMBOO_TOKEN or pass --token-file";
    return std::nullopt;
  }
  return token;
}

} // namespace bamboo
