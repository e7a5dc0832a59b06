#include "runtime/transfer/kv_grants.h"

#include "absl/strings/str_cat.h"
#include "runtime/process/deployment_secret.h"

namespace baton::runtime {

KvGrants::Read::~Read() { grants_.EndRead(token_, id_); }

absl::StatusOr<std::string> KvGrants::Grant(std::span<const BlockId> blocks) {
  absl::StatusOr<std::string> token = SecureRandomBytes(kTokenBytes);
  if (!token.ok()) return token.status();
  absl::MutexLock lock(&mu_);
  // 128 random bits do not collide; a live token is never replaced all the same.
  auto [it, inserted] = grants_.try_emplace(*token);
  if (!inserted) return absl::InternalError("KV grant: a token drawn twice");
  it->second.blocks.insert(blocks.begin(), blocks.end());
  return token;
}

void KvGrants::Revoke(const std::string& token) {
  absl::MutexLock lock(&mu_);
  auto it = grants_.find(token);
  if (it == grants_.end()) return;
  GrantState& grant = it->second;
  if (!grant.revoked) {
    grant.revoked = true;
    if (grant.reads.empty()) {
      grants_.erase(it);
      return;
    }
    for (auto& [id, cut] : grant.reads) cut();
  }
  // The last read to end erases the grant.
  while (grants_.contains(token)) read_ended_.Wait(&mu_);
}

absl::StatusOr<std::unique_ptr<KvGrants::Read>> KvGrants::BeginRead(
    absl::string_view token, std::span<const BlockSpan> spans, std::function<void()> cut) {
  absl::MutexLock lock(&mu_);
  auto it = grants_.find(token);
  if (it == grants_.end() || it->second.revoked) {
    return absl::PermissionDeniedError(
        "the pull presents no live KV grant (the request's KV was released, expired, or never "
        "granted to it)");
  }
  GrantState& grant = it->second;
  for (const BlockSpan& span : spans) {
    for (int64_t b = span.start; b < int64_t{span.start} + span.num_blocks; ++b) {
      if (!grant.blocks.contains(static_cast<BlockId>(b))) {
        return absl::PermissionDeniedError(
            absl::StrCat("block ", b, " is not granted to this pull"));
      }
    }
  }
  const uint64_t id = next_read_id_++;
  grant.reads.emplace(id, std::move(cut));
  return std::unique_ptr<Read>(new Read(*this, std::string(token), id));
}

void KvGrants::EndRead(const std::string& token, uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = grants_.find(token);
  if (it == grants_.end()) return;
  it->second.reads.erase(id);
  if (it->second.revoked && it->second.reads.empty()) {
    grants_.erase(it);
    read_ended_.SignalAll();
  }
}

int KvGrants::size() const {
  absl::MutexLock lock(&mu_);
  int live = 0;
  for (const auto& [token, grant] : grants_) live += grant.revoked ? 0 : 1;
  return live;
}

}  // namespace baton::runtime
