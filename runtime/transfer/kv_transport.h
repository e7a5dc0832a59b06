// KvTransport: moves a request's KV blocks from a prefill instance's pool into a decode instance's
// pool.
//
// Lifecycle (after vLLM's KV connector, split into a scheduler side and a worker side):
//  1. Prefill worker: when a request's prefill finishes, the worker keeps the request's blocks
//     (the sequence stays in the engine, holding its KV) and reports a KvHandoff (kv_handoff.h:
//     every rank's KvSource, its layout, the block ids in token order, num_tokens) to the
//     scheduler with the first token; the decode worker turns it into one KvPullSpec per rank.
//     It must neither write nor free those blocks until step 4 or until the lease passes.
//  2. Scheduler side: picks a decode instance whose last reported load shows room for the blocks
//     (the least loaded such one); when none shows room, the least loaded live one, which queues
//     the request (pull = backpressure: the decode worker pulls only once it has allocated room),
//     and forwards the spec.
//  3. Decode worker: waits for room in its KV admission queue (runtime/worker/kv_admission_queue.h),
//     allocates the destination blocks, then calls Pull() on the thread serving the request (Pull
//     blocks the caller until the bytes have landed or it fails; never call it on the engine
//     thread). On OK the destination blocks hold the source bytes, the worker reports the transfer
//     (a kv_transferred event) and the request joins the decode batch. On error the destination
//     blocks hold unspecified bytes: the decode worker frees them and ends its Decode call with the
//     pull's status.
//  4. Scheduler side: on the kv_transferred report, or when the Decode call ends without one (for
//     any status), it tells the prefill worker to release the source blocks (Release). A pull
//     that fails because its source is unreachable ends the Decode call ABORTED (Worker::Decode):
//     the scheduler then runs the prompt again on a live prefill instance and hands it off again,
//     without blaming the decode worker (scheduler/global/request_flow.h). A
//     prefill worker also frees held blocks whose lease (set by the scheduler, counted from the
//     end of the prefill, 30 s by default) has passed, so a dead decode worker or scheduler cannot
//     leak them; the lease is not extended while a request waits for room or is being pulled.
//  When Pull returns (for any status) the transport no longer touches `dst`: a pull that timed
//  out leaves no copy running. The source side may still be sending bytes of a cancelled TCP pull;
//  that is harmless because it only reads its pool, and is why step 4 waits for the decode
//  worker's report.
//
// Errors (absl::Status codes): InvalidArgument for a malformed spec (shape mismatch, block count
// not ceil(num_tokens / block_size), out-of-range or duplicate destination block ids, out-of-range
// source block ids); Unavailable when the source is unreachable or dies (segment gone, owner
// process gone, connection refused or closed); DeadlineExceeded when `deadline` passes (every wait
// is bounded by it, a pull never hangs); Internal for a protocol violation.
//
// Shapes: a same-layout pull (spec.slabs empty) needs source and destination pools of the same
// KvPoolShape, element type included (transports move bytes, they never convert f32 and bf16); a
// mismatch is InvalidArgument. When the prefill and decode instances shard the model
// differently (TP/PP), the decode rank pulls a re-slicing spec instead: spec.slabs (its entry of
// MapKvSlabs, kv_slab_mapping.h) names, per slab, the prefill rank holding it
// (spec.rank_sources[slab.src_rank_idx]: that rank's KvSource, pool shape and block ids) and its
// layers x KV heads; every (layer, KV head) of the destination pool must be covered by exactly one
// slab, and dtype, head_dim and block_size must agree (InvalidArgument otherwise). Both transports
// re-slice, with the same checks and codes: shm copies each slab's byte ranges out of every named
// rank's segment; TCP asks each named rank's KvServer (rank_sources[i].source.tcp_address, one
// connection per rank, concurrently) for its slabs' pieces (tcp_wire.h) and receives them straight
// into place. A slab of one block is 2 x its layers contiguous byte ranges on each side
// (kv_slab_copy.h); a same-layout pull is the one slab that spans the whole pool.
//
// Copies are coalesced: a run of consecutive source ids that maps onto consecutive destination ids
// is one contiguous byte range on both sides, moved as one memcpy (shm) or one message segment
// (TCP); a slab's ranges merge wherever both sides continue (kv_slab_copy.h).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/transfer/kv_slab_mapping.h"

namespace baton::runtime {

// How a prefill instance's pool can be reached. Built by the prefill worker (transport_factory.h,
// LocalKvSource) and carried by the scheduler unchanged.
struct KvSource {
  std::string hostname;     // gethostname() of the source host
  std::string boot_id;      // /proc/sys/kernel/random/boot_id of the source host; "" if unknown
  std::string shm_name;     // the pool's shared-memory segment ("/baton-kv-<pid>-<n>"); "" if none
  std::string tcp_address;  // "host:port" of the source's KvServer; "" if none
  // "" : the pool is in host memory (shm, TCP). Otherwise it is in device memory and its KvServer
  // serves it over KV links of this kind (KvLinkFactory::name(): "nccl", "nccl-emulated").
  std::string kv_link;
  bool operator==(const KvSource&) const = default;
};

// One prefill rank that a re-slicing pull reads from (KvPullSpec::rank_sources).
struct KvRankSource {
  KvSource source;
  KvPoolShape shape;                // that rank's pool shape (its layers and KV heads)
  std::vector<BlockId> src_blocks;  // [ceil(num_tokens / block_size)] its block ids, token order
};

struct KvPullSpec {
  KvSource source;
  KvPoolShape shape;                // the source pool's shape; must equal the destination's
  std::vector<BlockId> src_blocks;  // [ceil(num_tokens / block_size)] source block ids, token order
  int num_tokens = 0;  // tokens of KV held by src_blocks (the last block may be partial)
  // The KV grant of the request (KvHandoff::kv_grant, kv_grants.h) that the pull presents to the
  // source's KV servers (TCP, KV links), for every rank it reads; empty: none. Shm pulls ignore it.
  std::string kv_grant;

  // Re-slicing between layouts ("Shapes" above). slabs empty (default): a same-layout pull of whole
  // blocks from `source` (rank_sources is ignored). Otherwise `source`, `shape` and `src_blocks`
  // are unused: for each slab, its layers x KV heads of block src_blocks[i] of rank
  // rank_sources[slab.src_rank_idx] are copied into the destination's block dst_blocks[i], for
  // every i. rank_sources is indexed by prefill rank_idx (stage-major); entries that no slab names
  // are not read and may be left empty.
  std::vector<KvRankSource> rank_sources;
  std::vector<KvSlab> slabs;  // this decode rank's slabs, MapKvSlabs(...)[decode rank_idx]

  bool resliced() const { return !slabs.empty(); }
};

// When a pull gives up: at `deadline` (DeadlineExceeded), or once `cancel_fd`, an eventfd the caller
// owns and may make readable from any thread, is readable (Cancelled: the decode request no longer
// wants the KV). A deadline alone converts to a wait, so most callers just pass one.
struct KvPullWait {
  KvPullWait(absl::Time deadline, int cancel_fd = -1)  // NOLINT: implicit on purpose
      : deadline(deadline), cancel_fd(cancel_fd) {}
  absl::Time deadline;
  int cancel_fd;  // -1: none
};

class KvTransport {
 public:
  virtual ~KvTransport() = default;

  // Copies the source's blocks spec.src_blocks[i] into dst's block dst_blocks[i], for every i
  // (whole blocks: slots past num_tokens in the last block are copied too). Blocks of `dst` not in
  // dst_blocks are never written. Thread-safe: concurrent pulls into disjoint destination blocks
  // are allowed. Returns the codes listed at the top of this file, and Cancelled when
  // wait.cancel_fd turns readable: every wait on a socket watches it (a copy out of shared memory,
  // and a receive over a KV link once it has started, end by the deadline only).
  virtual absl::Status Pull(const KvPullSpec& spec, const KvPool& dst,
                            std::span<const BlockId> dst_blocks, const KvPullWait& wait) = 0;

  // A short name for logs and metrics: "shm", "tcp", ...
  virtual std::string_view name() const = 0;
};

// The checks every transport makes before touching anything, against the destination only (source
// block ids are range-checked by the transport, which knows the source pool): InvalidArgument for a
// kv_grant neither empty nor KvGrants::kTokenBytes long, a shape mismatch, num_tokens < 0, src_blocks.size() != ceil(num_tokens / block_size),
// dst_blocks.size() != src_blocks.size(), a negative source id, and destination ids out of range or
// repeated. For a re-slicing spec (spec.resliced()) the same, per rank source that a slab names,
// plus: a slab's src_rank_idx outside rank_sources, a slab that does not fit its source's shape or
// the destination's (CheckSlabFits, kv_slab_copy.h), and a destination (layer, KV head) covered by
// no slab or by two; `shape` and `src_blocks` of the spec itself are not checked.
absl::Status ValidatePull(const KvPullSpec& spec, const KvPool& dst,
                          std::span<const BlockId> dst_blocks);

// "layers 12, kv heads 4, head_dim 64, block_size 16, dtype bf16", for error messages.
std::string ShapeString(const KvPoolShape& shape);

}  // namespace baton::runtime
