// The control plane at scale, in one process: the manager's gateway (the real
// one: challenge-response joins with the cluster token, Cap'n Proto frames,
// heartbeat tracking at 10 Hz, loss detection) supervising 1,000 simulated
// nodes (event-based actors without LibTorch that join, heartbeat every 100 ms
// and answer the manager's heartbeats), and a decision actor that holds the
// cluster's plan (250 pipelines of 4 stages) and applies the planner to each
// loss (plan_failover; a fatal one re-plans the survivors) and each join (a new
// plan when standby nodes can form a pipeline). Random events for --seconds:
// kill -9s (the node's actor dies: its connection drop), hangs (it stops
// heartbeating: detected after 5 silent periods) and joins of new nodes.
// Measured: the decision latency from a kill to the new plan, from a hang's
// detection to the new plan (and the detection itself), from a join's first
// frame to the plan that includes it; and the process's CPU use (gateway,
// decisions and the 1,000 simulated nodes' own heartbeats together).
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/net/auth.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/gateway.hpp"
#include "actors/net/wire_values.hpp"
#include "actors/plan/planner.hpp"
#include "actors/system.hpp"
#include "bench/bench_util.hpp"
#include "examples/cluster/parse_or_exit.hpp"

namespace bamboo::bench::control_bench {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using hang_atom = caf::atom_constant<caf::atom("hang")>;

constexpr int stages = 4;
const std::string token = "the control plane benchmark's token";

double ms(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// What the bench's thread and the actors share: when each event began, and
// the latencies measured.
struct timings {
  std::mutex mtx;
  std::map<int, clock_type::time_point> killed;              // member -> kill
  std::map<caf::actor_addr, clock_type::time_point> started; // new node -> first frame
  std::map<int, clock_type::time_point> hung;                // member -> last heartbeat
  std::vector<double> kill_to_plan, hang_detect, hang_to_plan, join_to_plan;
  std::map<int, caf::actor> by_member; // each simulated node, once joined
  std::atomic<int> joined{0};
  std::atomic<int> decisions{0}, fatal{0};
};

struct sim_state {
  static inline const char* name = "bench.sim_node";
};

// A simulated node: it joins as a worker does and heartbeats at 10 Hz.
caf::behavior sim_node(caf::stateful_actor<sim_state>* self, caf::actor gateway,
                       std::shared_ptr<timings> t) {
  auto h = std::make_shared<handshake>();
  h->worker_nonce = make_nonce();
  h->worker_id = caf::to_string(self->node());
  auto member = std::make_shared<int>(-1);
  auto hung = std::make_shared<bool>(false);
  {
    std::lock_guard<std::mutex> g{t->mtx};
    t->started[self->address()] = clock_type::now();
  }
  self->send(gateway, to_wire(schema::challenge_request{0xffffffffu, h->worker_nonce,
                                                        h->worker_id}));
  return {
      [=](const wire_frame& w) {
        auto d = schema::decode(w.bytes);
        if (!d)
          return;
        if (auto* c = std::get_if<schema::join_challenge>(&d.value)) {
          h->manager_nonce = c->nonce;
          h->manager_id = c->identity;
          self->send(gateway, to_wire(schema::join_request{
                                  0, "sim", "0.1.0", prove(token, proof_role::worker, *h),
                                  "", ""}));
        } else if (auto* a = std::get_if<schema::join_accept>(&d.value)) {
          *member = static_cast<int>(a->node);
          {
            std::lock_guard<std::mutex> g{t->mtx};
            t->by_member[*member] = caf::actor_cast<caf::actor>(self);
          }
          self->send(self, tick_atom::value);
        }
      },
      [=](tick_atom) {
        if (*hung)
          return;
        self->send(gateway, to_wire(schema::heartbeat{
                                static_cast<std::uint32_t>(*member), 0, 0, 0, {}}));
        self->delayed_send(self, 100ms, tick_atom::value);
      },
      [=](hang_atom) { *hung = true; },
  };
}

struct decider_state {
  static inline const char* name = "bench.decider";
  cluster_plan plan;
  bool planned = false;
  std::set<int> live, standby;
};

// The decisions: the planner on each loss and join, timed from the event.
caf::behavior decider(caf::stateful_actor<decider_state>* self, int initial,
                      std::shared_ptr<timings> t) {
  auto& st = self->state;
  auto replan = [self] {
    auto& s = self->state;
    std::vector<int> nodes(s.live.begin(), s.live.end());
    const int pipelines = static_cast<int>(nodes.size()) / stages;
    nodes.resize(static_cast<std::size_t>(pipelines * stages));
    s.plan = cluster_plan::assign(nodes, pipelines, stages, redundancy_mode::lazy);
    s.standby.clear();
    for (int n : s.live)
      if (std::find(nodes.begin(), nodes.end(), n) == nodes.end())
        s.standby.insert(n);
    s.planned = true;
  };
  (void)st;
  return {
      [=](joined_atom, int id, caf::actor agent, const std::string&) {
        auto& s = self->state;
        s.live.insert(id);
        ++t->joined;
        if (!s.planned) {
          if (static_cast<int>(s.live.size()) == initial)
            replan();
          return;
        }
        s.standby.insert(id);
        if (static_cast<int>(s.standby.size()) < stages)
          return;
        replan(); // a whole pipeline fits: Bamboo's trigger
        ++t->decisions;
        const auto now = clock_type::now();
        std::lock_guard<std::mutex> g{t->mtx};
        for (auto& [addr, at] : t->started)
          if (addr == agent.address())
            t->join_to_plan.push_back(ms(now - at));
      },
      [=](lost_atom, int id) {
        auto& s = self->state;
        s.live.erase(id);
        if (s.standby.erase(id) > 0 || !s.planned)
          return;
        const auto declared = clock_type::now();
        if (id < static_cast<int>(s.plan.alive.size()) && s.plan.alive[id]) {
          auto d = plan_failover(s.plan, id);
          if (d.fatal.empty())
            s.plan = std::move(d.plan);
          else {
            ++t->fatal; // shadows cannot cover it: a new plan on the survivors
            replan();
          }
        }
        ++t->decisions;
        const auto now = clock_type::now();
        std::lock_guard<std::mutex> g{t->mtx};
        if (auto k = t->killed.find(id); k != t->killed.end())
          t->kill_to_plan.push_back(ms(now - k->second));
        else if (auto h = t->hung.find(id); h != t->hung.end()) {
          t->hang_detect.push_back(ms(declared - h->second));
          t->hang_to_plan.push_back(ms(now - declared));
        }
      },
  };
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& v) {
    return static_cast<double>(v.tv_sec) + 1e-6 * v.tv_usec;
  };
  return s(u.ru_utime) + s(u.ru_stime);
}

std::string pct(std::vector<double> v) {
  if (v.empty())
    return "none";
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1,
                      static_cast<std::size_t>(q * static_cast<double>(v.size())))];
  };
  char buf[160];
  std::snprintf(buf, sizeof buf, "p50 %.2f / p99 %.2f / max %.2f ms (n=%zu)", at(0.5),
                at(0.99), v.back(), v.size());
  return buf;
}

double p99(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<std::size_t>(0.99 * static_cast<double>(v.size())))];
}

} // namespace

int bench_main(int argc, char** argv) {
  int nodes = 1000, seconds = 20, events_per_s = 10;
  CLI::App app{
      "bamboo-bench-control: the control plane supervising many simulated nodes"};
  app.add_option("--nodes", nodes, "simulated nodes at the start")->capture_default_str();
  app.add_option("--seconds", seconds, "of random losses and joins")
      ->capture_default_str();
  app.add_option("--events-per-s", events_per_s, "kills, hangs and joins per second")
      ->capture_default_str();
  if (auto status =
          bamboo::process::parse_or_exit(app, argc, argv, "bamboo-bench-control"))
    return *status;
  caf::actor_system_config cfg;
  configure(cfg);
  register_frames(cfg);
  caf::actor_system sys{cfg};
  auto t = std::make_shared<timings>();
  auto decisions = sys.spawn(decider, nodes, t);
  gateway_spec gs;
  gs.token = token;
  gs.heartbeats = heartbeat_policy{100ms, 5}; // 10 Hz; lost after 500 ms of silence
  gs.listener = decisions;
  auto gateway = spawn_gateway(sys, gs);
  const auto t0 = clock_type::now();
  std::vector<caf::actor> sims;
  for (int i = 0; i < nodes; ++i)
    sims.push_back(sys.spawn(sim_node, gateway, t));
  while (t->joined < nodes && clock_type::now() - t0 < 120s)
    std::this_thread::sleep_for(10ms);
  if (t->joined < nodes) {
    std::printf("only %d of %d nodes joined in 120 s\n", t->joined.load(), nodes);
    return 1;
  }
  std::printf("%d simulated nodes joined in %.2f s (challenge-response each); plan: %d "
              "pipelines of %d stages; heartbeats every 100 ms both ways\n",
              nodes, ms(clock_type::now() - t0) / 1000, nodes / stages, stages);
  std::this_thread::sleep_for(1s); // steady heartbeats
  std::vector<int> live;           // members neither killed nor hung
  {
    std::lock_guard<std::mutex> g{t->mtx};
    for (const auto& [m, a] : t->by_member)
      live.push_back(m);
  }
  auto actor_of = [&](int m) {
    std::lock_guard<std::mutex> g{t->mtx};
    return t->by_member.at(m);
  };
  std::mt19937 rng(7);
  const double cpu0 = cpu_seconds();
  const auto start = clock_type::now();
  int kills = 0, hangs = 0, joins = 0;
  const auto period = std::chrono::microseconds(1000000 / std::max(1, events_per_s));
  for (auto next = start; clock_type::now() - start < std::chrono::seconds(seconds);
       next += period) {
    std::this_thread::sleep_until(next);
    const int what = static_cast<int>(rng() % 10);
    if (what < 6 && live.size() > static_cast<std::size_t>(2 * stages)) { // kill -9
      const auto i = rng() % live.size();
      const int m = live[i];
      live.erase(live.begin() + static_cast<long>(i));
      {
        std::lock_guard<std::mutex> g{t->mtx};
        t->killed[m] = clock_type::now();
      }
      caf::anon_send_exit(actor_of(m), caf::exit_reason::kill);
      ++kills;
    } else if (what < 8 && live.size() > static_cast<std::size_t>(2 * stages)) { // hang
      const auto i = rng() % live.size();
      const int m = live[i];
      live.erase(live.begin() + static_cast<long>(i));
      {
        std::lock_guard<std::mutex> g{t->mtx};
        t->hung[m] = clock_type::now(); // its last heartbeat was at most 100 ms before
      }
      caf::anon_send(actor_of(m), hang_atom::value);
      ++hangs;
    } else { // a new node joins
      auto known = [&] {
        std::lock_guard<std::mutex> g{t->mtx};
        return t->by_member.size();
      };
      const auto before = known();
      sims.push_back(sys.spawn(sim_node, gateway, t));
      for (int w = 0; w < 200 && known() == before; ++w)
        std::this_thread::sleep_for(1ms);
      std::lock_guard<std::mutex> g{t->mtx};
      if (t->by_member.size() > before) // members are numbered as they join: the newest
        live.push_back(t->by_member.rbegin()->first);
      ++joins;
    }
  }
  const double wall = ms(clock_type::now() - start) / 1000;
  const double cpu = cpu_seconds() - cpu0;
  std::this_thread::sleep_for(1500ms); // the last hangs are declared
  std::printf("%d s of events: %d kill -9s, %d hangs, %d joins; %d decisions (%d losses "
              "shadows could not cover: re-planned)\n",
              seconds, kills, hangs, joins, t->decisions.load(), t->fatal.load());
  std::lock_guard<std::mutex> g{t->mtx};
  std::printf("kill -9 to the new plan:        %s\n", pct(t->kill_to_plan).c_str());
  std::printf("hang to its detection:          %s  (5 silent periods of 100 ms)\n",
              pct(t->hang_detect).c_str());
  std::printf("hang's detection to the plan:   %s\n", pct(t->hang_to_plan).c_str());
  std::printf(
      "join's first frame to the plan: %s  (when 4 standby nodes form a pipeline)\n",
      pct(t->join_to_plan).c_str());
  std::printf("CPU of the whole process (gateway, decisions and the simulated nodes' own "
              "heartbeats): %.2f cores of %u\n",
              cpu / wall, std::thread::hardware_concurrency());
  const double worst = std::max(p99(t->kill_to_plan), p99(t->hang_to_plan));
  std::printf("decision latency p99 (kill and hang): %.2f ms  (goal <= 100 ms, %s)\n",
              worst, worst <= 100 ? "met" : "MISSED");
  for (auto& s : sims)
    caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(decisions, caf::exit_reason::user_shutdown);
  return 0;
}

} // namespace bamboo::bench::control_bench
