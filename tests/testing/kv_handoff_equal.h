// Field-by-field equality of KvHandoffs for tests (KvSource, in kv_transport.h, has no operator==).
#pragma once

#include <tuple>

#include "runtime/transfer/kv_handoff.h"

namespace baton::testing {

inline bool SameKvSource(const runtime::KvSource& a, const runtime::KvSource& b) {
  return std::tie(a.hostname, a.boot_id, a.shm_name, a.tcp_address) ==
         std::tie(b.hostname, b.boot_id, b.shm_name, b.tcp_address);
}

inline bool SameKvHandoff(const runtime::KvHandoff& a, const runtime::KvHandoff& b) {
  if (!(a.model_shape == b.model_shape) || !(a.layout == b.layout) || a.blocks != b.blocks ||
      a.num_tokens != b.num_tokens || a.rank_sources.size() != b.rank_sources.size()) {
    return false;
  }
  for (size_t r = 0; r < a.rank_sources.size(); ++r) {
    if (!SameKvSource(a.rank_sources[r], b.rank_sources[r])) return false;
  }
  return true;
}

}  // namespace baton::testing
