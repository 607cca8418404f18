#include "schema/inspect_codec.hpp"

namespace bamboo::schema {

void put_actor_rows(capnp::List<wire::ActorRow>::Builder b,
                    const std::vector<actor_row>& rows) {
  for (unsigned i = 0; i < rows.size(); ++i) {
    const auto& a = rows[i];
    b[i].setKind(a.kind);
    b[i].setNode(a.node);
    b[i].setStage(a.stage);
    b[i].setState(a.state);
    b[i].setDoing(a.doing);
    b[i].setMailbox(a.mailbox);
    b[i].setAgeMs(a.age_ms);
  }
}

std::vector<actor_row> get_actor_rows(capnp::List<wire::ActorRow>::Reader r) {
  std::vector<actor_row> out;
  out.reserve(r.size());
  for (auto a : r)
    out.push_back({a.getKind().cStr(), a.getNode(), a.getStage(), a.getState().cStr(),
                   a.getDoing().cStr(), a.getMailbox(), a.getAgeMs()});
  return out;
}

void put_snapshot(wire::ClusterSnapshot::Builder b, const cluster_snapshot& x) {
  b.setRequest(x.request);
  b.setModel(x.model);
  b.setGeneration(x.generation);
  b.setStep(x.step);
  b.setSteps(x.steps);
  b.setLoss(x.loss);
  b.setSamplesPerS(x.samples_per_s);
  b.setPipelines(x.pipelines);
  b.setStages(x.stages);
  auto owners = b.initOwners(static_cast<unsigned>(x.owners.size()));
  for (unsigned i = 0; i < x.owners.size(); ++i)
    owners.set(i, x.owners[i]);
  auto shadows = b.initShadows(static_cast<unsigned>(x.shadows.size()));
  for (unsigned i = 0; i < x.shadows.size(); ++i)
    shadows.set(i, x.shadows[i]);
  auto nodes = b.initNodes(static_cast<unsigned>(x.nodes.size()));
  for (unsigned i = 0; i < x.nodes.size(); ++i) {
    nodes[i].setNode(x.nodes[i].node);
    nodes[i].setZone(x.nodes[i].zone);
    nodes[i].setState(x.nodes[i].state);
    nodes[i].setHeartbeatAgeMs(x.nodes[i].heartbeat_age_ms);
  }
  auto events = b.initEvents(static_cast<unsigned>(x.events.size()));
  for (unsigned i = 0; i < x.events.size(); ++i) {
    events[i].setTimeMs(x.events[i].time_ms);
    events[i].setText(x.events[i].text);
  }
  auto losses = b.initLosses(static_cast<unsigned>(x.losses.size()));
  for (unsigned i = 0; i < x.losses.size(); ++i)
    losses.set(i, x.losses[i]);
  b.setUptimeMs(x.uptime_ms);
  put_actor_rows(b.initActors(static_cast<unsigned>(x.actors.size())), x.actors);
  b.setPaused(x.paused);
  b.setRedundancy(x.redundancy);
}

cluster_snapshot get_snapshot(wire::ClusterSnapshot::Reader r) {
  cluster_snapshot x;
  x.request = r.getRequest();
  x.model = r.getModel().cStr();
  x.generation = r.getGeneration();
  x.step = r.getStep();
  x.steps = r.getSteps();
  x.loss = r.getLoss();
  x.samples_per_s = r.getSamplesPerS();
  x.pipelines = r.getPipelines();
  x.stages = r.getStages();
  for (auto v : r.getOwners())
    x.owners.push_back(v);
  for (auto v : r.getShadows())
    x.shadows.push_back(v);
  for (auto n : r.getNodes())
    x.nodes.push_back(
        {n.getNode(), n.getZone().cStr(), n.getState().cStr(), n.getHeartbeatAgeMs()});
  for (auto e : r.getEvents())
    x.events.push_back({e.getTimeMs(), e.getText().cStr()});
  for (auto v : r.getLosses())
    x.losses.push_back(v);
  x.uptime_ms = r.getUptimeMs();
  x.actors = get_actor_rows(r.getActors());
  x.paused = r.getPaused();
  x.redundancy = r.getRedundancy().cStr();
  return x;
}

void put_command(wire::Command::Builder b, const command& x) {
  b.setRequest(x.request);
  auto words = b.initWords(static_cast<unsigned>(x.words.size()));
  for (unsigned i = 0; i < x.words.size(); ++i)
    words.set(i, x.words[i]);
}

command get_command(wire::Command::Reader r) {
  command out{r.getRequest(), {}};
  for (auto w : r.getWords())
    out.words.emplace_back(w.cStr());
  return out;
}

void put_command_answer(wire::CommandAnswer::Builder b, const command_answer& x) {
  b.setRequest(x.request);
  b.setOk(x.ok);
  b.setText(x.text);
}

command_answer get_command_answer(wire::CommandAnswer::Reader r) {
  return {r.getRequest(), r.getOk(), r.getText().cStr()};
}

void put_order(wire::Order::Builder b, const order& x) {
  b.setKind(x.kind);
  b.setSeconds(x.seconds);
  b.setReason(x.reason);
}

order get_order(wire::Order::Reader r) {
  return {r.getKind().cStr(), r.getSeconds(), r.getReason().cStr()};
}

} // namespace bamboo::schema
