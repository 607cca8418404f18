#include "model/allocator.hpp"

#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace bamboo {

void keep_freed_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
#if defined(__GLIBC__)
    // 32 MiB is glibc's largest mmap threshold (HEAP_MAX_SIZE / 2 on 64 bits);
    // a tensor larger than that is rare between stages and cheap to map.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  });
}

} // namespace bamboo
