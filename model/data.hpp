// Deterministic training data. A corpus is a sequence of token ids; sample i is the
// window starting at token i*seq_len. The sample order is a permutation fixed by
// (seed, epoch); global position p is sample order(p / N)[p % N], and step k takes
// positions [k*G, (k+1)*G). So every sample is used exactly once per epoch, whatever
// the pipeline shape, and a step can be recomputed anywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace bamboo {

class token_corpus {
public:
  // spec: "synthetic", a path to a nanoGPT-style uint16 ".bin" file, or any other
  // path read as raw bytes (vocab 256). Returns nullptr and sets `error` on failure.
  static std::shared_ptr<const token_corpus> load(const std::string& spec,
                                                  const model_config& cfg,
                                                  std::uint64_t seed, std::string& error);
  // A seeded corpus with learnable structure (a sparse Markov chain over the vocab).
  static std::vector<std::uint16_t> synthetic(int vocab, std::size_t tokens,
                                              std::uint64_t seed);

  explicit token_corpus(std::vector<std::uint16_t> tokens) : tokens_(std::move(tokens)) {}
  const std::vector<std::uint16_t>& tokens() const { return tokens_; }

private:
  std::vector<std::uint16_t> tokens_;
};

// Number of samples the corpus yields for a model (windows of seq_len [+1 for GPT]).
std::int64_t sample_count(const token_corpus& c, const model_config& cfg);
// First token of sample i.
inline std::int64_t sample_offset(std::int64_t i, const model_config& cfg) {
  return i * cfg.seq_len;
}

class sample_order {
public:
  sample_order(std::uint64_t seed, std::int64_t samples);
  // The sample at global position p (thread-safe; keeps one epoch's permutation).
  std::int64_t at(std::int64_t position);
  std::int64_t samples() const { return n_; }

private:
  std::uint64_t seed_;
  std::int64_t n_;
  std::mutex mtx_;
  std::int64_t epoch_ = -1;
  std::vector<std::int64_t> perm_;
};

} // namespace bamboo
