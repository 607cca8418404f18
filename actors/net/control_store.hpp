// A worker's side of the rendezvous store that the manager serves over the
// control channel: each operation is a store_request frame that the worker's
// agent sends the gateway as the member it is, and the reply it gets back. So
// only members reach the store, and the data plane needs no port of its own.
#pragma once

#include <caf/actor.hpp>

#include "transport/rendezvous_store.hpp"

namespace bamboo {

// How long an operation that does not wait for keys may take.
inline constexpr std::chrono::seconds store_reply_timeout{30};

class control_store final : public rendezvous_store {
public:
  explicit control_store(caf::actor agent) : agent_(std::move(agent)) {}

  void set(const std::string& key, const std::vector<std::uint8_t>& value) override;
  std::vector<std::uint8_t> get(const std::string& key,
                                std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::vector<std::uint8_t>
  compare_set(const std::string& key, const std::vector<std::uint8_t>& expected,
              const std::vector<std::uint8_t>& desired) override;
  bool remove(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  std::int64_t num_keys() override;
  void wait(const std::vector<std::string>& keys,
            std::chrono::milliseconds timeout) override;

private:
  caf::actor agent_;
};

} // namespace bamboo
