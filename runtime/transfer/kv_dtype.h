// The KV element type (KvPoolShape::dtype) as it travels between processes: a number in the shm
// segment header (KvSegmentHeader::dtype) and the TCP request (KvWireRequest::dtype), and a name in
// the hand-off proto (v1::KvSource::kv_dtype). A reader turns what it got back into a DType only
// through these, so a value it does not know (a newer peer's, or garbage) is an error it can name
// rather than an out-of-range enum. The names are DTypeName's (KvDTypeFromName, kernels/common/dtype.h, reads them).
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/common/dtype.h"

namespace baton::runtime {

// The number is DType's own value. Pinned here: a reordered enum would silently change what
// processes built before and after the change read from each other.
static_assert(static_cast<uint32_t>(DType::kF32) == 0 && static_cast<uint32_t>(DType::kBF16) == 2,
              "KV dtype codes on the wire and in shm headers changed");

constexpr uint32_t KvDTypeCode(DType dtype) { return static_cast<uint32_t>(dtype); }

// nullopt for a code that is not a KV pool's element type.
constexpr std::optional<DType> KvDTypeFromCode(uint32_t code) {
  if (code == KvDTypeCode(DType::kF32)) return DType::kF32;
  if (code == KvDTypeCode(DType::kBF16)) return DType::kBF16;
  return std::nullopt;
}

}  // namespace baton::runtime
