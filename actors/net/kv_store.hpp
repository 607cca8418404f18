// The tensor transport's rendezvous store, as the manager keeps it: the values
// of c10d::Store's operations over a map, as a plain object (the gateway serves
// it to members over the control channel; tested without actors). Bounded:
// keys of at most max_key_bytes, and max_store_bytes of keys and values in all.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "schema/codec.hpp"

namespace bamboo {

inline constexpr std::size_t max_key_bytes = 1024;
inline constexpr std::size_t max_store_bytes = std::size_t{64} << 20;

class kv_store {
public:
  // The reply to `r` now; nullopt when it waits for keys not there yet (a get
  // or a wait): ask again after the next change, or give up at its deadline.
  std::optional<schema::store_reply> apply(const schema::store_request& r);
  std::size_t size() const { return data_.size(); }

private:
  bool has_all(const std::vector<std::string>& keys) const;
  std::optional<std::string> put(const std::string& key, std::vector<std::uint8_t> value);

  std::map<std::string, std::vector<std::uint8_t>> data_;
  std::size_t bytes_ = 0;
};

} // namespace bamboo
