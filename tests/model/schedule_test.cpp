#include <catch2/catch.hpp>

#include <set>

#include "model/schedule.hpp"

using namespace bamboo;

TEST_CASE("1F1B runs warm-up forwards, alternates, then drains", "[model]") {
  CHECK(describe(one_f_one_b(0, 4, 4)) == "F0 F1 F2 F3 B0 B1 B2 B3");
  CHECK(describe(one_f_one_b(1, 4, 4)) == "F0 F1 F2 B0 F3 B1 B2 B3");
  CHECK(describe(one_f_one_b(3, 4, 4)) == "F0 B0 F1 B1 F2 B2 F3 B3");
  CHECK(describe(one_f_one_b(0, 1, 3)) == "F0 B0 F1 B1 F2 B2");
  CHECK(describe(one_f_one_b(0, 4, 2)) == "F0 F1 B0 B1");
}

TEST_CASE("1F1B runs every micro-batch once each way, backwards in order", "[model]") {
  for (int stages = 1; stages <= 6; ++stages)
    for (int m = 1; m <= 9; ++m)
      for (int s = 0; s < stages; ++s) {
        auto ops = one_f_one_b(s, stages, m);
        REQUIRE(ops.size() == static_cast<std::size_t>(2 * m));
        int next_b = 0;
        std::set<int> fwd;
        for (auto& op : ops) {
          if (op.kind == op_kind::forward) {
            CHECK(fwd.insert(op.micro_batch).second);
          } else {
            CHECK(op.micro_batch == next_b++);
            CHECK(fwd.count(op.micro_batch) == 1);
          }
        }
      }
}

TEST_CASE("1F1B schedules of all stages together never deadlock", "[model]") {
  // Executes the stages' lists with the pipeline's data dependencies: a forward
  // of j on s needs s-1's forward of j, a backward of j needs s+1's backward.
  for (int stages = 1; stages <= 6; ++stages)
    for (int m = 1; m <= 8; ++m) {
      std::vector<std::vector<instruction>> ops;
      for (int s = 0; s < stages; ++s)
        ops.push_back(one_f_one_b(s, stages, m));
      std::vector<std::size_t> pc(stages, 0);
      std::vector<std::set<int>> fdone(stages), bdone(stages);
      bool progress = true;
      while (progress) {
        progress = false;
        for (int s = 0; s < stages; ++s) {
          if (pc[s] == ops[s].size())
            continue;
          auto op = ops[s][pc[s]];
          bool ready = op.kind == op_kind::forward
                           ? (s == 0 || fdone[s - 1].count(op.micro_batch))
                           : (s == stages - 1 || bdone[s + 1].count(op.micro_batch));
          if (ready) {
            (op.kind == op_kind::forward ? fdone : bdone)[s].insert(op.micro_batch);
            ++pc[s];
            progress = true;
          }
        }
      }
      for (int s = 0; s < stages; ++s)
        CHECK(pc[s] == ops[s].size());
    }
}

TEST_CASE("1F1B rejects impossible shapes", "[model]") {
  CHECK_THROWS(one_f_one_b(4, 4, 4));
  CHECK_THROWS(one_f_one_b(0, 4, 0));
}
