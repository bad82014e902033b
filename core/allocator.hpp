// The C library allocator set for what twin does most: a search lowers and simulates thousands of op graphs of
// tens of MB each, one after another. With glibc's defaults each of them is mapped from the kernel and unmapped
// again, and its pages faulted in anew; kept on the heap, a freed graph's memory serves the next.
#pragma once

namespace twin {

// Allocations up to 256 MiB come from the heap and up to 64 MiB of freed heap is kept (glibc's mallopt;
// a no-op elsewhere). Call once, at program start.
void keep_freed_memory_for_reuse();

}  // namespace twin
