// How tensors move between the ranks of one transport group. One group exists per
// generation of the cluster plan; on failover or re-plan the old group is aborted
// and dropped, never waited on. Backends: local (in-process hand-off), Gloo, NCCL.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace at {
class Tensor;
}

namespace bamboo {

// Named deadlines (as c10d names its timeouts): no blocking call waits forever.
inline constexpr std::chrono::milliseconds default_recv_timeout{std::chrono::minutes(5)};
inline constexpr std::chrono::milliseconds default_collective_timeout{
    std::chrono::minutes(5)};

enum class transport_errc {
  ok,
  timeout,   // the deadline passed
  aborted,   // abort() was called: the group's generation is over
  peer_lost, // the backend saw the peer go away
  invalid,   // bad rank or tensor
};

const char* to_string(transport_errc e);

struct transport_status {
  transport_errc code = transport_errc::ok;
  std::string detail;
  explicit operator bool() const { return code == transport_errc::ok; }
};

// Message tags: what a tensor is (activation, gradient, an owner's gradients
// for its shadow, an owner's whole state for a new shadow, or a pipeline's
// gradient sum between the same stage of data-parallel pipelines) of which
// micro-batch of which step: kind in bits 0-2, micro-batch in bits 3-12 (at
// most max_micro_batches a step, as the configuration checks), step from bit 13.
// Backends whose tags are narrower keep the low bits (Gloo: 31, so a tag comes
// back after 2^18 = 262,144 steps of one generation, long after every tensor
// of the earlier step was consumed).
enum class tensor_kind : std::uint64_t {
  activation = 0,
  gradient = 1,
  shadow_sync = 2,
  state_copy = 3,
  gradient_sum = 4, // micro-batch 0: a pipeline's own sum; 1: the sum of all
};
inline constexpr int tag_kind_bits = 3;
inline constexpr int tag_step_shift = tag_kind_bits + 10;
inline std::uint64_t make_tag(std::int64_t step, int micro_batch, tensor_kind kind) {
  return (static_cast<std::uint64_t>(step) << tag_step_shift) |
         (static_cast<std::uint64_t>(micro_batch) << tag_kind_bits) |
         static_cast<std::uint64_t>(kind);
}

class tensor_transport {
public:
  virtual ~tensor_transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::uint64_t generation() const = 0;
  // True when recv() needs `out` allocated with the expected shape and dtype
  // (network backends); false when it hands over the sender's tensor.
  virtual bool needs_buffer() const { return false; }

  // Hands `t` to rank `dst`. Does not wait for the receiver; `t` must not be
  // modified afterwards (the local backend shares its storage).
  virtual transport_status send(int dst, std::uint64_t tag, const at::Tensor& t) = 0;
  // Waits at most `timeout` for the tensor that `src` sent with `tag`.
  virtual transport_status
  recv(int src, std::uint64_t tag, at::Tensor& out,
       std::chrono::milliseconds timeout = default_recv_timeout) = 0;
  // Ends the group: every pending and future call fails with `aborted`.
  virtual void abort(const std::string& reason) = 0;

  // Receives waiting in this endpoint right now (a test waits for a recv to be
  // blocked, instead of sleeping, before it checks what releases it).
  int blocked_receives() const { return blocked_.load(); }

protected:
  // Counts a recv as blocked for its lifetime; backends hold one while they wait.
  class blocked_scope {
  public:
    explicit blocked_scope(std::atomic<int>& n) : n_(n) { ++n_; }
    ~blocked_scope() { --n_; }
    blocked_scope(const blocked_scope&) = delete;
    blocked_scope& operator=(const blocked_scope&) = delete;

  private:
    std::atomic<int>& n_;
  };
  std::atomic<int> blocked_{0};

  // True when `peer` is another rank of this group; every backend checks so.
  bool valid_peer(int peer) const { return peer >= 0 && peer < size() && peer != rank(); }
};

} // namespace bamboo
