#include "transport/local_store.hpp"

#include <stdexcept>
#include <string>

namespace bamboo {

namespace {
constexpr std::size_t key_limit = 1024;
constexpr std::size_t byte_limit = std::size_t{64} << 20;
} // namespace

void local_store::put(const std::string& key, std::vector<std::uint8_t> value) {
  if (key.size() > key_limit)
    throw std::runtime_error("rendezvous store: a key of " + std::to_string(key.size()) +
                             " bytes");
  auto it = data_.find(key);
  const std::size_t old = it == data_.end() ? 0 : key.size() + it->second.size();
  if (bytes_ - old + key.size() + value.size() > byte_limit)
    throw std::runtime_error("rendezvous store: over " + std::to_string(byte_limit) +
                             " bytes");
  bytes_ = bytes_ - old + key.size() + value.size();
  data_[key] = std::move(value);
  changed_.notify_all();
}

void local_store::set(const std::string& key, const std::vector<std::uint8_t>& value) {
  std::lock_guard<std::mutex> lock{mtx_};
  put(key, value);
}

std::vector<std::uint8_t> local_store::get(const std::string& key,
                                           std::chrono::milliseconds timeout) {
  wait({key}, timeout);
  std::lock_guard<std::mutex> lock{mtx_};
  return data_.at(key);
}

std::int64_t local_store::add(const std::string& key, std::int64_t delta) {
  std::lock_guard<std::mutex> lock{mtx_};
  std::int64_t value = 0;
  if (auto it = data_.find(key); it != data_.end())
    value = std::stoll(std::string(it->second.begin(), it->second.end()));
  value += delta;
  const auto text = std::to_string(value);
  put(key, std::vector<std::uint8_t>(text.begin(), text.end()));
  return value;
}

std::vector<std::uint8_t>
local_store::compare_set(const std::string& key,
                         const std::vector<std::uint8_t>& expected,
                         const std::vector<std::uint8_t>& desired) {
  std::lock_guard<std::mutex> lock{mtx_};
  auto it = data_.find(key);
  if (it == data_.end()) { // c10d: a missing key is set only when nothing was expected
    if (expected.empty()) {
      put(key, desired);
      return desired;
    }
    return expected;
  }
  if (it->second == expected)
    put(key, desired);
  return data_.at(key);
}

bool local_store::remove(const std::string& key) {
  std::lock_guard<std::mutex> lock{mtx_};
  auto it = data_.find(key);
  if (it == data_.end())
    return false;
  bytes_ -= key.size() + it->second.size();
  data_.erase(it);
  return true;
}

bool local_store::has_all(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (!data_.count(k))
      return false;
  return true;
}

bool local_store::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock{mtx_};
  return has_all(keys);
}

std::int64_t local_store::num_keys() {
  std::lock_guard<std::mutex> lock{mtx_};
  return static_cast<std::int64_t>(data_.size());
}

void local_store::wait(const std::vector<std::string>& keys,
                       std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock{mtx_};
  if (!changed_.wait_for(lock, timeout, [&] { return has_all(keys); }))
    throw std::runtime_error("rendezvous store: wait timeout");
}

} // namespace bamboo
