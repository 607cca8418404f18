#include "transport/transport_registry.hpp"

#include "transport/gloo_transport.hpp"
#include "transport/local_transport.hpp"

namespace bamboo {

const char* to_string(transport_kind k) {
  return k == transport_kind::local ? "local" : "gloo";
}

transport_registry::transport_registry(transport_kind kind, int size)
    : kind_(kind), size_(size) {
  if (kind_ == transport_kind::gloo)
    store_ = std::make_unique<gloo_store_server>();
}

transport_registry::~transport_registry() = default;

std::shared_ptr<tensor_transport>
transport_registry::connect(int rank, std::uint64_t generation, std::string& error) {
  std::shared_ptr<tensor_transport> t;
  if (kind_ == transport_kind::local) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& hub = hubs_[generation];
    if (!hub)
      hub = std::make_shared<local_hub>(size_, generation);
    t = hub->endpoint(rank);
  } else {
    // Joining blocks until all ranks are there: not under the lock.
    gloo_group_spec spec;
    spec.store_port = store_->port();
    spec.rank = rank;
    spec.size = size_;
    spec.generation = generation;
    t = gloo_transport::join(spec, error);
    if (!t)
      return nullptr;
  }
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto it = ended_.find(generation); it != ended_.end())
    t->abort(it->second); // ended while we were joining
  endpoints_[generation].push_back(t);
  return t;
}

void transport_registry::abort(std::uint64_t generation, const std::string& reason) {
  std::vector<std::shared_ptr<tensor_transport>> live;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    ended_[generation] = reason;
    for (auto& w : endpoints_[generation])
      if (auto t = w.lock())
        live.push_back(std::move(t));
    endpoints_.erase(generation);
    if (auto it = hubs_.find(generation); it != hubs_.end()) {
      it->second->abort(reason);
      hubs_.erase(it);
    }
  }
  for (auto& t : live)
    t->abort(reason);
}

} // namespace bamboo
