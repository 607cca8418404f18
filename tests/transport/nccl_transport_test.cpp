// The NCCL backend is built here; it moves tensors only where GPUs exist.
#include <catch2/catch.hpp>

#include <cstdio>

#ifdef BAMBOO_HAVE_NCCL
#include "transport/nccl_transport.hpp"

using namespace bamboo;

TEST_CASE("the NCCL backend reports its version and refuses to run without a GPU",
          "[transport]") {
  CHECK(nccl_transport::version().rfind("NCCL 2.", 0) == 0);
  if (nccl_transport::device_count() > 0) {
    WARN("a GPU is present: the no-GPU error path is not exercised here");
    return;
  }
  std::printf("skipping NCCL transfers: no CUDA device on this machine\n");
  nccl_group_spec spec;
  spec.unique_id.assign(128, 0);
  std::string error;
  auto t = nccl_transport::join(spec, error);
  CHECK_FALSE(t);
  CHECK_FALSE(error.empty()); // names the CUDA failure
  spec.unique_id.resize(3);
  CHECK_FALSE(nccl_transport::join(spec, error));
  CHECK(error.find("128 bytes") != std::string::npos);
}
#endif // without NCCL there is no GPU backend to test
