// Fields are only added: a reader of 1.0 reads what 1.1 writes, and the reverse.
#include <catch2/catch.hpp>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstring>

#include "control.capnp.h"
#include "control_next.capnp.h"
#include "schema/codec.hpp"

using namespace bamboo::schema;

namespace {

std::vector<std::uint8_t> to_bytes(capnp::MessageBuilder& msg) {
  auto words = capnp::messageToFlatArray(msg);
  auto bytes = words.asBytes();
  return {bytes.begin(), bytes.end()};
}

} // namespace

TEST_CASE("a frame from a newer minor version with an added field is read", "[schema]") {
  capnp::MallocMessageBuilder msg;
  auto root = msg.initRoot<bamboo::wire_next::Frame>();
  root.setMajor(1);
  root.setMinor(10);
  auto hb = root.initBody().initHeartbeat();
  hb.setNode(7);
  hb.setGeneration(3);
  hb.setStep(99);
  hb.setTimeMs(123);
  hb.setLoad(0.75f); // unknown to this reader: skipped
  auto d = decode(to_bytes(msg));
  REQUIRE(d);
  const auto& h = std::get<heartbeat>(d.value);
  CHECK(h.node == 7);
  CHECK(h.generation == 3);
  CHECK(h.step == 99);
  CHECK(h.time_ms == 123);
}

TEST_CASE("a newer reader reads our frames, added fields at their defaults", "[schema]") {
  auto bytes = encode(heartbeat{4, 2, 10, 55, {}});
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / 8);
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  capnp::FlatArrayMessageReader reader(words.asPtr());
  auto root = reader.getRoot<bamboo::wire_next::Frame>();
  CHECK(root.getMinor() == minor_version);
  REQUIRE(root.getBody().isHeartbeat());
  CHECK(root.getBody().getHeartbeat().getNode() == 4);
  CHECK(root.getBody().getHeartbeat().getStep() == 10);
  CHECK(root.getBody().getHeartbeat().getLoad() == 0.0f);
}

TEST_CASE("a body kind added by a newer version is rejected by name", "[schema]") {
  capnp::MallocMessageBuilder msg;
  auto root = msg.initRoot<bamboo::wire_next::Frame>();
  root.setMajor(1);
  root.setMinor(10);
  root.initBody().initDrain().setNode(2);
  auto d = decode(to_bytes(msg));
  CHECK(d.error == codec_errc::unknown_body);
  CHECK(d.detail.find("minor version 10") != std::string::npos);
}
