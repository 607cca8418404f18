#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <set>

#include "model/data.hpp"
#include "tests/scratch_dir.hpp"

using namespace bamboo;

namespace {
// In a directory of this run's own, removed when the test binary ends.
std::string temp_file(const std::string& name, const std::string& bytes) {
  static const bamboo::test::scratch_dir dir;
  auto path = dir.file(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}
} // namespace

TEST_CASE("every sample is used exactly once per epoch", "[model]") {
  sample_order order(7, 101);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::set<std::int64_t> seen;
    for (std::int64_t p = epoch * 101; p < (epoch + 1) * 101; ++p)
      seen.insert(order.at(p));
    CHECK(seen.size() == 101);
    CHECK(*seen.begin() == 0);
    CHECK(*seen.rbegin() == 100);
  }
}

TEST_CASE("the sample order is fixed by seed and epoch", "[model]") {
  sample_order a(7, 50), b(7, 50), c(8, 50);
  std::vector<std::int64_t> va, vb, vc, next_epoch;
  for (int p = 0; p < 50; ++p) {
    va.push_back(a.at(p));
    vb.push_back(b.at(p));
    vc.push_back(c.at(p));
    next_epoch.push_back(a.at(p + 50));
  }
  CHECK(va == vb);
  CHECK(va != vc);
  CHECK(va != next_epoch);
  CHECK(a.at(3) == va[3]); // going back to an earlier epoch recomputes it
}

TEST_CASE("the synthetic corpus is seeded and stays inside the vocabulary", "[model]") {
  auto x = token_corpus::synthetic(97, 5000, 3);
  auto y = token_corpus::synthetic(97, 5000, 3);
  auto z = token_corpus::synthetic(97, 5000, 4);
  CHECK(x == y);
  CHECK(x != z);
  for (auto t : x)
    REQUIRE(t < 97);
}

TEST_CASE("token files load, and bad ones are refused with a reason", "[model]") {
  model_config m;
  m.seq_len = 4;
  m.vocab = 300;
  std::string err;
  SECTION("a uint16 .bin file is read little-endian") {
    std::string bytes;
    for (int i = 0; i < 20; ++i) {
      bytes += static_cast<char>((i * 13) & 0xff);
      bytes += static_cast<char>(i == 3 ? 1 : 0);
    }
    auto c = token_corpus::load(temp_file("ok.bin", bytes), m, 1, err);
    REQUIRE(c);
    CHECK(c->tokens().size() == 20);
    CHECK(c->tokens()[3] == 256 + 39);
    CHECK(sample_count(*c, m) == 4); // (20 - 1) / 4 windows of 4 + 1 tokens
  }
  SECTION("odd length") {
    CHECK_FALSE(token_corpus::load(temp_file("odd.bin", "abc"), m, 1, err));
    CHECK(err.find("odd length") != std::string::npos);
  }
  SECTION("token outside the vocabulary") {
    m.vocab = 10;
    CHECK_FALSE(
        token_corpus::load(temp_file("big.bin", std::string("\x20\0", 2)), m, 1, err));
    CHECK(err.find("outside --vocab") != std::string::npos);
  }
  SECTION("missing file") {
    CHECK_FALSE(token_corpus::load("/nonexistent/bamboo.bin", m, 1, err));
    CHECK(err.find("cannot read") != std::string::npos);
  }
  SECTION("raw text is bytes") {
    auto c = token_corpus::load(temp_file("text.txt", "hello world, hello"), m, 1, err);
    REQUIRE(c);
    CHECK(c->tokens()[0] == 'h');
  }
  SECTION("too short for one sample") {
    CHECK_FALSE(token_corpus::load(temp_file("short.txt", "hi"), m, 1, err));
    CHECK(err.find("fewer than one sample") != std::string::npos);
  }
}
