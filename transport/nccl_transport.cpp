#include "transport/nccl_transport.hpp"

#include <cstring>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace bamboo {

namespace {

std::string cuda_error(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

std::string nccl_error(const char* what, ncclResult_t r) {
  return std::string(what) + ": " + ncclGetErrorString(r);
}

} // namespace

struct nccl_transport::impl {
  // A device buffer that grows to the largest tensor seen (a member type: in
  // a unity batch, one of an anonymous namespace here makes gcc warn).
  struct device_buffer {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    cudaError_t reserve(std::size_t n) {
      if (n <= bytes)
        return cudaSuccess;
      if (ptr)
        cudaFree(ptr);
      bytes = 0;
      auto e = cudaMalloc(&ptr, n);
      if (e == cudaSuccess)
        bytes = n;
      return e;
    }
    ~device_buffer() {
      if (ptr)
        cudaFree(ptr);
    }
  };

  nccl_group_spec spec;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  device_buffer send_buf, recv_buf;
  std::mutex mtx; // one operation at a time on the stream
  std::mutex abort_mtx;
  bool aborted = false;
  std::string reason;

  bool is_aborted(std::string& why) {
    std::lock_guard<std::mutex> guard{abort_mtx};
    why = reason;
    return aborted;
  }

  // Polls the stream until it drains, the deadline passes, or the group is
  // aborted: NCCL calls never block without a deadline here.
  transport_status drain(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::string why;
      if (is_aborted(why))
        return {transport_errc::aborted, why};
      auto q = cudaStreamQuery(stream);
      if (q == cudaSuccess)
        return {};
      if (q != cudaErrorNotReady)
        return {transport_errc::peer_lost, cuda_error("stream", q)};
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress)
        return {transport_errc::peer_lost, nccl_error("communicator", async)};
      if (std::chrono::steady_clock::now() > deadline)
        return {transport_errc::timeout, "NCCL operation did not finish within " +
                                             std::to_string(timeout.count()) + " ms"};
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
};

std::string nccl_transport::version() {
  int v = 0;
  auto r = ncclGetVersion(&v);
  if (r != ncclSuccess)
    return nccl_error("ncclGetVersion", r);
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

int nccl_transport::device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::vector<std::uint8_t> nccl_transport::make_unique_id(std::string& error) {
  ncclUniqueId id;
  auto r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    error = nccl_error("ncclGetUniqueId", r);
    return {};
  }
  return std::vector<std::uint8_t>(id.internal, id.internal + NCCL_UNIQUE_ID_BYTES);
}

nccl_transport::nccl_transport(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

std::unique_ptr<nccl_transport> nccl_transport::join(const nccl_group_spec& spec,
                                                     std::string& error) {
  if (spec.unique_id.size() != NCCL_UNIQUE_ID_BYTES) {
    error = "NCCL unique id must have " + std::to_string(NCCL_UNIQUE_ID_BYTES) + " bytes";
    return nullptr;
  }
  if (auto e = cudaSetDevice(spec.device); e != cudaSuccess) {
    error = cuda_error("cudaSetDevice", e);
    return nullptr;
  }
  auto p = std::make_unique<impl>();
  p->spec = spec;
  if (auto e = cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    error = cuda_error("cudaStreamCreate", e);
    return nullptr;
  }
  ncclUniqueId id;
  std::memcpy(id.internal, spec.unique_id.data(), NCCL_UNIQUE_ID_BYTES);
  // Non-blocking init, so that forming the group also has a deadline.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  auto r = ncclCommInitRankConfig(&p->comm, spec.size, id, spec.rank, &config);
  const auto deadline = std::chrono::steady_clock::now() + spec.timeout;
  while (r == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline) {
      ncclCommAbort(p->comm);
      p->comm = nullptr;
      error = "NCCL group of generation " + std::to_string(spec.generation) +
              " did not form within " + std::to_string(spec.timeout.count()) + " ms";
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ncclCommGetAsyncError(p->comm, &r);
  }
  if (r != ncclSuccess) {
    if (p->comm)
      ncclCommAbort(p->comm);
    p->comm = nullptr;
    error = nccl_error("ncclCommInitRankConfig", r);
    return nullptr;
  }
  return std::unique_ptr<nccl_transport>(new nccl_transport(std::move(p)));
}

nccl_transport::~nccl_transport() {
  abort("transport closed");
  if (impl_->stream)
    cudaStreamDestroy(impl_->stream);
}

int nccl_transport::rank() const {
  return impl_->spec.rank;
}

int nccl_transport::size() const {
  return impl_->spec.size;
}

std::uint64_t nccl_transport::generation() const {
  return impl_->spec.generation;
}

transport_status nccl_transport::send(int dst, std::uint64_t, const at::Tensor& t) {
  std::string why;
  if (impl_->is_aborted(why))
    return {transport_errc::aborted, why};
  if (!valid_peer(dst) || !t.defined())
    return {transport_errc::invalid, "send to rank " + std::to_string(dst)};
  // NCCL matches sends and receives by order per peer, not by tag: the
  // schedule issues them in the same order on both sides.
  auto c = t.contiguous();
  const std::size_t bytes = c.numel() * c.element_size();
  std::lock_guard<std::mutex> guard{impl_->mtx};
  if (auto e = impl_->send_buf.reserve(bytes); e != cudaSuccess)
    return {transport_errc::invalid, cuda_error("cudaMalloc", e)};
  if (auto e = cudaMemcpyAsync(impl_->send_buf.ptr, c.data_ptr(), bytes,
                               cudaMemcpyHostToDevice, impl_->stream);
      e != cudaSuccess)
    return {transport_errc::invalid, cuda_error("cudaMemcpyAsync", e)};
  auto r =
      ncclSend(impl_->send_buf.ptr, bytes, ncclUint8, dst, impl_->comm, impl_->stream);
  if (r != ncclSuccess && r != ncclInProgress)
    return {transport_errc::peer_lost, nccl_error("ncclSend", r)};
  // The staging buffer is reused: wait until this send has left it.
  return impl_->drain(impl_->spec.timeout);
}

transport_status nccl_transport::recv(int src, std::uint64_t, at::Tensor& out,
                                      std::chrono::milliseconds timeout) {
  std::string why;
  if (impl_->is_aborted(why))
    return {transport_errc::aborted, why};
  if (!valid_peer(src) || !out.defined())
    return {transport_errc::invalid, "recv from rank " + std::to_string(src) +
                                         " needs a tensor of the right shape"};
  auto c = out.is_contiguous() ? out : out.contiguous();
  const std::size_t bytes = c.numel() * c.element_size();
  std::lock_guard<std::mutex> guard{impl_->mtx};
  if (auto e = impl_->recv_buf.reserve(bytes); e != cudaSuccess)
    return {transport_errc::invalid, cuda_error("cudaMalloc", e)};
  auto r =
      ncclRecv(impl_->recv_buf.ptr, bytes, ncclUint8, src, impl_->comm, impl_->stream);
  if (r != ncclSuccess && r != ncclInProgress)
    return {transport_errc::peer_lost, nccl_error("ncclRecv", r)};
  if (auto e = cudaMemcpyAsync(c.data_ptr(), impl_->recv_buf.ptr, bytes,
                               cudaMemcpyDeviceToHost, impl_->stream);
      e != cudaSuccess)
    return {transport_errc::invalid, cuda_error("cudaMemcpyAsync", e)};
  transport_status st;
  {
    const blocked_scope blocked{blocked_};
    st = impl_->drain(timeout);
  }
  if (!st) {
    // A stuck receive would block every later operation on this stream.
    abort(st.detail);
    return st;
  }
  out = c;
  return {};
}

void nccl_transport::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> guard{impl_->abort_mtx};
    if (impl_->aborted)
      return;
    impl_->aborted = true;
    impl_->reason = reason;
  }
  if (impl_->comm)
    ncclCommAbort(impl_->comm); // releases kernels blocked on a dead peer
  impl_->comm = nullptr;
}

} // namespace bamboo
