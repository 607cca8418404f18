#include "model/data.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>

#include "model/rng.hpp"

namespace bamboo {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A regular file's bytes; nullopt for a directory, a missing file or a read
// error (libstdc++ throws from a read of a directory even without exceptions set).
std::optional<std::vector<char>> read_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  try {
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  } catch (const std::ios_base::failure&) {
    return std::nullopt;
  }
}

// Enough tokens for a few hundred samples of the default sizes.
constexpr std::size_t synthetic_tokens = 1 << 18;

} // namespace

std::vector<std::uint16_t> token_corpus::synthetic(int vocab, std::size_t tokens,
                                                   std::uint64_t seed) {
  // Each token has three likely successors (p = 0.6, 0.25, 0.1) and a 5% chance of
  // a uniformly random one: a model can learn it, so the loss visibly falls.
  rng64 gen(mix_seed({seed, static_cast<std::uint64_t>(rng_domain::corpus)}));
  std::vector<std::uint16_t> next(static_cast<std::size_t>(vocab) * 3);
  for (auto& n : next)
    n = static_cast<std::uint16_t>(gen.below(vocab));
  std::vector<std::uint16_t> out(tokens);
  std::uint16_t cur = static_cast<std::uint16_t>(gen.below(vocab));
  for (auto& t : out) {
    t = cur;
    double u = gen.uniform();
    std::size_t base = static_cast<std::size_t>(cur) * 3;
    if (u < 0.6)
      cur = next[base];
    else if (u < 0.85)
      cur = next[base + 1];
    else if (u < 0.95)
      cur = next[base + 2];
    else
      cur = static_cast<std::uint16_t>(gen.below(vocab));
  }
  return out;
}

std::shared_ptr<const token_corpus> token_corpus::load(const std::string& spec,
                                                       const model_config& cfg,
                                                       std::uint64_t seed,
                                                       std::string& error) {
  std::vector<std::uint16_t> tokens;
  if (spec == "synthetic") {
    tokens = synthetic(cfg.vocab, synthetic_tokens, seed);
  } else {
    auto bytes = read_file(spec);
    if (!bytes) {
      error = "cannot read data file '" + spec + "'";
      return nullptr;
    }
    if (ends_with(spec, ".bin")) {
      if (bytes->size() % 2 != 0) {
        error = "data file '" + spec + "' has odd length " +
                std::to_string(bytes->size()) + ": not a uint16 token file";
        return nullptr;
      }
      tokens.resize(bytes->size() / 2);
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        auto lo = static_cast<unsigned char>((*bytes)[2 * i]);
        auto hi = static_cast<unsigned char>((*bytes)[2 * i + 1]);
        tokens[i] = static_cast<std::uint16_t>(lo | (hi << 8)); // little-endian
        if (tokens[i] >= cfg.vocab) {
          error = "data file '" + spec + "' has token " + std::to_string(tokens[i]) +
                  " at index " + std::to_string(i) + ", outside --vocab " +
                  std::to_string(cfg.vocab);
          return nullptr;
        }
      }
    } else {
      if (cfg.vocab < 256) {
        error = "raw text data '" + spec + "' needs --vocab 256 or more, got " +
                std::to_string(cfg.vocab);
        return nullptr;
      }
      tokens.assign(bytes->begin(), bytes->end());
      for (auto& t : tokens)
        t = static_cast<std::uint16_t>(static_cast<unsigned char>(t));
    }
  }
  auto corpus = std::make_shared<token_corpus>(std::move(tokens));
  if (sample_count(*corpus, cfg) < 1) {
    error = "data '" + spec + "' has " + std::to_string(corpus->tokens().size()) +
            " tokens, fewer than one sample of --seq-len " + std::to_string(cfg.seq_len);
    return nullptr;
  }
  return corpus;
}

std::int64_t sample_count(const token_corpus& c, const model_config& cfg) {
  // GPT needs one token past the window for its shifted targets.
  const std::int64_t extra = cfg.kind == model_kind::gpt ? 1 : 0;
  const auto n = static_cast<std::int64_t>(c.tokens().size());
  if (n < cfg.seq_len + extra)
    return 0;
  return (n - extra) / cfg.seq_len;
}

sample_order::sample_order(std::uint64_t seed, std::int64_t samples)
    : seed_(seed), n_(samples) {}

std::int64_t sample_order::at(std::int64_t position) {
  const std::int64_t epoch = position / n_;
  std::lock_guard<std::mutex> guard{mtx_};
  if (epoch != epoch_) {
    perm_.resize(n_);
    std::iota(perm_.begin(), perm_.end(), 0);
    rng64 gen(mix_seed({seed_, static_cast<std::uint64_t>(rng_domain::order),
                        static_cast<std::uint64_t>(epoch)}));
    for (std::int64_t i = n_ - 1; i > 0; --i) // Fisher-Yates
      std::swap(perm_[i], perm_[gen.below(i + 1)]);
    epoch_ = epoch;
  }
  return perm_[position % n_];
}

} // namespace bamboo
