#include "runtime/backend/caching_allocator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {

namespace {

constexpr size_t kSmallRound = 512;
constexpr size_t kLargeThreshold = size_t{1} << 20;
constexpr size_t kLargeRound = size_t{2} << 20;

size_t RoundUp(size_t bytes, size_t multiple) { return (bytes + multiple - 1) / multiple * multiple; }

}  // namespace

CachingAllocator::~CachingAllocator() {
  // A block still handed out belongs to a DeviceBuffer outliving its backend: a bug elsewhere, but
  // not a reason to leak device memory. Errors are dropped: nobody is left to report them to.
  for (const auto& [ptr, bytes] : live_) runtime_->Free(ptr).IgnoreError();
  EmptyCache().IgnoreError();
}

size_t CachingAllocator::RoundSize(size_t bytes) {
  return bytes < kLargeThreshold ? RoundUp(std::max<size_t>(bytes, 1), kSmallRound)
                                 : RoundUp(bytes, kLargeRound);
}

absl::StatusOr<void*> CachingAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("CachingAllocator: Allocate of 0 bytes");
  const size_t size = RoundSize(bytes);
  void* ptr = nullptr;
  if (auto it = cached_.find(size); it != cached_.end()) {
    ptr = it->second;
    cached_.erase(it);
    stats_.bytes_cached -= size;
    ++stats_.num_cache_hits;
  } else {
    absl::StatusOr<void*> fresh = runtime_->Malloc(size);
    if (absl::IsResourceExhausted(fresh.status()) && !cached_.empty()) {
      RETURN_IF_ERROR(EmptyCache());
      fresh = runtime_->Malloc(size);
    }
    if (!fresh.ok()) {
      if (absl::IsResourceExhausted(fresh.status())) {
        return absl::ResourceExhaustedError(absl::StrCat(
            fresh.status().message(), " (", stats_.bytes_in_use, " bytes in use by the allocator)"));
      }
      return fresh.status();
    }
    ptr = *fresh;
    ++stats_.num_runtime_mallocs;
    stats_.bytes_reserved += size;
    stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
  }
  live_.emplace(ptr, size);
  stats_.bytes_in_use += size;
  runtime_->NoteInUse(ptr, bytes);
  return ptr;
}

void CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  auto it = live_.find(ptr);
  BATON_CHECK(it != live_.end());  // not from Allocate(), or freed twice
  const size_t size = it->second;
  live_.erase(it);
  stats_.bytes_in_use -= size;
  stats_.bytes_cached += size;
  cached_.emplace(size, ptr);
  runtime_->NoteCached(ptr);
}

absl::Status CachingAllocator::EmptyCache() {
  absl::Status first_error;
  for (const auto& [size, ptr] : cached_) {
    absl::Status status = runtime_->Free(ptr);
    if (first_error.ok()) first_error = status;
    stats_.bytes_cached -= size;
    stats_.bytes_reserved -= size;
    ++stats_.num_runtime_frees;
  }
  cached_.clear();
  return first_error;
}

}  // namespace baton::runtime
