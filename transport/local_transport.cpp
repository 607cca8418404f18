#include "transport/local_transport.hpp"

#include <ATen/ATen.h>

namespace bamboo {

const char* to_string(transport_errc e) {
  switch (e) {
  case transport_errc::ok: return "ok";
  case transport_errc::timeout: return "timed out";
  case transport_errc::aborted: return "aborted";
  case transport_errc::peer_lost: return "peer lost";
  case transport_errc::invalid: return "invalid argument";
  }
  return "unknown transport error";
}

struct local_hub::impl {
  using key = std::tuple<int, int, std::uint64_t>; // dst, src, tag
  mutable std::mutex mtx;
  std::condition_variable cv;
  std::map<key, at::Tensor> boxes;
  bool aborted = false;
  std::string reason;
};

local_hub::local_hub(int size, std::uint64_t generation)
    : impl_(std::make_unique<impl>()), size_(size), generation_(generation) {}

local_hub::~local_hub() = default;

std::unique_ptr<local_transport> local_hub::endpoint(int rank) {
  return std::make_unique<local_transport>(shared_from_this(), rank);
}

void local_hub::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    if (impl_->aborted)
      return;
    impl_->aborted = true;
    impl_->reason = reason;
    impl_->boxes.clear();
  }
  impl_->cv.notify_all();
}

bool local_hub::aborted() const {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  return impl_->aborted;
}

std::size_t local_hub::pending() const {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  return impl_->boxes.size();
}

local_transport::local_transport(std::shared_ptr<local_hub> hub, int rank)
    : hub_(std::move(hub)), rank_(rank) {}

int local_transport::size() const {
  return hub_->size();
}

std::uint64_t local_transport::generation() const {
  return hub_->generation();
}

transport_status local_transport::send(int dst, std::uint64_t tag, const at::Tensor& t) {
  if (!valid_peer(dst) || !t.defined())
    return {transport_errc::invalid, "send to rank " + std::to_string(dst)};
  auto& st = *hub_->impl_;
  {
    std::lock_guard<std::mutex> guard{st.mtx};
    if (st.aborted)
      return {transport_errc::aborted, st.reason};
    auto [it, fresh] = st.boxes.emplace(local_hub::impl::key{dst, rank_, tag}, t);
    if (!fresh)
      return {transport_errc::invalid, "tag sent twice to rank " + std::to_string(dst)};
  }
  st.cv.notify_all();
  return {};
}

transport_status local_transport::recv(int src, std::uint64_t tag, at::Tensor& out,
                                       std::chrono::milliseconds timeout) {
  if (!valid_peer(src))
    return {transport_errc::invalid, "recv from rank " + std::to_string(src)};
  auto& st = *hub_->impl_;
  const local_hub::impl::key k{rank_, src, tag};
  std::unique_lock<std::mutex> lock{st.mtx};
  const blocked_scope blocked{blocked_}; // counted under the lock abort() takes
  const bool ready =
      st.cv.wait_for(lock, timeout, [&] { return st.aborted || st.boxes.count(k) > 0; });
  if (st.aborted)
    return {transport_errc::aborted, st.reason};
  if (!ready)
    return {transport_errc::timeout, "no tensor from rank " + std::to_string(src) +
                                         " within " + std::to_string(timeout.count()) +
                                         " ms"};
  auto it = st.boxes.find(k);
  out = std::move(it->second);
  st.boxes.erase(it);
  return {};
}

void local_transport::abort(const std::string& reason) {
  hub_->abort(reason);
}

} // namespace bamboo
