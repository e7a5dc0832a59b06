// BlockHash: the name of a full KV block's content, for the prefix cache (block_allocator.h).
//
// A block's K/V depends on every token before it, so its hash chains: HashBlock(parent, tokens)
// covers the parent block's hash and this block's token ids, and the chain starts at a root that
// covers whatever else changes the K/V (the model, its weight and KV dtypes, the block size: the
// engine's salt). Equal hashes then mean equal K/V, on any instance of the same salt, so the
// global scheduler can compute a prompt's hashes and match them against what instances report.
// SHA-256, truncated to 64 bits: collisions would hand one request another's K/V, so the hash must
// not be one a client can steer (vLLM's sha256 prefix-caching hash, for the same reason).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace baton::runtime {

using BlockHash = uint64_t;

// The chain's start for one salt.
BlockHash PrefixCacheRoot(std::string_view salt);
// The hash of a block holding `tokens` after the block hashed `parent` (the root for the first).
BlockHash HashBlock(BlockHash parent, std::span<const int32_t> tokens);
// Appends to *hashes the hashes of tokens' full blocks past the hashes.size() already there.
void ExtendBlockHashes(BlockHash root, std::span<const int32_t> tokens, int block_size,
                       std::vector<BlockHash>* hashes);

}  // namespace baton::runtime
