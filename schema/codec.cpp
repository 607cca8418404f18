#include "schema/codec.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "control.capnp.h"
#include "schema/inspect_codec.hpp"

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
    if (!x.actors.empty())
      put_actor_rows(h.initActors(static_cast<unsigned>(x.actors.size())), x.actors);
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
    j.setModel(x.model);
    j.setModelDigest(x.model_digest);
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
  template <class List>
  static void put(List l, const std::vector<std::uint32_t>& v) {
    for (unsigned i = 0; i < v.size(); ++i)
      l.set(i, v[i]);
  }
  static void put_report(wire::StepReport::Builder r, const step_report& x) {
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
    auto t = r.initTensorSquares(static_cast<unsigned>(x.tensor_squares.size()));
    for (unsigned i = 0; i < x.tensor_squares.size(); ++i)
      t.set(i, x.tensor_squares[i]);
  }
  void operator()(const step_report& x) { put_report(b.initStepReport(), x); }
  void operator()(const assign& x) {
    auto a = b.initAssign();
    a.setNode(x.node);
    a.setStage(x.stage);
    a.setShadowStage(x.shadow_stage);
    a.setGeneration(x.generation);
    a.setResume(x.resume);
    auto c = a.initConfig();
    const auto& t = x.config;
    c.setModel(t.model);
    c.setLayers(t.layers);
    c.setDModel(t.d_model);
    c.setHeads(t.heads);
    c.setSeqLen(t.seq_len);
    c.setVocab(t.vocab);
    c.setMlpRatio(t.mlp_ratio);
    c.setDropout(t.dropout);
    c.setLr(t.lr);
    c.setMinLrRatio(t.min_lr_ratio);
    c.setWarmupSteps(t.warmup_steps);
    c.setBeta1(t.beta1);
    c.setBeta2(t.beta2);
    c.setEps(t.eps);
    c.setWeightDecay(t.weight_decay);
    c.setClipNorm(t.clip_norm);
    c.setStages(t.stages);
    c.setMicroBatch(t.micro_batch);
    c.setGlobalBatch(t.global_batch);
    c.setSteps(t.steps);
    c.setSeed(t.seed);
    c.setData(t.data);
    c.setThreads(t.threads);
    c.setRedundancy(t.redundancy);
    c.setPipelines(t.pipelines);
    c.setModelDigest(t.model_digest);
  }
  void operator()(const attach& x) {
    auto a = b.initAttach();
    a.setRole(x.role);
    a.setGeneration(x.generation);
  }
  void operator()(const run_step& x) {
    auto r = b.initRunStep();
    r.setGeneration(x.generation);
    r.setStep(x.step);
  }
  void operator()(const progress_request& x) {
    auto r = b.initProgressRequest();
    r.setGeneration(x.generation);
    r.setRequest(x.request);
  }
  void operator()(const progress_report& x) {
    auto r = b.initProgressReport();
    r.setRequest(x.request);
    r.setStage(x.stage);
    r.setStep(x.step);
    put(r.initForwards(static_cast<unsigned>(x.forwards.size())), x.forwards);
    put(r.initBackwards(static_cast<unsigned>(x.backwards.size())), x.backwards);
    put(r.initFrc(static_cast<unsigned>(x.frc.size())), x.frc);
    r.setComplete(x.complete);
    put_report(r.initReport(), x.report);
  }
  void operator()(const state_request& x) { b.initStateRequest().setRequest(x.request); }
  void operator()(const state_report& x) {
    auto r = b.initStateReport();
    r.setRequest(x.request);
    auto list = r.initTensors(static_cast<unsigned>(x.tensors.size()));
    for (unsigned i = 0; i < list.size(); ++i) {
      list[i].setName(x.tensors[i].name);
      list[i].setCount(x.tensors[i].count);
      list[i].setDigest(x.tensors[i].digest);
    }
  }
  void operator()(const state_copy& x) {
    auto r = b.initStateCopy();
    r.setGeneration(x.generation);
    r.setStep(x.step);
    r.setRequest(x.request);
  }
  void operator()(const checkpoint_request& x) {
    auto r = b.initCheckpointRequest();
    r.setRequest(x.request);
    r.setStep(x.step);
    r.setDir(x.dir);
  }
  void operator()(const checkpoint_written& x) {
    auto r = b.initCheckpointWritten();
    r.setRequest(x.request);
    r.setFile(x.file);
    r.setSha256(x.sha256);
    r.setBytes(x.bytes);
    r.setTensors(x.tensors);
    r.setError(x.error);
  }
  void operator()(const store_request& x) {
    auto r = b.initStoreRequest();
    r.setRequest(x.request);
    r.setOp(static_cast<std::uint8_t>(x.op));
    auto keys = r.initKeys(static_cast<unsigned>(x.keys.size()));
    for (unsigned i = 0; i < x.keys.size(); ++i)
      keys.set(i, x.keys[i]);
    r.setValue(bytes_of(x.value));
    r.setExpected(bytes_of(x.expected));
    r.setDelta(x.delta);
    r.setTimeoutMs(x.timeout_ms);
  }
  void operator()(const observe_request& x) {
    auto o = b.initObserve();
    o.setProof(bytes_of(x.proof));
    o.setOperatorProof(bytes_of(x.operator_proof));
  }
  void operator()(const snapshot_request& x) {
    b.initSnapshotRequest().setRequest(x.request);
  }
  void operator()(const cluster_snapshot& x) { put_snapshot(b.initSnapshot(), x); }
  void operator()(const command& x) { put_command(b.initCommand(), x); }
  void operator()(const command_answer& x) {
    put_command_answer(b.initCommandAnswer(), x);
  }
  void operator()(const order& x) { put_order(b.initOrder(), x); }
  void operator()(const store_reply& x) {
    auto r = b.initStoreReply();
    r.setRequest(x.request);
    r.setValue(bytes_of(x.value));
    r.setNumber(x.number);
    r.setError(x.error);
  }
  void operator()(const state_copied& x) {
    auto r = b.initStateCopied();
    r.setRequest(x.request);
    r.setDigest(x.digest);
    r.setBytes(x.bytes);
    r.setError(x.error);
  }
  void operator()(const resume& x) {
    auto r = b.initResume();
    r.setGeneration(x.generation);
    r.setStep(x.step);
    auto n = [](const auto& v) { return static_cast<unsigned>(v.size()); };
    put(r.initResendActivations(n(x.resend_activations)), x.resend_activations);
    put(r.initResendGradients(n(x.resend_gradients)), x.resend_gradients);
    put(r.initDeliveredActivations(n(x.delivered_activations)), x.delivered_activations);
    put(r.initDeliveredGradients(n(x.delivered_gradients)), x.delivered_gradients);
    r.setFrcEnabled(x.frc_enabled);
    r.setSumSource(x.sum_source);
    put(r.initSumTargets(n(x.sum_targets)), x.sum_targets);
  }
  void operator()(const shadow_link& x) { b.initShadowLink().setPresent(x.present); }
  static void put_done(wire::StageDone::Builder d, const stage_done& x) {
    d.setGeneration(x.generation);
    d.setStep(x.step);
    d.setStage(x.stage);
  }
  void operator()(const committed& x) { put_done(b.initCommitted(), x); }
  void operator()(const synced& x) { put_done(b.initSynced(), x); }
  void operator()(const sync_lost& x) { put_done(b.initSyncLost(), x); }
  void operator()(const resync& x) { put_done(b.initResync(), x); }
  void operator()(const step_failed& x) {
    auto f = b.initStepFailed();
    f.setGeneration(x.generation);
    f.setStep(x.step);
    f.setStage(x.stage);
    f.setReason(x.reason);
  }
  void operator()(const generation_end& x) {
    auto g = b.initGenerationEnd();
    g.setGeneration(x.generation);
    g.setReason(x.reason);
  }
  void operator()(const leave& x) {
    auto l = b.initLeave();
    l.setReason(x.reason);
    l.setStay(x.stay);
  }
  void operator()(const challenge_request& x) {
    auto c = b.initChallengeRequest();
    c.setNode(x.node);
    c.setNonce(bytes_of(x.nonce));
    c.setIdentity(x.identity);
  }
  void operator()(const join_challenge& x) {
    auto c = b.initChallenge();
    c.setNonce(bytes_of(x.nonce));
    c.setProof(bytes_of(x.proof));
    c.setIdentity(x.identity);
  }
  void operator()(const join_accept& x) {
    auto a = b.initAccept();
    a.setNode(x.node);
    a.setGeneration(x.generation);
    a.setStorePort(x.store_port);
    a.setHeartbeatMs(x.heartbeat_ms);
    a.setHeartbeatMisses(x.heartbeat_misses);
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

std::vector<std::uint32_t> get(capnp::List<std::uint32_t>::Reader l) {
  std::vector<std::uint32_t> out;
  out.reserve(l.size());
  for (auto x : l)
    out.push_back(x);
  return out;
}

step_report get_report(wire::StepReport::Reader r) {
  step_report out{r.getNode(),     r.getStage(),     r.getGeneration(),
                  r.getStep(),     r.getLossSum(),   r.getGradSquares(),
                  r.getForwards(), r.getBackwards(), r.getFrc(),
                  r.getInherited(), {}};
  for (double v : r.getTensorSquares())
    out.tensor_squares.push_back(v);
  return out;
}

train_settings get_config(wire::TrainConfig::Reader c) {
  train_settings t;
  t.model = c.getModel().cStr();
  t.layers = c.getLayers();
  t.d_model = c.getDModel();
  t.heads = c.getHeads();
  t.seq_len = c.getSeqLen();
  t.vocab = c.getVocab();
  t.mlp_ratio = c.getMlpRatio();
  t.dropout = c.getDropout();
  t.lr = c.getLr();
  t.min_lr_ratio = c.getMinLrRatio();
  t.warmup_steps = c.getWarmupSteps();
  t.beta1 = c.getBeta1();
  t.beta2 = c.getBeta2();
  t.eps = c.getEps();
  t.weight_decay = c.getWeightDecay();
  t.clip_norm = c.getClipNorm();
  t.stages = c.getStages();
  t.micro_batch = c.getMicroBatch();
  t.global_batch = c.getGlobalBatch();
  t.steps = c.getSteps();
  t.seed = c.getSeed();
  t.data = c.getData().cStr();
  t.threads = c.getThreads();
  t.redundancy = c.getRedundancy().cStr();
  t.pipelines = std::max<std::uint32_t>(1, c.getPipelines()); // 0: an older writer
  t.model_digest = c.getModelDigest().cStr();
  return t;
}

template <class T>
T get_done(wire::StageDone::Reader d) {
  T x;
  x.generation = d.getGeneration();
  x.step = d.getStep();
  x.stage = d.getStage();
  return x;
}

frame read_body(wire::Frame::Body::Reader b, codec_errc& err) {
  switch (b.which()) {
  case wire::Frame::Body::HEARTBEAT: {
    auto h = b.getHeartbeat();
    return heartbeat{h.getNode(), h.getGeneration(), h.getStep(), h.getTimeMs(),
                     get_actor_rows(h.getActors())};
  }
  case wire::Frame::Body::PREEMPTION: {
    auto p = b.getPreemption();
    return preemption_notice{p.getNode(), p.getDeadlineMs()};
  }
  case wire::Frame::Body::JOIN: {
    auto j = b.getJoin();
    auto proof = j.getProof();
    return join_request{
        j.getNode(),           j.getZone().cStr(),
        j.getVersion().cStr(), std::vector<std::uint8_t>(proof.begin(), proof.end()),
        j.getModel().cStr(),   j.getModelDigest().cStr()};
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
  case wire::Frame::Body::STEP_REPORT: return get_report(b.getStepReport());
  case wire::Frame::Body::COMMIT: {
    auto c = b.getCommit();
    return commit{c.getGeneration(), c.getStep(), c.getClipCoef()};
  }
  case wire::Frame::Body::CHALLENGE_REQUEST: {
    auto c = b.getChallengeRequest();
    auto n = c.getNonce();
    return challenge_request{c.getNode(), std::vector<std::uint8_t>(n.begin(), n.end()),
                             c.getIdentity().cStr()};
  }
  case wire::Frame::Body::CHALLENGE: {
    auto c = b.getChallenge();
    auto n = c.getNonce();
    auto p = c.getProof();
    return join_challenge{std::vector<std::uint8_t>(n.begin(), n.end()),
                          std::vector<std::uint8_t>(p.begin(), p.end()),
                          c.getIdentity().cStr()};
  }
  case wire::Frame::Body::ACCEPT: {
    auto a = b.getAccept();
    return join_accept{a.getNode(), a.getGeneration(), a.getStorePort(),
                       a.getHeartbeatMs(), a.getHeartbeatMisses()};
  }
  case wire::Frame::Body::REFUSED: return join_refused{b.getRefused().getReason().cStr()};
  case wire::Frame::Body::REJECTED:
    return frame_rejected{b.getRejected().getReason().cStr()};
  case wire::Frame::Body::ASSIGN: {
    auto a = b.getAssign();
    return assign{a.getNode(),
                  a.getStage(),
                  a.getShadowStage(),
                  a.getGeneration(),
                  get_config(a.getConfig()),
                  a.getResume().cStr()};
  }
  case wire::Frame::Body::ATTACH: {
    auto a = b.getAttach();
    return attach{a.getRole().cStr(), a.getGeneration()};
  }
  case wire::Frame::Body::RUN_STEP: {
    auto r = b.getRunStep();
    return run_step{r.getGeneration(), r.getStep()};
  }
  case wire::Frame::Body::PROGRESS_REQUEST: {
    auto r = b.getProgressRequest();
    return progress_request{r.getGeneration(), r.getRequest()};
  }
  case wire::Frame::Body::PROGRESS_REPORT: {
    auto r = b.getProgressReport();
    return progress_report{r.getRequest(),        r.getStage(),
                           r.getStep(),           get(r.getForwards()),
                           get(r.getBackwards()), get(r.getFrc()),
                           r.getComplete(),       get_report(r.getReport())};
  }
  case wire::Frame::Body::STATE_REQUEST:
    return state_request{b.getStateRequest().getRequest()};
  case wire::Frame::Body::STATE_REPORT: {
    auto r = b.getStateReport();
    state_report out{r.getRequest(), {}};
    for (auto t : r.getTensors())
      out.tensors.push_back({t.getName().cStr(), t.getCount(), t.getDigest()});
    return out;
  }
  case wire::Frame::Body::STATE_COPY: {
    auto r = b.getStateCopy();
    return state_copy{r.getGeneration(), r.getStep(), r.getRequest()};
  }
  case wire::Frame::Body::STATE_COPIED: {
    auto r = b.getStateCopied();
    return state_copied{r.getRequest(), r.getDigest(), r.getBytes(), r.getError().cStr()};
  }
  case wire::Frame::Body::CHECKPOINT_REQUEST: {
    auto r = b.getCheckpointRequest();
    return checkpoint_request{r.getRequest(), r.getStep(), r.getDir().cStr()};
  }
  case wire::Frame::Body::CHECKPOINT_WRITTEN: {
    auto r = b.getCheckpointWritten();
    return checkpoint_written{r.getRequest(), r.getFile().cStr(), r.getSha256().cStr(),
                              r.getBytes(),   r.getTensors(),     r.getError().cStr()};
  }
  case wire::Frame::Body::STORE_REQUEST: {
    auto r = b.getStoreRequest();
    if (r.getOp() >= store_op_count)
      throw std::invalid_argument("store operation " + std::to_string(r.getOp()) +
                                  " does not exist");
    store_request out{
        r.getRequest(),  static_cast<store_op>(r.getOp()), {}, {}, {}, r.getDelta(),
        r.getTimeoutMs()};
    for (auto k : r.getKeys())
      out.keys.emplace_back(k.cStr());
    auto v = r.getValue();
    out.value.assign(v.begin(), v.end());
    auto e = r.getExpected();
    out.expected.assign(e.begin(), e.end());
    return out;
  }
  case wire::Frame::Body::OBSERVE: {
    auto o = b.getObserve();
    auto proof = o.getProof();
    auto op = o.getOperatorProof();
    return observe_request{std::vector<std::uint8_t>(proof.begin(), proof.end()),
                           std::vector<std::uint8_t>(op.begin(), op.end())};
  }
  case wire::Frame::Body::SNAPSHOT_REQUEST:
    return snapshot_request{b.getSnapshotRequest().getRequest()};
  case wire::Frame::Body::SNAPSHOT: return get_snapshot(b.getSnapshot());
  case wire::Frame::Body::COMMAND: return get_command(b.getCommand());
  case wire::Frame::Body::COMMAND_ANSWER: return get_command_answer(b.getCommandAnswer());
  case wire::Frame::Body::ORDER: return get_order(b.getOrder());
  case wire::Frame::Body::STORE_REPLY: {
    auto r = b.getStoreReply();
    auto v = r.getValue();
    return store_reply{r.getRequest(), std::vector<std::uint8_t>(v.begin(), v.end()),
                       r.getNumber(), r.getError().cStr()};
  }
  case wire::Frame::Body::RESUME: {
    auto r = b.getResume();
    return resume{r.getGeneration(),
                  r.getStep(),
                  get(r.getResendActivations()),
                  get(r.getResendGradients()),
                  get(r.getDeliveredActivations()),
                  get(r.getDeliveredGradients()),
                  r.getFrcEnabled(),
                  r.getSumSource(),
                  get(r.getSumTargets())};
  }
  case wire::Frame::Body::SHADOW_LINK: return shadow_link{b.getShadowLink().getPresent()};
  case wire::Frame::Body::COMMITTED: return get_done<committed>(b.getCommitted());
  case wire::Frame::Body::SYNCED: return get_done<synced>(b.getSynced());
  case wire::Frame::Body::SYNC_LOST: return get_done<sync_lost>(b.getSyncLost());
  case wire::Frame::Body::RESYNC: return get_done<resync>(b.getResync());
  case wire::Frame::Body::STEP_FAILED: {
    auto f = b.getStepFailed();
    return step_failed{f.getGeneration(), f.getStep(), f.getStage(),
                       f.getReason().cStr()};
  }
  case wire::Frame::Body::GENERATION_END: {
    auto g = b.getGenerationEnd();
    return generation_end{g.getGeneration(), g.getReason().cStr()};
  }
  case wire::Frame::Body::LEAVE: {
    auto l = b.getLeave();
    return leave{l.getReason().cStr(), l.getStay()};
  }
  }
  err = codec_errc::unknown_body;
  return {};
}

} // namespace

std::vector<std::uint8_t> encode(const frame& f, target to) {
  capnp::MallocMessageBuilder msg;
  auto root = msg.initRoot<wire::Frame>();
  root.setMajor(major_version);
  root.setMinor(minor_version);
  root.setTarget(static_cast<std::uint32_t>(to));
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
    out.target = static_cast<target>(root.getTarget());
    if (err != codec_errc::none) {
      out.error = err;
      out.detail = "body tag " +
                   std::to_string(static_cast<int>(root.getBody().which())) +
                   " from minor version " + std::to_string(root.getMinor());
    }
  } catch (const kj::Exception& e) {
    out.error = codec_errc::malformed;
    out.detail = e.getDescription().cStr();
  } catch (const std::invalid_argument& e) { // a value out of its range
    out.error = codec_errc::malformed;
    out.detail = e.what();
  }
  return out;
}

} // namespace bamboo::schema
