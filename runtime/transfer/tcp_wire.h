// The KV pull wire protocol between the decode side (TcpKvTransport, NcclKvTransport) and KvServer
// (prefill side), version 6. A connection opens with a hello (KvWireHello, then secret_bytes of the
// deployment secret, runtime/process/deployment_secret.h): a server with a secret compares it and,
// when it does not match, answers Unauthenticated to the first request and closes the connection,
// before it reads or sends any KV. Then a request is one of three kinds (KvWireRequest::kind):
//   - kKvWireInline: pieces of the server's pool, each a (layers x KV heads) slab of a run of
//     blocks (a whole-block pull is the piece that spans every layer and KV head), whose bytes
//     come back on this connection;
//   - kKvWireJoinLink: the server makes a KvLinkId (kv_link.h: an NCCL unique id, whose
//     rendezvous lives in the server's process), answers it, and both join that link, the server
//     as the sender; the link belongs to this connection and ends with it;
//   - kKvWireOverLink: byte ranges of the server's pool, which the server sends over the
//     connection's link, one span per range in request order (the client receives each into its
//     own pool: the spans must match one for one, as NCCL's send/recv do).
//
// One TCP connection carries one hello, then any number of request/response exchanges, one at a
// time. All integers are little-endian, fixed width, and sent as the packed structs below.
//
// Grants (kv_grants.h): every inline and over-link request carries the KV grant of the request it
// pulls for (KvWireRequest::grant, from the KvHandoff). A server that checks grants (a prefill
// worker's) answers PermissionDenied, before any byte of KV, when a piece or range reaches a block
// outside the live grant the request presents; a grant revoked while its bytes are being sent cuts
// the connection.
//
//   hello    := KvWireHello, then secret_bytes of the secret (0 when the client has none)
//   request  := KvWireRequest, then
//                 inline:    num_pieces x KvWirePiece
//                 join link: nothing; num_pieces is 0
//                 over link: num_pieces x KvWireRange
//   response := KvWireResponse, then message_bytes of UTF-8 (an error message, only if status_code
//               != 0), then payload_bytes of KV data: for each piece in request order, for each
//               block src_start .. src_start + num_blocks - 1, for each of its layers, K then V:
//               its KV heads' [num_kv_heads][block_size][head_dim] elements of the pool's
//               dtype, exactly as they lie in the pool. That is, each piece packed as blocks 0,
//               1, ... of a pool holding only its layers and heads (PackedSlabByteRanges,
//               kv_slab_copy.h); a piece's payload is num_blocks * num_layers * 2 *
//               num_kv_heads * block_size * head_dim * DTypeBytes(dtype) bytes.
//
// The server checks magic and version (a mismatch: it answers InvalidArgument and closes the
// connection, since it cannot trust the framing), num_pieces (too many: the same), the shape,
// element type included, against its pool (InvalidArgument: bytes of another width cannot land
// as the client expects), and that every piece lies inside its pool: blocks, layers
// and KV heads non-empty and in range (InvalidArgument naming the piece); every range likewise
// (non-empty, inside the pool's block data). It checks every piece before sending a byte: an error
// response has payload_bytes 0 and the connection stays usable. status_code is an
// absl::StatusCode. An inline payload is sent straight from the pool (sendmsg, one iovec per
// contiguous range) and received straight into the destination pool (recvmsg, one iovec per
// range). A pool in device memory is served only over a link (an inline request is
// FailedPrecondition); a host pool has no link (a join is FailedPrecondition). For a join, an OK
// response carries the id as its payload (payload_bytes 128), after which the server joins; if its
// join fails it closes the connection. For an over-link request,
// the header (payload_bytes: the ranges' total) comes first, then the server sends over the link;
// a failed send closes the connection and its link.
#pragma once

#include <bit>
#include <cstdint>

namespace baton::runtime {

static_assert(std::endian::native == std::endian::little,
              "the KV wire protocol sends its structs as they are in memory");

inline constexpr uint32_t kKvWireMagic = 0x5650564b;  // "KVPV"
// 6: KvWireRequest::dtype (5 and before: f32 only).
inline constexpr uint32_t kKvWireVersion = 6;
// Upper bound on a hello's secret (a longer one is garbage).
inline constexpr uint32_t kKvWireMaxSecretBytes = 1024;

enum KvWireKind : uint32_t {
  kKvWireInline = 0,
  kKvWireJoinLink = 1,
  kKvWireOverLink = 2,
};
// Upper bound on num_pieces in one request (a request for more is a bug or garbage).
inline constexpr uint32_t kKvWireMaxPieces = 1u << 20;

struct KvWireHello {
  uint32_t magic;
  uint32_t version;
  uint32_t secret_bytes;  // <= kKvWireMaxSecretBytes
  uint32_t reserved;      // 0
};
static_assert(sizeof(KvWireHello) == 16);

struct KvWireRequest {
  uint32_t magic;
  uint32_t version;
  uint32_t num_pieces;
  int32_t num_layers;  // the shape the client expects the server's pool to have
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t block_size;
  uint32_t dtype;  // KvDTypeCode (kv_dtype.h) of its elements
  uint32_t kind;   // KvWireKind
  // The KV grant (KvGrants::kTokenBytes) of the request whose blocks this reads; zeros for none.
  // Unused by a join.
  uint8_t grant[16];
};
static_assert(sizeof(KvWireRequest) == 52);

// Layers [layer_idx, layer_idx + num_layers) x KV heads [kv_head_idx, kv_head_idx + num_kv_heads)
// of blocks [src_start, src_start + num_blocks), all local to the server's pool.
struct KvWirePiece {
  int32_t src_start;   // first block
  int32_t num_blocks;  // >= 1
  int32_t layer_idx;
  int32_t num_layers;  // >= 1
  int32_t kv_head_idx;
  int32_t num_kv_heads;  // >= 1
};
static_assert(sizeof(KvWirePiece) == 24);

// Bytes [offset, offset + num_bytes) of the server's pool, counted from the start of block 0.
struct KvWireRange {
  int64_t offset;
  int64_t num_bytes;  // >= 1
};
static_assert(sizeof(KvWireRange) == 16);

struct KvWireResponse {
  uint32_t magic;
  int32_t status_code;     // absl::StatusCode; 0 = OK
  uint32_t message_bytes;  // length of the error message that follows
  uint32_t reserved;       // 0
  uint64_t payload_bytes;  // total KV bytes that follow the message
};
static_assert(sizeof(KvWireResponse) == 24);

}  // namespace baton::runtime
