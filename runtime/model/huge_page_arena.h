// HugePageArena: storage for weights that the GEMVs stream, on 2 MiB pages where the kernel gives
// them. Decode reads every matmul weight once per step; on 4 KiB pages that stream costs a TLB miss
// per 4 KiB and the hardware prefetchers stop at every page boundary. On the Zen 4 VM a plain read of
// 200 MB ran 1.19-1.46x faster from memory advised MADV_HUGEPAGE (THP is "madvise" there, as on
// most distributions), and `small` bf16 decode at batch 1 on one thread 1.3-2.0x.
//
// A bump allocator over anonymous mappings of at least kChunkBytes, 2 MiB aligned and advised
// MADV_HUGEPAGE; every allocation is 64-byte aligned. Nothing is freed before the arena is: memory
// comes back when the arena is destroyed or Clear()ed. Pages of a chunk that no allocation touches
// are never faulted in, so a chunk's unused tail costs address space, not memory. Where the kernel
// has no huge pages to give, the memory is ordinary 4 KiB pages, which is what it was before.
//
// Not thread-safe: one loader thread allocates; any thread may read what was allocated.
#pragma once

#include <cstddef>
#include <vector>

namespace baton::runtime {

class HugePageArena {
 public:
  static constexpr size_t kHugePageBytes = size_t{2} << 20;
  static constexpr size_t kChunkBytes = size_t{64} << 20;
  static constexpr size_t kAlignment = 64;  // a cache line, and an AVX-512 register

  HugePageArena() = default;
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;
  HugePageArena(HugePageArena&& other) noexcept;
  HugePageArena& operator=(HugePageArena&& other) noexcept;
  ~HugePageArena() { Clear(); }

  // num_bytes (> 0) of 64-byte aligned storage, uninitialized; nullptr when no mapping can be made.
  std::byte* Allocate(size_t num_bytes);

  // Unmaps every chunk: each pointer Allocate returned is invalid afterwards.
  void Clear();

  // Sum of the chunks' sizes (address space reserved, not memory touched).
  size_t num_mapped_bytes() const;

 private:
  struct Chunk {
    std::byte* data;
    size_t num_bytes;
  };
  std::vector<Chunk> chunks_;
  size_t used_bytes_ = 0;  // of chunks_.back()
};

}  // namespace baton::runtime
