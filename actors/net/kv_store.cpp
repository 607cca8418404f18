#include "actors/net/kv_store.hpp"

#include <cstring>

namespace bamboo {

namespace {

// add() keeps its counter as decimal text, as c10d's TCPStore does.
std::int64_t as_number(const std::vector<std::uint8_t>& v) {
  return v.empty() ? 0 : std::stoll(std::string(v.begin(), v.end()));
}
std::vector<std::uint8_t> as_bytes(std::int64_t n) {
  const auto s = std::to_string(n);
  return {s.begin(), s.end()};
}

} // namespace

bool kv_store::has_all(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (!data_.count(k))
      return false;
  return true;
}

std::optional<std::string> kv_store::put(const std::string& key,
                                         std::vector<std::uint8_t> value) {
  auto it = data_.find(key);
  const std::size_t old = it == data_.end() ? 0 : key.size() + it->second.size();
  const std::size_t now = key.size() + value.size();
  if (bytes_ - old + now > max_store_bytes)
    return "the store is full (" + std::to_string(max_store_bytes) + " bytes)";
  bytes_ = bytes_ - old + now;
  data_[key] = std::move(value);
  return std::nullopt;
}

std::optional<schema::store_reply> kv_store::apply(const schema::store_request& r) {
  using schema::store_op;
  schema::store_reply out;
  out.request = r.request;
  const bool many = r.op == store_op::check || r.op == store_op::wait;
  if ((r.op != store_op::num_keys && !many && r.keys.size() != 1) ||
      (many && r.keys.empty())) {
    out.error = "a store request with " + std::to_string(r.keys.size()) + " keys";
    return out;
  }
  for (const auto& k : r.keys)
    if (k.size() > max_key_bytes) {
      out.error = "a store key of " + std::to_string(k.size()) + " bytes";
      return out;
    }
  const std::string key = r.keys.empty() ? std::string() : r.keys.front();
  switch (r.op) {
  case store_op::set:
    if (auto full = put(key, r.value))
      out.error = *full;
    return out;
  case store_op::get:
    if (!data_.count(key))
      return std::nullopt;
    out.value = data_[key];
    return out;
  case store_op::add: {
    auto it = data_.find(key);
    try {
      out.number = (it == data_.end() ? 0 : as_number(it->second)) + r.delta;
    } catch (const std::exception&) {
      out.error = "key '" + key + "' does not hold a number";
      return out;
    }
    if (auto full = put(key, as_bytes(out.number)))
      out.error = *full;
    return out;
  }
  case store_op::compare_set: {
    // c10d's semantics: set when absent and `expected` is empty, or when the
    // current value equals `expected`; the reply is the value afterwards.
    auto it = data_.find(key);
    if ((it == data_.end() && r.expected.empty()) ||
        (it != data_.end() && it->second == r.expected)) {
      if (auto full = put(key, r.value)) {
        out.error = *full;
        return out;
      }
      out.value = r.value;
    } else {
      out.value = it == data_.end() ? r.expected : it->second;
    }
    return out;
  }
  case store_op::remove: {
    auto it = data_.find(key);
    if (it != data_.end()) {
      bytes_ -= it->first.size() + it->second.size();
      data_.erase(it);
      out.number = 1;
    }
    return out;
  }
  case store_op::check: out.number = has_all(r.keys) ? 1 : 0; return out;
  case store_op::num_keys:
    out.number = static_cast<std::int64_t>(data_.size());
    return out;
  case store_op::wait:
    if (!has_all(r.keys))
      return std::nullopt;
    return out;
  }
  out.error = "an unknown store operation";
  return out;
}

} // namespace bamboo
