// CachingAllocator: device memory for the GPU backend, over a GpuRuntime's Malloc/Free. A freed
// block is kept and handed out again for the next request of its size class, so that once a
// workload has warmed up (the step's scratch reserved, the weights and the KV pool in place) the
// hot path never calls Malloc (cudaMalloc synchronizes the device and costs milliseconds).
//
// Size classes: a request is rounded up to a multiple of 512 bytes below 1 MiB, and to a multiple
// of 2 MiB from 1 MiB up (PyTorch's rounding), and reuses only a cached block of exactly its class.
// No block is split, so the waste per block is < 512 B (small) or < 2 MiB (large).
//
// Reusing a block freed while an earlier op on the stream may still read it is safe because the
// backend has one stream: every later use is ordered after every earlier one.
//
// When the runtime is out of memory, Allocate frees the cache and tries once more.
// Not thread-safe (the backend's one thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/backend/gpu_runtime.h"

namespace baton::runtime {

class CachingAllocator {
 public:
  struct Stats {
    size_t bytes_in_use = 0;         // blocks handed out and not freed (rounded sizes)
    size_t bytes_cached = 0;         // freed blocks kept for reuse
    size_t bytes_reserved = 0;       // bytes_in_use + bytes_cached: what the runtime gave us
    size_t peak_bytes_reserved = 0;  // the most bytes_reserved ever was
    int64_t num_runtime_mallocs = 0;
    int64_t num_runtime_frees = 0;
    int64_t num_cache_hits = 0;  // Allocate calls served from the cache
  };

  // `runtime` must outlive the allocator.
  explicit CachingAllocator(GpuRuntime* runtime) : runtime_(runtime) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  // Returns every block, cached or still handed out, to the runtime.
  ~CachingAllocator();

  // The size class of a request of `bytes`.
  static size_t RoundSize(size_t bytes);

  // `bytes` > 0 (InvalidArgument otherwise). ResourceExhausted when the runtime has no room even
  // after the cache is emptied.
  absl::StatusOr<void*> Allocate(size_t bytes);
  // `ptr` from Allocate() and not freed since, or nullptr (checked: anything else aborts, as a
  // double free would). The block goes to the cache.
  void Free(void* ptr);
  // Returns every cached block to the runtime; the first error of the runtime's Free, if any.
  absl::Status EmptyCache();

  const Stats& stats() const { return stats_; }

 private:
  GpuRuntime* runtime_;
  std::unordered_map<void*, size_t> live_;  // handed-out block -> its class size
  std::multimap<size_t, void*> cached_;     // class size -> freed block
  Stats stats_;
};

}  // namespace baton::runtime
