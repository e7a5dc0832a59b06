#include "runtime/kv_cache/block_hash.h"

#include <openssl/sha.h>

namespace baton::runtime {
namespace {

BlockHash Sha256Prefix(std::span<const unsigned char> bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(bytes.data(), bytes.size(), digest);
  BlockHash hash = 0;
  for (int i = 0; i < 8; ++i) hash = (hash << 8) | digest[i];
  return hash;
}

}  // namespace

BlockHash PrefixCacheRoot(std::string_view salt) {
  return Sha256Prefix({reinterpret_cast<const unsigned char*>(salt.data()), salt.size()});
}

BlockHash HashBlock(BlockHash parent, std::span<const int32_t> tokens) {
  // Little-endian bytes, whatever the host: the scheduler and the workers must agree.
  std::vector<unsigned char> bytes(8 + 4 * tokens.size());
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(parent >> (8 * i));
  for (size_t t = 0; t < tokens.size(); ++t) {
    const auto v = static_cast<uint32_t>(tokens[t]);
    for (int i = 0; i < 4; ++i) bytes[8 + 4 * t + i] = static_cast<unsigned char>(v >> (8 * i));
  }
  return Sha256Prefix(bytes);
}

void ExtendBlockHashes(BlockHash root, std::span<const int32_t> tokens, int block_size,
                       std::vector<BlockHash>* hashes) {
  const size_t num_full = tokens.size() / block_size;
  for (size_t b = hashes->size(); b < num_full; ++b) {
    const BlockHash parent = b == 0 ? root : (*hashes)[b - 1];
    hashes->push_back(HashBlock(parent, tokens.subspan(b * block_size, block_size)));
  }
}

}  // namespace baton::runtime
