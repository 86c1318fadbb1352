// Memory for the CPU backend's large, long-lived buffers (packed weights, the activation
// arena) on transparent huge pages.
//
// Why: a GEMM streams every weight panel once per call, and with 4 KiB pages MiniLM's 42 MB of
// packed weights span about 10,000 pages, several times the second-level TLB; each of the four
// 576 KiB projection weights of a layer crosses 144 of them. Carving the weights from 2 MiB-
// aligned slabs that the kernel is asked to back with huge pages (madvise MADV_HUGEPAGE, which
// Debian's default THP setting "madvise" honours) made MiniLM at batch 8 6-8% faster on the
// 2-vCPU Xeon host (runs alternated, docs/benchmarks.md). Huge pages for the buffers of 2 MiB
// or more alone measured no faster: the small weights are what gain, and they only can when
// packed together.
//
// Where THP is off (or not Linux) the memory is ordinary: only speed differs.
#pragma once

#include <cstddef>

namespace rlx::cpu {

// `bytes` of 64-byte-aligned memory carved from a huge-page slab, or nullptr when memory runs
// out. Thread-safe. Free with huge_page_free. A slab holds many small requests (32 MiB slabs)
// and is returned to the system when the last piece in it is freed; a request larger than a
// quarter slab gets a slab of its own.
void* huge_page_alloc(size_t bytes);

// Frees memory from huge_page_alloc (nullptr is ignored). Thread-safe.
void huge_page_free(void* p);

// Slabs currently held (for tests: 0 once everything allocated has been freed).
int huge_page_slabs();

}  // namespace rlx::cpu
