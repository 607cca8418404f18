// The key-value store a transport group meets at (c10d::Store's operations,
// without LibTorch): a backend that is handed one uses it instead of opening a
// store of its own. Across processes the manager serves it over the
// authenticated control channel (actors/net/control_store.hpp), so the data
// plane needs no open port. Failures throw std::runtime_error, as c10d's do.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace bamboo {

class rendezvous_store {
public:
  virtual ~rendezvous_store() = default;
  virtual void set(const std::string& key, const std::vector<std::uint8_t>& value) = 0;
  // Waits at most `timeout` for the key to appear.
  virtual std::vector<std::uint8_t> get(const std::string& key,
                                        std::chrono::milliseconds timeout) = 0;
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  virtual std::vector<std::uint8_t>
  compare_set(const std::string& key, const std::vector<std::uint8_t>& expected,
              const std::vector<std::uint8_t>& desired) = 0;
  virtual bool remove(const std::string& key) = 0;
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual std::int64_t num_keys() = 0;
  virtual void wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) = 0;
};

} // namespace bamboo
