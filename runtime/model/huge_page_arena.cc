#include "runtime/model/huge_page_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace baton::runtime {
namespace {

size_t RoundUp(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// An anonymous mapping of num_bytes (a multiple of 2 MiB) starting on a 2 MiB boundary: mmap gives
// 4 KiB alignment only, so map 2 MiB more and unmap the slack on both sides. nullptr on failure.
std::byte* MapAligned(size_t num_bytes) {
  const size_t align = HugePageArena::kHugePageBytes;
  void* raw = mmap(nullptr, num_bytes + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(begin, align);
  if (aligned > begin) munmap(raw, aligned - begin);
  const uintptr_t end = begin + num_bytes + align;
  if (end > aligned + num_bytes) munmap(reinterpret_cast<void*>(aligned + num_bytes), end - aligned - num_bytes);
  // Advice, not a requirement: without it (or where THP is off) the pages are 4 KiB ones.
  madvise(reinterpret_cast<void*>(aligned), num_bytes, MADV_HUGEPAGE);
  return reinterpret_cast<std::byte*>(aligned);
}

}  // namespace

HugePageArena::HugePageArena(HugePageArena&& other) noexcept
    : chunks_(std::exchange(other.chunks_, {})), used_bytes_(std::exchange(other.used_bytes_, 0)) {}

HugePageArena& HugePageArena::operator=(HugePageArena&& other) noexcept {
  if (this != &other) {
    Clear();
    chunks_ = std::exchange(other.chunks_, {});
    used_bytes_ = std::exchange(other.used_bytes_, 0);
  }
  return *this;
}

std::byte* HugePageArena::Allocate(size_t num_bytes) {
  const size_t rounded = RoundUp(std::max<size_t>(num_bytes, 1), kAlignment);
  if (chunks_.empty() || used_bytes_ + rounded > chunks_.back().num_bytes) {
    const size_t chunk_bytes = std::max(kChunkBytes, RoundUp(rounded, kHugePageBytes));
    std::byte* data = MapAligned(chunk_bytes);
    if (data == nullptr) return nullptr;
    chunks_.push_back({data, chunk_bytes});
    used_bytes_ = 0;
  }
  std::byte* result = chunks_.back().data + used_bytes_;
  used_bytes_ += rounded;
  return result;
}

void HugePageArena::Clear() {
  for (const Chunk& chunk : chunks_) munmap(chunk.data, chunk.num_bytes);
  chunks_.clear();
  used_bytes_ = 0;
}

size_t HugePageArena::num_mapped_bytes() const {
  size_t total = 0;
  for (const Chunk& chunk : chunks_) total += chunk.num_bytes;
  return total;
}

}  // namespace baton::runtime
