// The simulator on traces small enough to work out by hand (times in ms).
#include <catch2/catch.hpp>

#include <fstream>

#include "examples/sim/py_heap.hpp"
#include "examples/sim/simulator.hpp"
#include "examples/sim/trace.hpp"
#include "tests/scratch_dir.hpp"

using namespace bamboo::sim;

namespace {

// S=2, 10 samples a step, 1 s per step with one pipeline, 0.5 s with two.
sim_options tiny(policy_kind policy, std::int64_t duration_ms) {
  sim_options o;
  o.policy = policy;
  o.prof.name = "tiny";
  o.prof.stages = 2;
  o.prof.samples_per_step = 10;
  o.prof.step_s = {1.0, 0.5};
  o.prof.local_rendezvous_ms = 20000;
  o.duration_ms = duration_ms;
  o.lazy_overhead = 0; // keep the arithmetic of the bamboo policy easy
  o.record_series = false;
  return o;
}

std::vector<trace_event> events(const std::string& text) {
  auto t = parse_trace_text(text, "test");
  REQUIRE(t);
  return t.events;
}

} // namespace

TEST_CASE("the event heap pops equal keys in CPython heapq's order", "[examples]") {
  struct item {
    int key, id;
  };
  struct less {
    bool operator()(const item& a, const item& b) const { return a.key < b.key; }
  };
  py_heap<item, less> h;
  std::vector<int> out;
  for (int i = 0; i < 10; ++i)
    h.push({0, i});
  for (int i = 0; i < 3; ++i)
    out.push_back(h.pop().id);
  for (int i = 10; i < 14; ++i)
    h.push({0, i});
  h.push({-1, 99});
  while (!h.empty())
    out.push_back(h.pop().id);
  // Printed by CPython 3.11's heapq for the same pushes and pops.
  CHECK(out == std::vector<int>{0, 2, 6, 99, 9, 7, 5, 13, 12, 11, 8, 10, 4, 1, 3});
}

TEST_CASE("a covered failure slows the step, re-plans and trains on", "[examples]") {
  // n1, n2 ready at 45 s; n1 starts the global rendezvous (n2 joins it), which
  // ends at 75 s with P=1; steps end at 76, 77, ... 100 s (25 steps). n2 dies at
  // 100.5 s: n1 takes its stage over; the step due at 101 s is stretched by half
  // the 0.5 s since the loss, to 101.25 s (step 26). Overloaded 1 of 1 active >
  // 5%: local rendezvous to 121.25 s, which n3 (ready at 105 s) joins: P=1 again,
  // steps at 122.25 ... 129.25 s (8 more) before the 130 s end.
  auto trace = events("0,add,n1\n0,add,n2\n60000,add,n3\n100500,remove,n2\n");
  auto r = simulate(trace, tiny(policy_kind::nsdi23, 130000));
  const auto& s = r.summary;
  CHECK(s.steps == 34);
  CHECK(s.preemptions == 1);
  CHECK(s.fatal_failures == 0);
  CHECK(s.samples == 340);
  // The original's averages, up to the last step (129.25 s): 340 samples since
  // training began at 75 s; 2 nodes for 60 s, 3 until 100.5 s, then 2.
  CHECK(s.hours == Approx(129.25 / 3600));
  CHECK(s.samples_per_s == Approx(340.0 / (129.25 - 75)));
  const double mean = (2 * 60 + 3 * 40.5 + 2 * (129.25 - 100.5)) / 129.25;
  CHECK(s.mean_instances == Approx(mean));
  CHECK(s.cost_per_h == Approx(0.91 * mean));
  // Our planner covers the same loss the same way.
  auto ours = simulate(trace, tiny(policy_kind::bamboo, 130000));
  CHECK(ours.summary.steps == 34);
  CHECK(ours.summary.fatal_failures == 0);
}

TEST_CASE("losing the node that already took over a stage is fatal", "[examples]") {
  // n1, n2 run from 75 s (P=1); n3, ready at 55 s, waits. n2 dies at 100.5 s
  // (covered by n1), n1 at 100.7 s: it holds two stages. The global rendezvous
  // that follows has only n3: P=0, no more training.
  auto trace =
      events("0,add,n1\n0,add,n2\n10000,add,n3\n100500,remove,n2\n100700,remove,n1\n");
  auto r = simulate(trace, tiny(policy_kind::nsdi23, 200000));
  CHECK(r.summary.fatal_failures == 1);
  // The original keeps its finished steps, and, as its code does, the step
  // event already queued keeps firing until the rendezvous ends at 130.7 s: the
  // stretched step at 101.25 s (26), then 1.5 s steps to 129.75 s (19 more).
  CHECK(r.summary.steps == 45);
  // Our policy falls back to the last checkpoint: none was taken in 25 s.
  auto ours = simulate(trace, tiny(policy_kind::bamboo, 200000));
  CHECK(ours.summary.fatal_failures == 1);
  CHECK(ours.summary.steps == 0);
  // Checkpoint-restart: the first loss of a running node is already fatal.
  auto cr = simulate(trace, tiny(policy_kind::checkpoint_restart, 200000));
  CHECK(cr.summary.fatal_failures == 1);
}

TEST_CASE("enough waiting nodes for another pipeline trigger a re-plan", "[examples]") {
  // P=1 from 75 s (n1, n2; n3 and n4 were added at 40 s, ready at 85 s while
  // running: waiting 2). After the step ending at 85 s... the ready events come
  // before the step event of the same time (ready < step), so the step at 85 s
  // sees (2 + 2) / 2 = 2 > 1 pipelines: local rendezvous to 105 s, then P=2 at
  // 0.5 s a step: steps at 105.5 ... 120 s (30 more) before the 120 s end.
  auto trace = events("0,add,n1\n0,add,n2\n40000,add,n3\n40000,add,n4\n");
  auto r = simulate(trace, tiny(policy_kind::nsdi23, 120000));
  CHECK(r.summary.steps == 10 + 30);
  CHECK(r.summary.fatal_failures == 0);
}

TEST_CASE("idle instances cost money and train nothing", "[examples]") {
  auto trace = events("0,add,n1\n1800000,remove,n1\n");
  auto r = simulate(trace, tiny(policy_kind::nsdi23, 3600000));
  // No step ever completes (the original stops there): the averages run to the
  // last event, 0.5 h of one idle instance, 0.455 $ for nothing.
  CHECK(r.summary.steps == 0);
  CHECK(r.summary.hours == Approx(0.5));
  CHECK(r.summary.mean_instances == Approx(1.0));
  CHECK(r.summary.cost_per_h * r.summary.hours == Approx(0.455));
  CHECK(r.summary.value == 0);
  CHECK(r.summary.samples_per_dollar == 0);
}

TEST_CASE("on-demand runs at its fixed size and price", "[examples]") {
  auto o = tiny(policy_kind::on_demand, 3600000);
  o.prof.on_demand_instances = 4;
  o.prof.on_demand_step_s = 2.0;
  auto r = simulate({}, o);
  CHECK(r.summary.steps == 1800);
  CHECK(r.summary.cost_per_h == Approx(4 * 3.06));
  CHECK(r.summary.samples_per_s == Approx(5.0));
}

TEST_CASE("traces in both formats parse, bad lines are named", "[examples]") {
  auto counts = parse_trace_text("2022-01-01, 00:01:00, 2\n2022-01-01, 00:00:00, 1\n"
                                 "2022-01-01, 00:02:00, 1\n",
                                 "counts");
  REQUIRE(counts);
  REQUIRE(counts.events.size() == 3); // +1 at 0 s, +1 at 60 s, -1 at 120 s
  CHECK(counts.events[1].ms == 60000);
  CHECK(counts.events[2].ms == 120000);
  CHECK_FALSE(counts.events[2].add);
  CHECK(counts.events[2].node == counts.events[0].node); // the oldest goes first

  auto bad = parse_trace_text("0,add,n1\n5,explode,n1\n", "t.csv");
  CHECK(bad.error == "t.csv:2: '5,explode,n1' is not 'delta_ms,add|remove,node'");
  auto unknown = parse_trace_text("0,add,n1\n5,remove,n9\n", "t.csv");
  CHECK(unknown.error.find("t.csv:2: removal of unknown node 'n9'") == 0);
  auto back = parse_trace_text("10,add,n1\n5,add,n2\n", "t.csv");
  CHECK(back.error.find("goes back") != std::string::npos);
  CHECK(parse_trace_text("\n# nothing\n", "e.csv").error == "e.csv: the trace is empty");
  auto bad_count = parse_trace_text("2022-01-01, 25:00:00, 3\n", "c.csv");
  CHECK(bad_count.error ==
        "c.csv:1: '2022-01-01, 25:00:00, 3' is not 'YYYY-MM-DD, HH:MM:SS, count'");
}

TEST_CASE("generated traces are seeded", "[examples]") {
  generate_options g;
  g.seed = 3;
  auto a = generate_trace(g), b = generate_trace(g);
  g.seed = 4;
  auto c = generate_trace(g);
  auto same = [](const std::vector<trace_event>& x, const std::vector<trace_event>& y) {
    if (x.size() != y.size())
      return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i].ms != y[i].ms || x[i].add != y[i].add || x[i].node != y[i].node)
        return false;
    return true;
  };
  CHECK(same(a, b)); // the same seed: the same events, value by value
  CHECK_FALSE(same(a, c));
  for (std::size_t i = 1; i < a.size(); ++i)
    CHECK(a[i].ms >= a[i - 1].ms);
}

TEST_CASE("a profile file drives the simulation like a built-in one", "[examples]") {
  const bamboo::test::scratch_dir dir;
  std::ofstream(dir.file("profile.csv"))
      << "name,mine\nstages,2\nsamples_per_step,10\nstep_s,1.0,0.5\nlocal_rendezvous_ms,"
         "20000\n";
  std::string err;
  auto p = load_profile(dir.file("profile.csv"), err);
  REQUIRE(p);
  CHECK(p->step_seconds(1) == 1.0);
  CHECK(p->step_seconds(9) == 0.5);
  auto o = tiny(policy_kind::nsdi23, 130000);
  o.prof = *p;
  auto trace = events("0,add,n1\n0,add,n2\n60000,add,n3\n100500,remove,n2\n");
  CHECK(simulate(trace, o).summary.steps == 34); // as in the hand-worked case
  std::ofstream(dir.file("profile_bad.csv")) << "stages,2\nspeed,fast\n";
  CHECK_FALSE(load_profile(dir.file("profile_bad.csv"), err));
  CHECK(err.find(":2: unknown key 'speed'") != std::string::npos);
  CHECK_FALSE(p->eager_overhead);
  // Overheads appended by bamboo-bench-redundancy: the last value of a key wins.
  std::ofstream(dir.file("profile.csv"), std::ios::app)
      << "eager_overhead,0.5\n# measured\nlazy_overhead,0.02\neager_overhead,0.08\n";
  p = load_profile(dir.file("profile.csv"), err);
  REQUIRE(p);
  CHECK(p->lazy_overhead == 0.02);
  CHECK(p->eager_overhead == 0.08);
  // The simulator takes a profile's measured overhead over its default.
  auto fast = tiny(policy_kind::bamboo, 130000);
  fast.prof = *p;
  fast.redundancy = sim_redundancy::eager;
  auto slow = fast;
  slow.prof.eager_overhead = 1.0; // each step twice as long
  const auto two = events("0,add,n1\n0,add,n2\n");
  const auto fast_steps = simulate(two, fast).summary.steps;
  CHECK(fast_steps > 0);
  CHECK(simulate(two, slow).summary.steps < fast_steps);
  std::ofstream(dir.file("profile.csv"), std::ios::app) << "eager_overhead,-0.1\n";
  CHECK_FALSE(load_profile(dir.file("profile.csv"), err));
  CHECK(err.find("eager_overhead must be a fraction") != std::string::npos);
}

// Reference figures from the original simulator (uclasystem/bamboo,
// project_pactum/simulation/simulator.py at 8080929), run with Debian's Python:
//   Simulator(spot_instance_trace=open(TRACE), model=MODEL).simulate(duration=D)
// printing num_steps_complete, num_preemptions, num_fatal_failures,
// average_instances, average_performance, average_cost and average_value.
TEST_CASE("bamboo-nsdi23 reproduces the original simulator's figures on both AWS traces, "
          "GPT-2 and BERT, with and without a duration",
          "[examples]") {
  struct reference {
    const char* trace;
    const char* model;
    std::int64_t duration_ms; // 0: none
    std::int64_t steps;
    int preemptions, fatal;
    double instances, performance, cost, value;
  };
  const reference refs[] = {
      {"aws-p3", "gpt2", 0, 30143, 167, 6, 24.068652, 23.684322, 21.902473, 1.144127},
      {"aws-p3", "gpt2", 18000000, 13967, 83, 3, 27.969888, 24.934810, 25.452598,
       0.986624},
      {"aws-p3", "bert", 0, 11375, 167, 6, 24.068361, 73.734519, 21.902209, 3.344009},
      {"aws-p3", "bert", 18000000, 5922, 83, 3, 27.969834, 87.223025, 25.452549,
       3.379464},
      {"aws-g4dn", "gpt2", 0, 18035, 74, 1, 12.709759, 15.346344, 11.565881, 1.157660},
      {"aws-g4dn", "gpt2", 18000000, 4718, 40, 1, 10.907539, 8.962181, 9.925860,
       0.700011},
      {"aws-g4dn", "bert", 0, 5097, 74, 1, 12.709744, 35.781329, 11.565867, 2.683947},
      {"aws-g4dn", "bert", 18000000, 1390, 40, 1, 10.907552, 21.780064, 9.925873,
       1.663102},
  };
  for (const auto& ref : refs) {
    INFO(ref.trace << " " << ref.model << " duration " << ref.duration_ms << " ms");
    auto t = load_trace(std::string(BAMBOO_TRACES_DIR) + "/" + ref.trace + "-trace.csv");
    REQUIRE(t);
    sim_options o;
    o.policy = policy_kind::nsdi23;
    o.prof = *builtin_profile(ref.model);
    if (ref.duration_ms > 0)
      o.duration_ms = ref.duration_ms;
    o.record_series = false;
    const auto s = simulate(t.events, o).summary;
    CHECK(s.steps == ref.steps);
    CHECK(s.preemptions == ref.preemptions);
    CHECK(s.fatal_failures == ref.fatal);
    // The reference has 6 decimals; the goal was 0.1%.
    CHECK(s.mean_instances == Approx(ref.instances).epsilon(1e-6));
    CHECK(s.samples_per_s == Approx(ref.performance).epsilon(1e-6));
    CHECK(s.cost_per_h == Approx(ref.cost).epsilon(1e-6));
    CHECK(s.value == Approx(ref.value).epsilon(1e-6));
  }
}

namespace {

// S=4, 10 samples a step, 1 s per step.
sim_options tiny4(std::int64_t duration_ms) {
  auto o = tiny(policy_kind::bamboo, duration_ms);
  o.prof.stages = 4;
  o.prof.step_s = {1.0};
  o.record_series = true;
  return o;
}

} // namespace

TEST_CASE("with a minimum depth the bamboo policy trains a shallower pipeline on fewer "
          "nodes than S and deepens it when a node returns",
          "[examples]") {
  // 4 nodes train from 75 s; n2 is lost at 100 s (covered), the next boundary
  // re-plans: with S fixed at 4 the 3 nodes left wait, with a minimum of 2 they
  // train 3 stages at 4/3 s a step; n5 (ready at 245 s) deepens it to 4 again.
  auto trace = events("0,add,n1\n0,add,n2\n0,add,n3\n0,add,n4\n100000,remove,n2\n"
                      "200000,add,n5\n");
  auto fixed = simulate(trace, tiny4(400000));
  auto o = tiny4(400000);
  o.min_stages = 2;
  auto ranged = simulate(trace, o);
  CHECK(fixed.summary.fatal_failures == 0);
  CHECK(ranged.summary.fatal_failures == 0);
  // Fixed: training stops from about 121 s to 265 s (n5's global rendezvous).
  CHECK(ranged.summary.steps > fixed.summary.steps + 90);
  std::vector<int> depths;
  for (const auto& p : ranged.series)
    if (p.pipelines > 0 && (depths.empty() || depths.back() != p.stages))
      depths.push_back(p.stages);
  CHECK(depths == std::vector<int>{4, 3, 4});
  for (const auto& p : fixed.series)
    CHECK((p.pipelines == 0 || p.stages == 4));
}

TEST_CASE("zones place a stage and its replica apart, so losing one zone's two nodes "
          "at once is covered",
          "[examples]") {
  // Zones 3: n1..n4 (ready in this order) in zones 0 1 2 0. In join order n4 (the last
  // stage) holds stage 0's replica, and both are in zone 0: losing them together is fatal
  // unless the ring is placed by zone.
  auto trace = events("0,add,n1\n1000,add,n2\n2000,add,n3\n3000,add,n4\n"
                      "100000,remove,n1\n100000,remove,n4\n");
  auto o = tiny4(150000);
  auto plain = simulate(trace, o);
  o.zones = 3;
  auto zoned = simulate(trace, o);
  CHECK(plain.summary.fatal_failures == 1);
  CHECK(zoned.summary.fatal_failures == 0);
  CHECK(zoned.summary.steps > plain.summary.steps);
}
