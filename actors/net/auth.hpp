// Joining a cluster proves the cluster token without sending it: the manager
// sends a fresh nonce, the worker answers HMAC-SHA256(token, nonce).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bamboo {

inline constexpr std::size_t nonce_bytes = 32;

std::vector<std::uint8_t> make_nonce();
std::vector<std::uint8_t> prove_token(const std::string& token,
                                      const std::vector<std::uint8_t>& nonce);
// Constant-time comparison of the expected proof with the given one.
bool check_proof(const std::string& token, const std::vector<std::uint8_t>& nonce,
                 const std::vector<std::uint8_t>& proof);

// The token from a file (first line) if given, else $BAMBOO_TOKEN; nullopt and
// `error` set when neither gives a non-empty token.
std::optional<std::string> load_token(const std::string& file, std::string& error);

} // namespace bamboo
