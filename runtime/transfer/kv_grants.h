// KvGrants: which blocks of a prefill instance's KV pools a pull may read. A grant is the capability
// that makes a KV server send a request's blocks, and nothing else, to whoever presents it.
//
// When a prefill worker holds a request's KV for a hand-off it grants the request's blocks (Grant)
// and puts the grant's token — 16 random bytes — in the KvHandoff; the scheduler carries it to the
// decode worker, whose pulls present it in every request (tcp_wire.h). The KV servers of the
// instance's ranks share one KvGrants (one allocator: the same block ids on every rank) and serve a
// request only when every block it reads belongs to the live grant it presents (BeginRead).
//
// Before the worker frees the blocks (release, lease expiry, cancellation) it revokes the grant:
// reads not begun yet are refused, reads in flight are cut (each read's `cut`, which shuts its
// connection down), and Revoke returns only once no read of the grant is left. So freed blocks,
// which the next request writes, are never sent to anyone. A read in flight ends as soon as its
// send notices the cut (at once for a host pool's socket send; a send over a KV link ends by its own
// deadline, the server's io_timeout).
//
// What a grant cannot cover: a decode worker on the same host may map a host pool's shared-memory
// segment (shm_transport.h), which its user can read whole; the grant guards the network path.
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/kv_cache/block_allocator.h"

namespace baton::runtime {

// Blocks [start, start + num_blocks) of a pool.
struct BlockSpan {
  BlockId start = 0;
  int32_t num_blocks = 0;
};

class KvGrants {
 public:
  static constexpr size_t kTokenBytes = 16;

  // A read of granted blocks in progress; ending it (destruction) lets a waiting Revoke return.
  class Read {
   public:
    ~Read();
    Read(const Read&) = delete;
    Read& operator=(const Read&) = delete;

   private:
    friend class KvGrants;
    Read(KvGrants& grants, std::string token, uint64_t id)
        : grants_(grants), token_(std::move(token)), id_(id) {}
    KvGrants& grants_;
    const std::string token_;
    const uint64_t id_;
  };

  // A new grant of `blocks` (order and repeats do not matter); its token, kTokenBytes random bytes.
  // Internal if the kernel gives no randomness.
  absl::StatusOr<std::string> Grant(std::span<const BlockId> blocks);

  // Ends the grant (see the top of the file); returns once no read of it is in flight. A token that
  // names no grant (never granted, or revoked with no read left) is a no-op.
  void Revoke(const std::string& token);

  // Starts a read of `spans` under `token`: PermissionDenied, naming the first block outside it,
  // unless the token names a live grant holding every block of every span. `cut` runs, on the
  // revoking thread, if the grant is revoked while the read is in flight; it must make the read end
  // soon and must not call back into this object.
  absl::StatusOr<std::unique_ptr<Read>> BeginRead(absl::string_view token,
                                                  std::span<const BlockSpan> spans,
                                                  std::function<void()> cut);

  // Live grants (tests and stats).
  int size() const;

 private:
  struct GrantState {
    absl::flat_hash_set<BlockId> blocks;
    absl::flat_hash_map<uint64_t, std::function<void()>> reads;  // in flight, by Read id: their cut
    bool revoked = false;
  };

  void EndRead(const std::string& token, uint64_t id);

  mutable absl::Mutex mu_;
  // Revoked grants stay here, refusing reads, until their last read ends.
  absl::flat_hash_map<std::string, GrantState> grants_ ABSL_GUARDED_BY(mu_);
  uint64_t next_read_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::CondVar read_ended_;  // a revoked grant's last read ended
};

}  // namespace baton::runtime
