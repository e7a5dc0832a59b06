#include "scheduler/global/prefix_index.h"

namespace baton::scheduler {

void PrefixIndex::Apply(const std::string& incarnation_id,
                        const runtime::BlockAllocator::CacheEvents& events, size_t max_blocks) {
  if (events.empty()) return;
  absl::flat_hash_set<BlockHash>& blocks = blocks_[incarnation_id];
  if (events.reset) blocks.clear();
  for (const runtime::BlockAllocator::CacheEvent& event : events.events) {
    if (event.stored) {
      blocks.insert(event.hash);
    } else {
      blocks.erase(event.hash);
    }
  }
  if (blocks.size() > max_blocks) blocks.clear();
}

void PrefixIndex::Forget(const std::string& incarnation_id) { blocks_.erase(incarnation_id); }

int PrefixIndex::MatchedBlocks(const std::string& incarnation_id, std::span<const BlockHash> hashes) const {
  auto it = blocks_.find(incarnation_id);
  if (it == blocks_.end()) return 0;
  int matched = 0;
  while (matched < static_cast<int>(hashes.size()) && it->second.contains(hashes[matched])) ++matched;
  return matched;
}

size_t PrefixIndex::NumBlocks(const std::string& incarnation_id) const {
  auto it = blocks_.find(incarnation_id);
  return it == blocks_.end() ? 0 : it->second.size();
}

std::span<const BlockHash> PromptHashes::For(const std::string& salt, int block_size) {
  for (const auto& [key, hashes] : hashes_) {
    if (key.first == salt && key.second == block_size) return hashes;
  }
  std::vector<BlockHash> hashes;
  runtime::ExtendBlockHashes(runtime::PrefixCacheRoot(salt), tokens_, block_size, &hashes);
  hashes_.emplace_back(std::pair(salt, block_size), std::move(hashes));
  return hashes_.back().second;
}

}  // namespace baton::scheduler
