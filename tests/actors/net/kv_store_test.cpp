// The rendezvous store the manager serves to members: c10d::Store's semantics
// over a map, bounded, as a plain object.
#include <catch2/catch.hpp>

#include "actors/net/kv_store.hpp"

using namespace bamboo;
using schema::store_op;

namespace {

schema::store_request req(store_op op, std::vector<std::string> keys,
                          std::vector<std::uint8_t> value = {},
                          std::vector<std::uint8_t> expected = {},
                          std::int64_t delta = 0) {
  static std::uint64_t id = 0;
  return {++id, op, std::move(keys), std::move(value), std::move(expected), delta, 100};
}

} // namespace

TEST_CASE(
    "the manager's rendezvous store answers gets and waits once their keys are set, "
    "counts, compares and sets, and deletes as c10d's stores do",
    "[actors][net]") {
  kv_store s;
  // A get and a wait of absent keys wait (nullopt), and are answered after a set.
  CHECK_FALSE(s.apply(req(store_op::get, {"rank0"})));
  CHECK_FALSE(s.apply(req(store_op::wait, {"rank0", "rank1"})));
  REQUIRE(s.apply(req(store_op::set, {"rank0"}, {1, 2, 3}))->error.empty());
  CHECK(s.apply(req(store_op::get, {"rank0"}))->value ==
        std::vector<std::uint8_t>{1, 2, 3});
  CHECK_FALSE(s.apply(req(store_op::wait, {"rank0", "rank1"})));
  CHECK(s.apply(req(store_op::check, {"rank0", "rank1"}))->number == 0);
  s.apply(req(store_op::set, {"rank1"}, {4}));
  CHECK(s.apply(req(store_op::wait, {"rank0", "rank1"}))->error.empty());
  CHECK(s.apply(req(store_op::check, {"rank0", "rank1"}))->number == 1);
  // add: a decimal counter, created at 0.
  CHECK(s.apply(req(store_op::add, {"count"}, {}, {}, 5))->number == 5);
  CHECK(s.apply(req(store_op::add, {"count"}, {}, {}, -2))->number == 3);
  CHECK(s.apply(req(store_op::get, {"count"}))->value == std::vector<std::uint8_t>{'3'});
  CHECK_FALSE(s.apply(req(store_op::add, {"rank0"}, {}, {}, 1))->error.empty());
  // compareSet: set when absent and expected empty, or when equal; else the current.
  CHECK(s.apply(req(store_op::compare_set, {"cas"}, {7}, {}))->value ==
        std::vector<std::uint8_t>{7});
  CHECK(s.apply(req(store_op::compare_set, {"cas"}, {8}, {9}))->value ==
        std::vector<std::uint8_t>{7});
  CHECK(s.apply(req(store_op::compare_set, {"cas"}, {8}, {7}))->value ==
        std::vector<std::uint8_t>{8});
  CHECK(s.apply(req(store_op::compare_set, {"absent"}, {1}, {2}))->value ==
        std::vector<std::uint8_t>{2});
  CHECK(s.apply(req(store_op::num_keys, {}))->number == 4);
  CHECK(s.apply(req(store_op::remove, {"cas"}))->number == 1);
  CHECK(s.apply(req(store_op::remove, {"cas"}))->number == 0);
  CHECK(s.apply(req(store_op::num_keys, {}))->number == 3);
}

TEST_CASE("the manager's rendezvous store refuses malformed requests, long keys and more "
          "than its size in all",
          "[actors][net]") {
  kv_store s;
  CHECK(s.apply(req(store_op::get, {}))->error == "a store request with 0 keys");
  CHECK(s.apply(req(store_op::set, {"a", "b"}, {1}))->error ==
        "a store request with 2 keys");
  CHECK(s.apply(req(store_op::wait, {}))->error == "a store request with 0 keys");
  CHECK(s.apply(req(store_op::set, {std::string(max_key_bytes + 1, 'k')}, {1}))->error ==
        "a store key of 1025 bytes");
  const std::vector<std::uint8_t> mib(std::size_t{1} << 20, 1);
  int stored = 0;
  std::string error;
  for (int i = 0; i < 100 && error.empty(); ++i) {
    error = s.apply(req(store_op::set, {"v" + std::to_string(i)}, mib))->error;
    stored += error.empty();
  }
  CHECK(stored == 63);
  CHECK(error == "the store is full (67108864 bytes)");
  // Replacing a value counts only the difference; deleting frees its room.
  CHECK(s.apply(req(store_op::set, {"v0"}, mib))->error.empty());
  CHECK(s.apply(req(store_op::remove, {"v0"}))->number == 1);
  CHECK(s.apply(req(store_op::set, {"w"}, mib))->error.empty());
}
