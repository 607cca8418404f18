// A worker's agent against a stand-in manager (a scoped actor): the join by
// challenge-response, and frames it cannot use (random, truncated, oversized)
// answered with frame_rejected while the agent goes on. And the values that
// cross between manager and workers, through the codec and back.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <random>

#include "actors/errors.hpp"
#include "actors/net/assignment.hpp"
#include "actors/net/auth.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/wire_values.hpp"
#include "actors/net/worker_agent.hpp"
#include "actors/protocol.hpp"
#include "actors/system.hpp"

using namespace bamboo;

namespace {

struct agent_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> manager;
  caf::actor agent;

  agent_fixture() {
    configure(cfg);
    register_frames(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    manager = std::make_unique<caf::scoped_actor>(*sys);
    worker_spec ws;
    ws.gateway = *manager;
    ws.token = "s3cret";
    ws.frame_limit = 4096;
    agent = spawn_worker_agent(*sys, ws);
  }
  ~agent_fixture() { caf::anon_send_exit(agent, caf::exit_reason::user_shutdown); }

  // The next frame from the agent (heartbeats skipped), or nullopt after 5 s.
  std::optional<schema::frame> next() {
    std::optional<schema::frame> out;
    for (int i = 0; i < 50 && !out; ++i)
      (*manager)->receive(
          [&](const wire_frame& w) {
            auto d = schema::decode(w.bytes);
            REQUIRE(d);
            if (!std::holds_alternative<schema::heartbeat>(d.value))
              out = std::move(d.value);
          },
          caf::after(std::chrono::milliseconds(100)) >> [] {});
    return out;
  }
  void send(std::vector<std::uint8_t> bytes) {
    (*manager)->send(agent, wire_frame{std::move(bytes), {}});
  }
  // The handshake a real manager of this process would answer `r` with.
  handshake handshake_for(const schema::challenge_request& r) const {
    return {r.nonce, std::vector<std::uint8_t>(nonce_bytes, 7), r.identity,
            caf::to_string(sys->node())};
  }
};

} // namespace

TEST_CASE("a worker agent rejects random, truncated and oversized frames and goes on",
          "[actors][net]") {
  agent_fixture f;
  auto first = f.next();
  REQUIRE(first);
  REQUIRE(std::holds_alternative<schema::challenge_request>(*first));
  const auto& request = std::get<schema::challenge_request>(*first);
  CHECK(request.nonce.size() == nonce_bytes);
  CHECK(request.identity == caf::to_string(f.sys->node()));

  std::mt19937 gen(5);
  auto random_bytes = [&](std::size_t n) {
    std::vector<std::uint8_t> v(n);
    for (auto& b : v)
      b = static_cast<std::uint8_t>(gen());
    return v;
  };
  const auto h = f.handshake_for(request);
  auto good = schema::encode(schema::join_challenge{
      h.manager_nonce, prove("s3cret", proof_role::manager, h), h.manager_id});
  auto truncated = good;
  truncated.resize(good.size() - 8);
  f.send(random_bytes(0));
  f.send(random_bytes(13));
  f.send(random_bytes(256));
  f.send(truncated);
  f.send(random_bytes(8192)); // over the agent's 4096-byte limit
  // Told once (not once per bad frame), so two peers never bounce rejections.
  auto rejected = f.next();
  REQUIRE(rejected);
  CHECK(std::holds_alternative<schema::frame_rejected>(*rejected));

  // Still alive and still joining: the real challenge gets the right proof.
  f.send(good);
  auto join = f.next();
  REQUIRE(join);
  REQUIRE(std::holds_alternative<schema::join_request>(*join));
  CHECK(check_proof("s3cret", proof_role::worker, h,
                    std::get<schema::join_request>(*join).proof));
}

TEST_CASE("a worker agent refuses a manager that cannot prove the token, or that "
          "relays another node's handshake, before proving the token itself",
          "[actors][net]") {
  for (int variant = 0; variant < 3; ++variant) {
    agent_fixture f;
    auto first = f.next();
    REQUIRE(first);
    auto h = f.handshake_for(std::get<schema::challenge_request>(*first));
    std::string token = "s3cret";
    std::string why =
        "refused the manager: the manager could not prove the cluster token";
    if (variant == 0) {
      token = "not the token";
    } else if (variant == 1) { // a proof made for another worker's handshake
      h.worker_id = "another node";
    } else { // the real manager's answer, relayed by another node
      h.manager_id = "the real manager's node";
      why = "refused the manager: the manager's identity is not the node it answers "
            "from (a relay?)";
    }
    (*f.manager)->monitor(f.agent);
    (*f.manager)
        ->send(f.agent,
               to_wire(schema::join_challenge{
                   h.manager_nonce, prove(token, proof_role::manager, h), h.manager_id}));
    caf::error reason;
    bool proved = false;
    (*f.manager)
        ->receive_while([&] { return !reason; })(
            [&](caf::down_msg& dm) { reason = dm.reason; },
            [&](const wire_frame& w) {
              auto d = schema::decode(w.bytes);
              proved =
                  proved || (d && std::holds_alternative<schema::join_request>(d.value));
            },
            caf::after(std::chrono::seconds(5)) >>
                [&] { reason = caf::sec::request_timeout; });
    CHECK_FALSE(proved);
    CHECK(describe(reason) == "invalid_config: " + why);
  }
}

TEST_CASE("a worker agent whose join is refused ends with the reason", "[actors][net]") {
  agent_fixture f;
  REQUIRE(f.next());
  (*f.manager)->monitor(f.agent);
  (*f.manager)->send(f.agent, to_wire(schema::join_refused{"wrong cluster token"}));
  caf::error reason;
  (*f.manager)
      ->receive([&](caf::down_msg& dm) { reason = dm.reason; },
                caf::after(std::chrono::seconds(5)) >> [] {});
  CHECK(describe(reason) == "invalid_config: refused: wrong cluster token");
}

TEST_CASE("a run's configuration crosses the wire unchanged, and bad ones are refused",
          "[actors][net]") {
  train_config cfg;
  cfg.model.kind = model_kind::bert;
  cfg.model.layers = 6;
  cfg.model.d_model = 96;
  cfg.model.heads = 3;
  cfg.model.dropout = 0.25;
  cfg.optim.lr = 1.5e-3;
  cfg.optim.clip_norm = 0.5;
  cfg.stages = 3;
  cfg.micro_batch = 2;
  cfg.global_batch = 12;
  cfg.steps = 77;
  cfg.seed = 1234567890123ULL;
  cfg.data = "/data/tokens.bin";
  cfg.redundancy = redundancy_mode::eager;
  auto d = schema::decode(schema::encode(schema::assign{1, 2, 0, 5, to_settings(cfg), ""},
                                         schema::target::stage));
  REQUIRE(d);
  CHECK(d.target == schema::target::stage);
  const auto& a = std::get<schema::assign>(d.value);
  std::string problem;
  auto back = from_settings(a.config, problem);
  REQUIRE(back);
  CHECK(back->model.kind == model_kind::bert);
  CHECK(back->model.layers == 6);
  CHECK(back->model.d_model == 96);
  CHECK(back->model.dropout == 0.25);
  CHECK(back->optim.lr == 1.5e-3);
  CHECK(back->optim.clip_norm == 0.5);
  CHECK(back->global_batch == 12);
  CHECK(back->seed == 1234567890123ULL);
  CHECK(back->data == "/data/tokens.bin");
  CHECK(back->redundancy == redundancy_mode::eager);

  auto bad = a.config;
  bad.redundancy = "sometimes";
  CHECK_FALSE(from_settings(bad, problem));
  CHECK(problem == "unknown redundancy mode 'sometimes'");
  bad = a.config;
  bad.heads = 5; // does not divide 96
  CHECK_FALSE(from_settings(bad, problem));
}

TEST_CASE("progress reports and resume orders cross the wire unchanged",
          "[actors][net]") {
  stage_progress p;
  p.stage = 2;
  p.step = 9;
  p.forwards = {0, 1, 3};
  p.backwards = {0};
  p.frc = {1};
  p.complete = false;
  p.report.loss_sum = 1.25;
  auto d = schema::decode(schema::encode(to_frame(p, 42)));
  REQUIRE(d);
  const auto& r = std::get<schema::progress_report>(d.value);
  CHECK(r.request == 42);
  auto q = from_frame(r);
  CHECK(q.stage == 2);
  CHECK(q.step == 9);
  CHECK(q.forwards == std::vector<int>{0, 1, 3});
  CHECK(q.backwards == std::vector<int>{0});
  CHECK(q.frc == std::vector<int>{1});
  CHECK(q.report.loss_sum == 1.25);

  resume_order o;
  o.generation = 3;
  o.step = 9;
  o.resend_activations = {2, 3};
  o.delivered_gradients = {0};
  o.frc_enabled = true;
  auto e = schema::decode(schema::encode(to_frame(o), schema::target::shadow));
  REQUIRE(e);
  CHECK(e.target == schema::target::shadow);
  auto back = from_frame(std::get<schema::resume>(e.value));
  CHECK(back.generation == 3);
  CHECK(back.step == 9);
  CHECK(back.resend_activations == std::vector<int>{2, 3});
  CHECK(back.resend_gradients.empty());
  CHECK(back.delivered_gradients == std::vector<int>{0});
  CHECK(back.frc_enabled);
}

TEST_CASE("an assignment is taken only with a valid configuration, its data, stages in "
          "range and a checkpoint of this run",
          "[actors]") {
  train_config cfg;
  cfg.model.layers = 2;
  cfg.model.d_model = 32;
  cfg.model.heads = 2;
  cfg.model.seq_len = 16;
  cfg.stages = 2;
  cfg.micro_batch = 2;
  cfg.global_batch = 4;
  schema::assign a;
  a.node = 3;
  a.stage = 1;
  a.shadow_stage = 0;
  a.config = to_settings(cfg);
  auto in = take_assignment(a);
  REQUIRE(in);
  CHECK(in->node.node == 3);
  CHECK(in->node.stage == 1);
  CHECK(in->node.range.first == in->parts.at(1).first);
  CHECK(in->node.shadow_range.last == in->parts.at(0).last);
  CHECK(in->resume == nullptr);

  auto refused = [](const schema::assign& x) {
    auto r = take_assignment(x);
    REQUIRE_FALSE(r);
    return describe(r.error());
  };
  auto b = a;
  b.stage = 2; // a run of two stages
  CHECK(refused(b) == "invalid_config: stage 2 (replica 0) of a run of 2 stages");
  b = a;
  b.shadow_stage = 5;
  CHECK(refused(b).find("replica 5") != std::string::npos);
  b = a;
  b.config.data = "/nonexistent/corpus.bin";
  CHECK(refused(b).find("/nonexistent/corpus.bin") != std::string::npos);
  b = a;
  b.resume = "/nonexistent/step-00000004";
  CHECK(refused(b).find("step-00000004") != std::string::npos);
  b = a;
  b.config.global_batch = 3; // not a multiple of the micro-batch
  CHECK(refused(b).rfind("invalid_config: ", 0) == 0);
}
