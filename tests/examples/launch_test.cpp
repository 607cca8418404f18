// The pieces the launcher stands on: the child-process helper (process groups,
// death with the parent) and the status channel's lines.
#include <catch2/catch.hpp>

#include <signal.h>

#include "examples/cluster/status.hpp"
#include "tests/examples/child_process.hpp"

using namespace bamboo;
using namespace bamboo::test;

TEST_CASE("status lines parse into events, and anything else is no event", "[examples]") {
  auto e = status::parse("committed 3\n");
  REQUIRE(e);
  CHECK(e->kind == "committed");
  CHECK(e->values == std::vector<long>{3});
  e = status::parse("joined 2 4242");
  REQUIRE(e);
  CHECK(e->values == std::vector<long>{2, 4242});
  CHECK(status::parse("started\n"));
  CHECK(status::parse("listening 40123")->values == std::vector<long>{40123});
  for (const char* bad :
       {"", "\n", "committed", "committed 3 4", "committed x", "committed 3x", "joined 2",
        "step 0 (1/20)  loss 5.4", "listening"})
    CHECK_FALSE(status::parse(bad));
}

TEST_CASE("a child's whole process group is killed and reaped when its handle goes",
          "[examples]") {
  no_leftovers guard;
  const scratch_dir dir;
  pid_t pid = 0;
  {
    // A shell with two children of its own, all in the child's group.
    child c(dir, "group", {"/bin/sh", "-c", "sleep 300 & sleep 300 & wait"}, "unused");
    pid = c.pid();
    const auto deadline = clock_type::now() + 5s;
    while (tagged_processes().size() < 3 && clock_type::now() < deadline)
      std::this_thread::sleep_for(10ms);
    REQUIRE(tagged_processes().size() == 3);
    CHECK(getpgid(pid) == pid); // a group of its own
  }
  CHECK(leftover_processes().empty());
  CHECK(kill(pid, 0) != 0); // reaped: no zombie left either
}

TEST_CASE("the children of a launcher killed with kill -9 die with it", "[examples]") {
  no_leftovers guard;
  const scratch_dir dir;
  child launcher(dir, "launcher",
                 {BAMBOO_TRAIN_BIN, "--processes", "--stages", "2", "--steps", "200",
                  "--layers", "1", "--d-model", "32", "--heads", "2", "--seq-len", "16",
                  "--micro-batch", "2", "--global-batch", "4"},
                 test_token);
  // The launcher, its manager and two workers, all training.
  REQUIRE_FALSE(launcher.wait_for(R"(step 1 \(2/200\))", 30s).empty());
  CHECK(tagged_processes().size() == 4);
  REQUIRE(launcher.signal(SIGKILL)); // no handler runs: only PR_SET_PDEATHSIG helps
  CHECK(launcher.wait_exit() == 128 + SIGKILL);
  // The manager and workers were in groups of their own, so not killed with the
  // launcher's group: they must have gone because their parent did.
  CHECK(leftover_processes(5s).empty());
}
