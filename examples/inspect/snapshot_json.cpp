#include "examples/inspect/snapshot_json.hpp"

#include <cmath>
#include <cstdio>

namespace bamboo::app {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

namespace {

std::string number(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

template <class T, class F>
std::string list(const std::vector<T>& v, F each) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i)
    out += (i ? "," : "") + each(v[i]);
  return out + "]";
}

} // namespace

std::string to_json(const schema::cluster_event& e) {
  return "{\"time_ms\":" + std::to_string(e.time_ms) +
         ",\"text\":" + json_string(e.text) + "}";
}

std::string to_json(const schema::cluster_snapshot& s) {
  auto ints = [](std::int32_t v) { return std::to_string(v); };
  std::string out = "{";
  out += "\"model\":" + json_string(s.model);
  out += ",\"generation\":" + std::to_string(s.generation);
  out += ",\"step\":" + std::to_string(s.step);
  out += ",\"steps\":" + std::to_string(s.steps);
  out += ",\"loss\":" + number(s.loss);
  out += ",\"samples_per_s\":" + number(s.samples_per_s);
  out += ",\"pipelines\":" + std::to_string(s.pipelines);
  out += ",\"stages\":" + std::to_string(s.stages);
  out += ",\"owners\":" + list(s.owners, ints);
  out += ",\"shadows\":" + list(s.shadows, ints);
  out += ",\"nodes\":" + list(s.nodes, [](const schema::node_status& n) {
           return "{\"node\":" + std::to_string(n.node) +
                  ",\"zone\":" + json_string(n.zone) +
                  ",\"state\":" + json_string(n.state) +
                  ",\"heartbeat_age_ms\":" + std::to_string(n.heartbeat_age_ms) + "}";
         });
  out += ",\"events\":" +
         list(s.events, [](const schema::cluster_event& e) { return to_json(e); });
  out += ",\"losses\":" + list(s.losses, number);
  out += ",\"uptime_ms\":" + std::to_string(s.uptime_ms);
  out += ",\"paused\":" + std::string(s.paused ? "true" : "false");
  out += ",\"redundancy\":" + json_string(s.redundancy);
  out += ",\"actors\":" + list(s.actors, [](const schema::actor_row& a) {
           return "{\"kind\":" + json_string(a.kind) +
                  ",\"node\":" + std::to_string(a.node) +
                  ",\"stage\":" + std::to_string(a.stage) +
                  ",\"state\":" + json_string(a.state) +
                  ",\"doing\":" + json_string(a.doing) +
                  ",\"mailbox\":" + std::to_string(a.mailbox) +
                  ",\"age_ms\":" + std::to_string(a.age_ms) + "}";
         });
  return out + "}";
}

} // namespace bamboo::app
