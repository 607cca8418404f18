// The rendezvous store of one process's transport groups (embedded runs with
// --transport gloo): c10d::Store's operations over a map under a lock, with no
// socket, so nothing outside the process reads or sets a key. Bounded like the
// manager's store (kv_store): a key of at most 1 KiB, 64 MiB in all.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "transport/rendezvous_store.hpp"

namespace bamboo {

class local_store final : public rendezvous_store {
public:
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
  bool has_all(const std::vector<std::string>& keys) const;
  void put(const std::string& key, std::vector<std::uint8_t> value); // under the lock

  std::mutex mtx_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<std::uint8_t>> data_;
  std::size_t bytes_ = 0;
};

} // namespace bamboo
