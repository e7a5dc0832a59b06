// The KV element type (KvPoolShape::dtype) as it travels between processes: a number in the shm
// segment header (KvSegmentHeader::dtype) and the TCP request (KvWireRequest::dtype), and a name in
// the hand-off proto (v1::KvSource::kv_dtype). A reader turns what it got back into a DType only
// through these, so a value it does not know (a newer peer's, or garbage) is an error it can name
// rather than an out-of-range enum.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/common/dtype.h"

namespace baton::runtime {

// The number is DType's own value. Pinned here: a reordered enum would silently change what
// processes built before and after the change read from each other.
static_assert(static_cast<uint32_t>(DType::kF32) == 0 && static_cast<uint32_t>(DType::kBF16) == 2,
              "KV dtype codes on the wire and in shm headers changed");

// The element types a KvPool holds (KvPool::Create refuses the others).
constexpr bool IsKvDType(DType dtype) { return dtype == DType::kF32 || dtype == DType::kBF16; }

constexpr uint32_t KvDTypeCode(DType dtype) { return static_cast<uint32_t>(dtype); }

// nullopt for a code that is not a KV pool's element type.
constexpr std::optional<DType> KvDTypeFromCode(uint32_t code) {
  if (code == KvDTypeCode(DType::kF32)) return DType::kF32;
  if (code == KvDTypeCode(DType::kBF16)) return DType::kBF16;
  return std::nullopt;
}

// "f32" / "bf16" (DTypeName); nullopt for any other name.
constexpr std::optional<DType> KvDTypeFromName(std::string_view name) {
  if (name == DTypeName(DType::kF32)) return DType::kF32;
  if (name == DTypeName(DType::kBF16)) return DType::kBF16;
  return std::nullopt;
}

}  // namespace baton::runtime
