// In-process backend: tensors are handed over without a copy through a hub that
// all ranks of one generation share.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "transport/tensor_transport.hpp"

namespace bamboo {

class local_hub;

class local_transport final : public tensor_transport {
public:
  local_transport(std::shared_ptr<local_hub> hub, int rank);
  int rank() const override { return rank_; }
  int size() const override;
  std::uint64_t generation() const override;
  transport_status send(int dst, std::uint64_t tag, const at::Tensor& t) override;
  transport_status recv(int src, std::uint64_t tag, at::Tensor& out,
                        std::chrono::milliseconds timeout) override;
  void abort(const std::string& reason) override;

private:
  std::shared_ptr<local_hub> hub_;
  int rank_;
};

// The shared mailboxes of one generation's group.
class local_hub : public std::enable_shared_from_this<local_hub> {
public:
  local_hub(int size, std::uint64_t generation);
  ~local_hub();
  int size() const { return size_; }
  std::uint64_t generation() const { return generation_; }
  std::unique_ptr<local_transport> endpoint(int rank);
  void abort(const std::string& reason);
  bool aborted() const;
  // Tensors sent but never received (should be 0 after a clean step).
  std::size_t pending() const;

private:
  friend class local_transport;
  struct impl;
  std::unique_ptr<impl> impl_;
  int size_;
  std::uint64_t generation_;
};

} // namespace bamboo
