// Measured (docs/PERFORMANCE.md, "Issue 17: pruning by a lower bound"): the pruned 70B/1,024-GPU search with one
// thread spent 8.7 of 38.9 s in the kernel, mapping and faulting pages; with these settings 1.5 of 26.0 s. Keeping
// 1 GiB of freed heap instead of 64 MiB was no faster and held 0.4 GB more with two threads.
#include "core/allocator.hpp"

#include <cstdlib>  // defines __GLIBC__ where glibc is the C library
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace twin {

void keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

}  // namespace twin
