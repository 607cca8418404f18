#include "transport/transport_registry.hpp"

#include <condition_variable>

#include "transport/gloo_transport.hpp"
#include "transport/local_store.hpp"
#include "transport/local_transport.hpp"

namespace bamboo {

const char* to_string(transport_kind k) {
  return k == transport_kind::local ? "local" : "gloo";
}

struct transport_registry::slot {
  std::mutex mtx;
  std::condition_variable cv;
  bool ready = false;
  std::shared_ptr<tensor_transport> transport;
  std::string error;
};

transport_registry::transport_registry(transport_kind kind, int size)
    : kind_(kind), size_(size) {
  // One process's groups meet in memory: no store port for anyone to reach.
  if (kind_ == transport_kind::gloo)
    rendezvous_ = std::make_shared<local_store>();
}

transport_registry::transport_registry(int size, std::string store_host,
                                       std::uint16_t store_port, std::string device_host)
    : kind_(transport_kind::gloo), size_(size), store_host_(std::move(store_host)),
      store_port_(store_port), device_host_(std::move(device_host)) {}

transport_registry::transport_registry(int size, std::shared_ptr<rendezvous_store> store,
                                       std::string device_host)
    : kind_(transport_kind::gloo), size_(size), device_host_(std::move(device_host)),
      rendezvous_(std::move(store)) {}

transport_registry::~transport_registry() = default;

std::shared_ptr<tensor_transport>
transport_registry::connect(int rank, std::uint64_t generation, std::string& error) {
  std::shared_ptr<slot> s;
  bool first = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (auto it = ended_.find(generation); it != ended_.end()) {
      error = "generation " + std::to_string(generation) + " ended: " + it->second;
      return nullptr;
    }
    auto& p = slots_[{generation, rank}];
    if (!p) {
      p = std::make_shared<slot>();
      first = true;
    }
    s = p;
  }
  if (!first) { // another actor of this process is joining this rank: share it
    std::unique_lock<std::mutex> lock{s->mtx};
    s->cv.wait(lock, [&] { return s->ready; });
    error = s->error;
    return s->transport;
  }
  auto t = join(rank, generation, error); // blocks (Gloo): not under a lock
  if (t) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (auto it = ended_.find(generation); it != ended_.end())
      t->abort(it->second); // ended while we were joining
  }
  {
    std::lock_guard<std::mutex> lock{s->mtx};
    s->transport = t;
    s->error = error;
    s->ready = true;
  }
  s->cv.notify_all();
  return t;
}

std::shared_ptr<tensor_transport>
transport_registry::join(int rank, std::uint64_t generation, std::string& error) {
  if (kind_ == transport_kind::local) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& hub = hubs_[generation];
    if (!hub)
      hub = std::make_shared<local_hub>(size_, generation);
    return hub->endpoint(rank);
  }
  gloo_group_spec spec;
  spec.timeout = timeout_;
  spec.store_host = store_host_;
  spec.store_port = store_port_;
  spec.device_host = device_host_;
  spec.store = rendezvous_;
  spec.rank = rank;
  spec.size = size_;
  spec.generation = generation;
  spec.ended = [this, generation]() -> std::optional<std::string> {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = ended_.find(generation);
    if (it == ended_.end())
      return std::nullopt;
    return "generation " + std::to_string(generation) + " ended: " + it->second;
  };
  return gloo_transport::join(spec, error);
}

void transport_registry::abort(std::uint64_t generation, const std::string& reason) {
  std::vector<std::shared_ptr<slot>> live;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    ended_[generation] = reason;
    for (auto it = slots_.lower_bound({generation, -1});
         it != slots_.end() && it->first.first == generation;) {
      live.push_back(it->second);
      it = slots_.erase(it);
    }
    if (auto it = hubs_.find(generation); it != hubs_.end()) {
      it->second->abort(reason);
      hubs_.erase(it);
    }
  }
  for (auto& s : live) {
    std::lock_guard<std::mutex> lock{s->mtx};
    if (s->transport)
      s->transport->abort(reason);
  }
}

void transport_registry::abort_all(const std::string& reason) {
  std::set<std::uint64_t> generations;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (const auto& [key, s] : slots_)
      generations.insert(key.first);
    for (const auto& [g, h] : hubs_)
      generations.insert(g);
  }
  for (auto g : generations)
    abort(g, reason);
}

} // namespace bamboo
