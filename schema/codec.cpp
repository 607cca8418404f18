#include "schema/codec.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

#include "control.capnp.h"

namespace bamboo::schema {

const char* to_string(codec_errc e) {
  switch (e) {
  case codec_errc::none: return "ok";
  case codec_errc::too_large: return "frame exceeds the size limit";
  case codec_errc::malformed: return "frame is not a valid message";
  case codec_errc::unknown_major: return "frame has an unknown major version";
  case codec_errc::unknown_body: return "frame has an unknown body kind";
  }
  return "unknown codec error";
}

namespace {

kj::ArrayPtr<const kj::byte> bytes_of(const std::vector<std::uint8_t>& v) {
  return kj::arrayPtr(reinterpret_cast<const kj::byte*>(v.data()), v.size());
}

struct writer {
  wire::Frame::Body::Builder b;
  void operator()(const heartbeat& x) {
    auto h = b.initHeartbeat();
    h.setNode(x.node);
    h.setGeneration(x.generation);
    h.setStep(x.step);
    h.setTimeMs(x.time_ms);
  }
  void operator()(const preemption_notice& x) {
    auto p = b.initPreemption();
    p.setNode(x.node);
    p.setDeadlineMs(x.deadline_ms);
  }
  void operator()(const join_request& x) {
    auto j = b.initJoin();
    j.setNode(x.node);
    j.setZone(x.zone);
    j.setVersion(x.version);
    j.setProof(bytes_of(x.proof));
  }
  void operator()(const plan& x) {
    auto p = b.initPlan();
    p.setGeneration(x.generation);
    p.setPipelines(x.pipelines);
    p.setStages(x.stages);
    auto list = p.initAssignments(static_cast<unsigned>(x.assignments.size()));
    for (unsigned i = 0; i < x.assignments.size(); ++i) {
      const auto& a = x.assignments[i];
      list[i].setPipeline(a.pipeline);
      list[i].setStage(a.stage);
      list[i].setNode(a.node);
      list[i].setShadowNode(a.shadow_node);
    }
    p.setRedundancy(x.redundancy);
    p.setGlobalBatch(x.global_batch);
    p.setMicroBatch(x.micro_batch);
    p.setCursor(x.cursor);
    p.setCheckpoint(x.checkpoint);
  }
  void operator()(const step_report& x) {
    auto r = b.initStepReport();
    r.setNode(x.node);
    r.setStage(x.stage);
    r.setGeneration(x.generation);
    r.setStep(x.step);
    r.setLossSum(x.loss_sum);
    r.setGradSquares(x.grad_squares);
    r.setForwards(x.forwards);
    r.setBackwards(x.backwards);
    r.setFrc(x.frc);
    r.setInherited(x.inherited);
  }
  void operator()(const challenge_request& x) {
    b.initChallengeRequest().setNode(x.node);
  }
  void operator()(const join_challenge& x) {
    b.initChallenge().setNonce(bytes_of(x.nonce));
  }
  void operator()(const join_accept& x) {
    auto a = b.initAccept();
    a.setNode(x.node);
    a.setGeneration(x.generation);
    a.setStorePort(x.store_port);
  }
  void operator()(const join_refused& x) { b.initRefused().setReason(x.reason); }
  void operator()(const frame_rejected& x) { b.initRejected().setReason(x.reason); }
  void operator()(const commit& x) {
    auto c = b.initCommit();
    c.setGeneration(x.generation);
    c.setStep(x.step);
    c.setClipCoef(x.clip_coef);
  }
};

frame read_body(wire::Frame::Body::Reader b, codec_errc& err) {
  switch (b.which()) {
  case wire::Frame::Body::HEARTBEAT: {
    auto h = b.getHeartbeat();
    return heartbeat{h.getNode(), h.getGeneration(), h.getStep(), h.getTimeMs()};
  }
  case wire::Frame::Body::PREEMPTION: {
    auto p = b.getPreemption();
    return preemption_notice{p.getNode(), p.getDeadlineMs()};
  }
  case wire::Frame::Body::JOIN: {
    auto j = b.getJoin();
    auto proof = j.getProof();
    return join_request{j.getNode(), j.getZone().cStr(), j.getVersion().cStr(),
                        std::vector<std::uint8_t>(proof.begin(), proof.end())};
  }
  case wire::Frame::Body::PLAN: {
    auto p = b.getPlan();
    plan x;
    x.generation = p.getGeneration();
    x.pipelines = p.getPipelines();
    x.stages = p.getStages();
    for (auto a : p.getAssignments())
      x.assignments.push_back(
          {a.getPipeline(), a.getStage(), a.getNode(), a.getShadowNode()});
    x.redundancy = p.getRedundancy().cStr();
    x.global_batch = p.getGlobalBatch();
    x.micro_batch = p.getMicroBatch();
    x.cursor = p.getCursor();
    x.checkpoint = p.getCheckpoint().cStr();
    return x;
  }
  case wire::Frame::Body::STEP_REPORT: {
    auto r = b.getStepReport();
    return step_report{r.getNode(),     r.getStage(),     r.getGeneration(),
                       r.getStep(),     r.getLossSum(),   r.getGradSquares(),
                       r.getForwards(), r.getBackwards(), r.getFrc(),
                       r.getInherited()};
  }
  case wire::Frame::Body::COMMIT: {
    auto c = b.getCommit();
    return commit{c.getGeneration(), c.getStep(), c.getClipCoef()};
  }
  case wire::Frame::Body::CHALLENGE_REQUEST:
    return challenge_request{b.getChallengeRequest().getNode()};
  case wire::Frame::Body::CHALLENGE: {
    auto n = b.getChallenge().getNonce();
    return join_challenge{std::vector<std::uint8_t>(n.begin(), n.end())};
  }
  case wire::Frame::Body::ACCEPT: {
    auto a = b.getAccept();
    return join_accept{a.getNode(), a.getGeneration(), a.getStorePort()};
  }
  case wire::Frame::Body::REFUSED: return join_refused{b.getRefused().getReason().cStr()};
  case wire::Frame::Body::REJECTED:
    return frame_rejected{b.getRejected().getReason().cStr()};
  }
  err = codec_errc::unknown_body;
  return {};
}

} // namespace

std::vector<std::uint8_t> encode(const frame& f) {
  capnp::MallocMessageBuilder msg;
  auto root = msg.initRoot<wire::Frame>();
  root.setMajor(major_version);
  root.setMinor(minor_version);
  std::visit(writer{root.initBody()}, f);
  auto words = capnp::messageToFlatArray(msg);
  auto bytes = words.asBytes();
  return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
}

decoded decode(const std::uint8_t* data, std::size_t size, std::size_t limit) {
  decoded out;
  if (size > limit) {
    out.error = codec_errc::too_large;
    out.detail = std::to_string(size) + " bytes, limit " + std::to_string(limit);
    return out;
  }
  if (size == 0 || size % sizeof(capnp::word) != 0) {
    out.error = codec_errc::malformed;
    out.detail = std::to_string(size) + " bytes is not a whole number of words";
    return out;
  }
  // Copy into word-aligned memory: the network hands us arbitrary alignment.
  auto words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  std::memcpy(words.begin(), data, size);
  try {
    capnp::ReaderOptions opts;
    opts.traversalLimitInWords = limit / sizeof(capnp::word) + 1;
    capnp::FlatArrayMessageReader reader(words.asPtr(), opts);
    auto root = reader.getRoot<wire::Frame>();
    if (root.getMajor() != major_version) {
      out.error = codec_errc::unknown_major;
      out.detail = "major version " + std::to_string(root.getMajor()) +
                   ", this reader speaks " + std::to_string(major_version);
      return out;
    }
    codec_errc err = codec_errc::none;
    out.value = read_body(root.getBody(), err);
    if (err != codec_errc::none) {
      out.error = err;
      out.detail = "body tag " +
                   std::to_string(static_cast<int>(root.getBody().which())) +
                   " from minor version " + std::to_string(root.getMinor());
    }
  } catch (const kj::Exception& e) {
    out.error = codec_errc::malformed;
    out.detail = e.getDescription().cStr();
  }
  return out;
}

} // namespace bamboo::schema
