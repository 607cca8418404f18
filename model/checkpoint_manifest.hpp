// A checkpoint's manifest.json, the one format of what a checkpoint holds.
// Version 2 (written): {"format": "bamboo-checkpoint", "version": 2, "step": 6,
// "seed": ..., "cursor": ..., "generation": ..., "plan": "0 1 2 3", "config":
// "...", "tensors": 40, "files": [{"name": "stage-0.safetensors", "sha256":
// "...", "bytes": 1234, "tensors": 20}, ...]}: numbers as numbers, each key
// once. Version 1 ("format": "bamboo-checkpoint-1", every value a string, the
// files as "a,b" with "a.sha256" and "a.bytes") is still read; any other
// version is refused by its number. Keys this build does not know are ignored:
// tensor shapes can join version 2 later. "mac": HMAC-SHA256 of every value
// under a key derived from the cluster token, when the user gave the token
// (--token-file or $BAMBOO_TOKEN; a token a launcher made for one run keys
// nothing): a process that has the key refuses a manifest without it or with
// another, so an edited step or a substituted shard (its SHA-256 recomputed)
// is refused by name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/checkpoint.hpp"

namespace bamboo {

inline constexpr int manifest_version = 2;

// A number as a version 1 manifest or a step directory's name writes it:
// decimal digits only, no sign, no junk, at most 18 of them.
std::optional<std::int64_t> decimal_number(const std::string& text);

std::string format_manifest(const checkpoint_manifest& m);

// The process's checkpoint key, derived from `token`; an empty token removes
// it. Set once at start-up, before the first checkpoint.
void key_checkpoints(const std::string& token);
bool checkpoints_keyed();
// The manifest's keyed digest over every value but `mac` (hex), under the
// process's key; "" without one.
std::string manifest_mac(const checkpoint_manifest& m);
// Why a parsed manifest fails the process's key (nullopt: it passes, or the
// process has none).
std::optional<std::string> check_manifest_mac(const checkpoint_manifest& m);

struct parsed_manifest {
  int version = 0;
  checkpoint_manifest m;     // per-file tensor counts are 0 in version 1
  std::uint64_t tensors = 0; // in all its files
};

// Strict: a number where a number belongs (decimal digits, at most 18), a
// string where a string belongs, no key twice, no file named twice; nullopt
// and `error` (naming the field, or the version) otherwise.
std::optional<parsed_manifest> parse_manifest(const std::string& text,
                                              std::string& error);

} // namespace bamboo
