#include <catch2/catch.hpp>

#include <sstream>

#include "actors/plan/sample_ledger.hpp"

using namespace bamboo;

namespace {

// An order of 10 samples per epoch: position p holds sample (3p + 1) mod 10 of
// its epoch (a permutation, since 3 and 10 are coprime).
std::int64_t order(std::int64_t p) {
  return (3 * (p % 10) + 1) % 10;
}

std::string ledger(const std::vector<std::string>& lines) {
  std::string out = format_header({7, 10, 4}) + "\n";
  for (const auto& l : lines)
    out += l + "\n";
  return out;
}

std::string commit(std::int64_t k, std::uint64_t gen = 1) {
  return format_commit({k, gen, 4 * k, 4 * (k + 1), {0, 1}, {1, 0}});
}

ledger_verdict verify(const std::string& text) {
  std::istringstream in(text);
  std::string error;
  auto f = parse_ledger(in, error);
  INFO(error);
  REQUIRE(f);
  return verify_ledger(*f, order);
}

} // namespace

TEST_CASE("a ledger's lines read back as they were written", "[actors][plan]") {
  ledger_commit c{3, 2, 12, 16, {0, 0, 2}, {2, -1, 0}};
  CHECK(format_commit(c) == "commit,3,2,12,16,0 0 2,2 - 0");
  std::istringstream in(
      ledger({format_commit(c), format_rollback({1, "nodes 1, 2 lost"})}));
  std::string error;
  auto f = parse_ledger(in, error);
  REQUIRE(f);
  CHECK(f->header.seed == 7);
  CHECK(f->header.samples_per_epoch == 10);
  REQUIRE(f->entries.size() == 2);
  const auto& back = std::get<ledger_commit>(f->entries[0]);
  CHECK(back.owners == c.owners);
  CHECK(back.shadows == c.shadows);
  CHECK(std::get<ledger_rollback>(f->entries[1]).reason == "nodes 1, 2 lost");
}

TEST_CASE("consecutive steps over two epochs verify as exactly once, with their "
          "plan history",
          "[actors][plan]") {
  std::vector<std::string> lines;
  for (int k = 0; k < 5; ++k)
    lines.push_back(commit(k, k < 3 ? 1 : 2));
  auto v = verify(ledger(lines));
  INFO(v.problems.size());
  CHECK(v.ok());
  CHECK(v.committed == 5);
  REQUIRE(v.epochs.size() == 2);
  CHECK(v.epochs[0] == "epoch 0: 10 of 10 samples, each once (complete)");
  CHECK(v.epochs[1] == "epoch 1: 10 of 10 samples, each once (complete)");
  REQUIRE(v.plans.size() == 2);
  CHECK(v.plans[0] == "steps 0-2, generation 1: stage owners 0 1, shadows 1 0");
  CHECK(v.plans[1] == "steps 3-4, generation 2: stage owners 0 1, shadows 1 0");
}

TEST_CASE("rolled-back steps done again count once, and a repeat without a rollback "
          "is a violation",
          "[actors][plan]") {
  auto v = verify(ledger({commit(0), commit(1), commit(2),
                          format_rollback({1, "fallback"}), commit(1, 3), commit(2, 3)}));
  CHECK(v.ok());
  CHECK(v.committed == 3);
  CHECK(v.rolled_back == 2);
  CHECK(v.rollbacks == 1);

  auto twice = verify(ledger({commit(0), commit(1), commit(1)}));
  CHECK_FALSE(twice.ok());
  CHECK(twice.problems.at(0).find("step 1 committed twice") != std::string::npos);
  auto gap = verify(ledger({commit(0), commit(2)}));
  CHECK_FALSE(gap.ok());
  CHECK(gap.problems.at(0).find("steps are missing") != std::string::npos);
  auto shifted = verify(ledger({commit(0), format_commit({1, 1, 3, 7, {0, 1}, {1, 0}})}));
  CHECK_FALSE(shifted.ok());
  CHECK(shifted.problems.at(0).find("took positions [3, 7), not [4, 8)") !=
        std::string::npos);
}

TEST_CASE("a malformed or foreign ledger is refused with its line number",
          "[actors][plan]") {
  auto refused = [](const std::string& text, const std::string& needle) {
    std::istringstream in(text);
    std::string error;
    CHECK_FALSE(parse_ledger(in, error));
    INFO(error);
    CHECK(error.find(needle) != std::string::npos);
  };
  refused("", "no ledger header");
  refused("commit,0,1,0,4,0 1,1 0\n", "line 1: an entry before the ledger's header");
  refused(ledger({"commit,0,1,0,4,0 1"}), "line 2: a malformed commit");
  refused(ledger({"commit,x,1,0,4,0 1,1 0"}), "line 2: a malformed commit");
  refused(ledger({"retire,3"}), "line 2: an unknown entry 'retire'");
  refused(ledger({commit(0), format_header({8, 10, 4})}),
          "line 3: a header of another run");
}

TEST_CASE("a short ledger claiming 2^27 samples in one commit is refused before any work "
          "- and its bound grows with the file",
          "[actors][plan]") {
  const std::int64_t big = std::int64_t{1} << 27;
  const auto text = format_header({7, big, big}) + "\n" +
                    format_commit({0, 1, 0, big, {0}, {0}}) + "\n";
  INFO(text.size() << " bytes");
  CHECK(text.size() < 120);
  std::istringstream in(text);
  std::string error;
  CHECK_FALSE(parse_ledger(in, error));
  INFO(error);
  CHECK(error.find("more than a ledger of " + std::to_string(text.size()) +
                   " bytes can vouch for") != std::string::npos);
  CHECK(ledger_work_budget(100) == std::int64_t{1} << 24);
  CHECK(ledger_work_budget(1 << 20) == std::int64_t{1} << 32);
}
