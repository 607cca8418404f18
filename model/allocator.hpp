// The C library's allocator, tuned for training: glibc returns freed blocks of
// 128 KiB and more to the system (munmap, and trimming the heap's top), so each
// step's activations and gradients, allocated again a moment later, come back
// as fresh zeroed pages: a page fault per 4 KiB. On the benchmark GPT that was
// about a fifth of the S=1 step (bench/peer_bench.cpp, and PyTorch's own CPU advice
// to use jemalloc or tcmalloc). Keeping freed memory in the heap removes it.
#pragma once

namespace bamboo {

// Once per process (later calls do nothing): blocks up to 32 MiB come from the
// heap and the heap's top is kept. Numerics are unchanged. No-op without glibc.
void keep_freed_memory();

} // namespace bamboo
