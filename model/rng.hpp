// Seeds derived from (seed, step, micro-batch, layer, site): every random draw in
// bamboo comes from such a key, never from a global generator, so a layer draws the
// same numbers whichever stage or node runs it, and a recomputation repeats them.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace bamboo {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline std::uint64_t mix_seed(std::initializer_list<std::uint64_t> keys) {
  std::uint64_t h = 0x6a09e667f3bcc908ULL;
  for (auto k : keys)
    h = splitmix64(h ^ splitmix64(k));
  return h;
}

// Domains keep the key spaces of different uses apart.
enum class rng_domain : std::uint64_t {
  init = 1,
  dropout = 2,
  masking = 3,
  order = 4,
  corpus = 5
};

// A small, fast, portable generator (std:: distributions differ across libraries).
class rng64 {
public:
  explicit rng64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() { return state_ = splitmix64(state_); }
  // Uniform in [0, n) (n > 0); the bias of the modulo is negligible for our n.
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
  std::uint64_t state_;
};

} // namespace bamboo
