#include <catch2/catch.hpp>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <random>

#include "control.capnp.h"
#include "schema/codec.hpp"
#include "tests/schema/frame_values.hpp"

using namespace bamboo::schema;

TEST_CASE("every control frame survives an encode-decode round trip", "[schema]") {
  plan p;
  p.generation = 9;
  p.pipelines = 1;
  p.stages = 2;
  p.assignments = {{0, 0, 4, 5}, {0, 1, 5, 4}};
  p.redundancy = "lazy";
  p.global_batch = 16;
  p.micro_batch = 4;
  p.cursor = 320;
  std::vector<frame> frames{heartbeat{3, 2, 17, 123456, {}},
                            preemption_notice{4, 30000},
                            join_request{5, "zone-a", "0.1.0", {1, 2, 3}, "", ""},
                            p,
                            step_report{1, 1, 2, 17, 3.25, 0.5, 4, 4, 4, 1, {}},
                            commit{2, 17, 0.75}};
  for (const auto& f : frames) {
    auto bytes = encode(f);
    auto d = decode(bytes);
    REQUIRE(d);
    CHECK(d.value.index() == f.index());
    CHECK(encode(d.value) == bytes);
  }
  auto d = decode(encode(p));
  const auto& q = std::get<plan>(d.value);
  CHECK(q.assignments.size() == 2);
  CHECK(q.assignments[1].shadow_node == 4);
  CHECK(q.redundancy == "lazy");
  CHECK(q.cursor == 320);
}

TEST_CASE("every body kind round-trips field by field, with every field set",
          "[schema]") {
  const auto frames = every_kind();
  // One of each kind the frame variant has: a new kind must be added here too.
  REQUIRE(frames.size() == std::variant_size_v<frame>);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    INFO("body kind " << i);
    CHECK(frames[i].index() == i);
    for (auto to : {target::none, target::stage, target::shadow}) {
      auto d = decode(encode(frames[i], to));
      REQUIRE(d);
      CHECK(d.target == to);
      CHECK(same_frame(d.value, frames[i]));
    }
  }
  // The comparison itself sees a changed field.
  auto changed = frames;
  std::get<resume>(changed[16]).frc_enabled = false;
  CHECK_FALSE(same_frame(changed[16], frames[16]));
}

TEST_CASE("frames over the size limit are rejected before parsing", "[schema]") {
  auto bytes = encode(heartbeat{1, 1, 1, 1, {}});
  auto d = decode(bytes.data(), bytes.size(), bytes.size() - 8);
  CHECK(d.error == codec_errc::too_large);
}

TEST_CASE("random and truncated bytes are rejected, never crash", "[schema]") {
  std::mt19937 gen(42);
  auto good = encode(
      join_request{5, "zone-a", "0.1.0", std::vector<std::uint8_t>(64, 7), "", ""});
  for (std::size_t n = 0; n < good.size(); ++n) {
    auto d = decode(good.data(), n);
    if (n > 0) // a truncated frame must not decode as the full one
      CHECK(d.error != codec_errc::none);
  }
  int rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::uint8_t> junk(8 * (1 + gen() % 16));
    for (auto& b : junk)
      b = static_cast<std::uint8_t>(gen());
    auto d = decode(junk);
    rejected += d ? 0 : 1;
  }
  CHECK(rejected > 1900); // a few junk words can form a valid empty frame
}

TEST_CASE("a frame of an unknown major version is rejected", "[schema]") {
  capnp::MallocMessageBuilder msg;
  auto root = msg.initRoot<bamboo::wire::Frame>();
  root.setMajor(major_version + 1);
  root.initBody().initHeartbeat().setNode(1);
  auto words = capnp::messageToFlatArray(msg);
  auto bytes = words.asBytes();
  auto d = decode(bytes.begin(), bytes.size());
  CHECK(d.error == codec_errc::unknown_major);
  CHECK(d.detail.find("major version 2") != std::string::npos);
}
