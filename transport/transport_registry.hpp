// Where the stages of a cluster get their tensor transport for a generation, and
// where a generation's transports are all aborted at once when it ends. Local
// backend: one in-process hub per generation. Gloo backend: one c10d group per
// generation over the store the registry hosts on 127.0.0.1, or over a store
// elsewhere (a worker process joins the manager's). Actors of one process that
// ask for the same rank and generation share one endpoint.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "transport/tensor_transport.hpp"

namespace bamboo {

enum class transport_kind { local, gloo };

const char* to_string(transport_kind k);

class local_hub;
class rendezvous_store;

class transport_registry {
public:
  transport_registry(transport_kind kind, int size);
  // Gloo over the store at host:port (hosted by another process), this node's
  // devices on `device_host` (the address it advertises).
  transport_registry(int size, std::string store_host, std::uint16_t store_port,
                     std::string device_host = "127.0.0.1");
  // Gloo meeting at `store` (the manager's, over the control channel).
  transport_registry(int size, std::shared_ptr<rendezvous_store> store,
                     std::string device_host);
  ~transport_registry();

  transport_kind kind() const { return kind_; }
  // This rank's endpoint of `generation` (thread-safe). Gloo blocks until every
  // rank has joined. Returns nullptr and sets `error` on failure.
  std::shared_ptr<tensor_transport> connect(int rank, std::uint64_t generation,
                                            std::string& error);
  // Ends a generation: every transfer of it, pending or future, fails at once.
  void abort(std::uint64_t generation, const std::string& reason);
  // Ends every generation joined so far (the node leaves the plan).
  void abort_all(const std::string& reason);
  // How long one Gloo transfer or rendezvous may take (default
  // default_gloo_timeout); for generations joined after the call.
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

private:
  struct slot; // one rank's endpoint of one generation, once it is joined
  std::shared_ptr<tensor_transport> join(int rank, std::uint64_t generation,
                                         std::string& error);

  transport_kind kind_;
  int size_;
  std::string store_host_ = "127.0.0.1";
  std::uint16_t store_port_ = 0;
  std::string device_host_ = "127.0.0.1";
  std::shared_ptr<rendezvous_store> rendezvous_;
  std::chrono::milliseconds timeout_{std::chrono::seconds(30)};
  std::mutex mtx_;
  std::map<std::uint64_t, std::shared_ptr<local_hub>> hubs_;
  std::map<std::pair<std::uint64_t, int>, std::shared_ptr<slot>> slots_;
  std::map<std::uint64_t, std::string> ended_;
};

} // namespace bamboo
