#include <catch2/catch.hpp>

#include "actors/plan/step_ledger.hpp"

using namespace bamboo;

TEST_CASE("the step ledger sets the clip once all reported and waits for shadows",
          "[actors][plan]") {
  step_ledger l;
  l.begin(7, 2, {true, false});
  schema::step_report a{0, 0, 1, 7, 0, 9.0}, b{1, 1, 1, 7, 2.5, 16.0};
  CHECK_FALSE(l.report(a));
  CHECK(l.report(b));
  CHECK(l.grad_norm() == 5.0);
  CHECK(l.loss_sum() == 2.5);
  l.commit(0);
  l.commit(1);
  CHECK_FALSE(l.complete()); // stage 0's shadow has not synced
  l.synced(0);
  CHECK(l.complete());
  l.owner_lost(0); // synced: its update survives in the replica
  CHECK(l.committed(0));
}

TEST_CASE("with two pipelines the ledger sums both last stages' losses and takes the "
          "norm from the first pipeline's stages",
          "[actors][plan]") {
  step_ledger l;
  l.set_pipelines(2);
  l.begin(3, 4, {true, true, true, true}); // coordinates p*2+s
  // Every pipeline of a stage reports the same summed gradients.
  schema::step_report r0{0, 0, 1, 3, 0, 9.0}, r1{1, 1, 1, 3, 2.5, 16.0},
      r2{2, 2, 1, 3, 0, 9.0}, r3{3, 3, 1, 3, 1.5, 16.0};
  CHECK_FALSE(l.report(r0));
  CHECK_FALSE(l.report(r1));
  CHECK_FALSE(l.report(r2));
  CHECK(l.report(r3));
  CHECK(l.grad_norm() == 5.0);
  CHECK(l.loss_sum() == 4.0);
}
