// PrefixIndex: which KV blocks each instance's prefix cache holds, as its worker reports them (the
// block hashes its cache names and evicts, on every heartbeat), for KV-aware routing; and
// PromptHashes, a prompt's block hashes computed the way the workers compute them
// (runtime/kv_cache/block_hash.h), so the two can be matched.
//
// A view, not the truth: events arrive a heartbeat late and may be lost (the worker then sends a
// reset, a snapshot of its whole cache, on the next one), so a match only weighs a routing choice,
// and a wrong one costs a recompute on the instance, never a failed request. A worker that
// restarts is a new incarnation with an empty entry. Not thread-safe: WorkerRegistry keeps it under
// its lock.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "runtime/kv_cache/block_allocator.h"
#include "runtime/kv_cache/block_hash.h"

namespace baton::scheduler {

using runtime::BlockHash;

class PrefixIndex {
 public:
  // Applies an instance's events in order; a reset first forgets what it held. An instance whose
  // view grows past max_blocks (removals lost) starts again empty, to be refilled by its next reset.
  void Apply(const std::string& incarnation_id, const runtime::BlockAllocator::CacheEvents& events,
             size_t max_blocks);
  void Forget(const std::string& incarnation_id);
  // How many of the leading hashes the instance holds, in a row.
  int MatchedBlocks(const std::string& incarnation_id, std::span<const BlockHash> hashes) const;
  size_t NumBlocks(const std::string& incarnation_id) const;

 private:
  absl::flat_hash_map<std::string, absl::flat_hash_set<BlockHash>> blocks_;
};

// A prompt's full blocks' hashes, for each (salt, block size) an instance names, computed once.
class PromptHashes {
 public:
  explicit PromptHashes(std::vector<int32_t> tokens) : tokens_(std::move(tokens)) {}
  int num_tokens() const { return static_cast<int>(tokens_.size()); }
  std::span<const BlockHash> For(const std::string& salt, int block_size);

 private:
  std::vector<int32_t> tokens_;
  std::vector<std::pair<std::pair<std::string, int>, std::vector<BlockHash>>> hashes_;
};

}  // namespace baton::scheduler
