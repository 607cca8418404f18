// GPU backend: NCCL point-to-point (ncclSend/ncclRecv) on one communicator per
// generation, aborted with ncclCommAbort on a generation change. Our LibTorch is
// CPU-only, so tensors are staged through device buffers; with a CUDA LibTorch
// the staging copies disappear. Built whenever NCCL is found; runs where GPUs are.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/tensor_transport.hpp"

namespace bamboo {

inline constexpr std::chrono::milliseconds default_nccl_timeout{std::chrono::seconds(30)};

struct nccl_group_spec {
  std::vector<std::uint8_t> unique_id; // from nccl_transport::make_unique_id on rank 0
  int rank = 0;
  int size = 1;
  int device = 0;
  std::uint64_t generation = 1;
  std::chrono::milliseconds timeout = default_nccl_timeout;
};

class nccl_transport final : public tensor_transport {
public:
  // "NCCL 2.28.3", or the error.
  static std::string version();
  static int device_count(); // CUDA devices visible (0 without a GPU or driver)
  // Rank 0 makes the id and the control plane hands it to the other ranks.
  static std::vector<std::uint8_t> make_unique_id(std::string& error);
  // Returns nullptr and sets `error` (naming the CUDA or NCCL failure) on failure.
  static std::unique_ptr<nccl_transport> join(const nccl_group_spec& spec,
                                              std::string& error);
  ~nccl_transport() override;

  int rank() const override;
  int size() const override;
  std::uint64_t generation() const override;
  bool needs_buffer() const override { return true; }
  transport_status send(int dst, std::uint64_t tag, const at::Tensor& t) override;
  transport_status recv(int src, std::uint64_t tag, at::Tensor& out,
                        std::chrono::milliseconds timeout) override;
  void abort(const std::string& reason) override;

  struct impl;

private:
  explicit nccl_transport(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace bamboo
