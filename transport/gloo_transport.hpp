// CPU backend between processes: LibTorch's c10d ProcessGroupGloo, one group per
// generation on a PrefixStore named after it, over a TCPStore the manager hosts.
//
// Gloo does not fail a recv from a peer killed in the middle of a transfer until
// the group's timeout, and an aborted RecvWork's wait() returns as if it had
// completed (with a partly written tensor). So this backend keeps every pending
// work of its group, abort() aborts them all, and any call that returns after
// an abort reports `aborted`, never success. A timed-out operation breaks the
// group too (Gloo closes the pair): the control plane then forms a new one.
// recv() needs `out` allocated with the expected shape and dtype.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "transport/rendezvous_store.hpp"
#include "transport/tensor_transport.hpp"

namespace bamboo {

// How long forming a group and a single transfer may take at most.
inline constexpr std::chrono::milliseconds default_gloo_timeout{std::chrono::seconds(30)};

// The rendezvous store (c10d TCPStore server) on host:port; port 0 picks one.
class gloo_store_server {
public:
  explicit gloo_store_server(std::uint16_t port = 0,
                             const std::string& host = "127.0.0.1");
  ~gloo_store_server();
  std::uint16_t port() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

struct gloo_group_spec {
  std::string store_host = "127.0.0.1";
  std::uint16_t store_port = 0;
  int rank = 0;
  int size = 1;
  std::uint64_t generation = 1;
  std::chrono::milliseconds timeout = default_gloo_timeout;
  // The address this rank's Gloo device listens on and tells its peers: the
  // interface the node advertises (another host cannot reach a loopback address).
  std::string device_host = "127.0.0.1";
  // When set, the group meets here instead of at the TCPStore at store_host:port.
  std::shared_ptr<rendezvous_store> store = nullptr;
  // The reason once this generation ended (a member was lost while the group
  // formed): the join gives up then instead of at the timeout. May be unset.
  std::function<std::optional<std::string>()> ended;
};

class gloo_transport final : public tensor_transport {
public:
  // Joins the group of spec.generation (blocks until all ranks joined or the
  // timeout passed). Returns nullptr and sets `error` on failure.
  static std::unique_ptr<gloo_transport> join(const gloo_group_spec& spec,
                                              std::string& error);
  ~gloo_transport() override;

  int rank() const override;
  int size() const override;
  std::uint64_t generation() const override;
  bool needs_buffer() const override { return true; }
  transport_status send(int dst, std::uint64_t tag, const at::Tensor& t) override;
  transport_status recv(int src, std::uint64_t tag, at::Tensor& out,
                        std::chrono::milliseconds timeout) override;
  void abort(const std::string& reason) override;
  // Waits for this rank's sends to complete (e.g. before leaving a group).
  transport_status flush(std::chrono::milliseconds timeout);

  struct impl;

private:
  explicit gloo_transport(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace bamboo
