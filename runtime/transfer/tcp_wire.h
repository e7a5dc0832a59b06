// The KV pull wire protocol between TcpKvTransport (client, decode side) and KvServer (prefill
// side).
//
// One TCP connection carries any number of request/response exchanges, one at a time. All integers
// are little-endian, fixed width, and sent as the packed structs below.
//
//   request  := KvWireRequest, then num_runs x KvWireRun
//   response := KvWireResponse, then message_bytes of UTF-8 (an error message, only if status_code
//               != 0), then payload_bytes of block data: for each run in request order, blocks
//               src_start .. src_start + num_blocks - 1 of the server's pool, BlockBytes() each,
//               exactly as they lie in the pool.
//
// The server checks magic and version (a mismatch: it answers InvalidArgument and closes the
// connection, since it cannot trust the framing), the shape against its pool (InvalidArgument), and
// that every run lies inside its pool (InvalidArgument); an error response has payload_bytes 0 and
// the connection stays usable. status_code is an absl::StatusCode. The payload is sent straight
// from the pool (sendmsg with one iovec per run) and received straight into the destination blocks.
#pragma once

#include <bit>
#include <cstdint>

namespace baton::runtime {

static_assert(std::endian::native == std::endian::little,
              "the KV wire protocol sends its structs as they are in memory");

inline constexpr uint32_t kKvWireMagic = 0x5650564b;  // "KVPV"
inline constexpr uint32_t kKvWireVersion = 1;
// Upper bound on num_runs in one request (a request for more blocks is a bug or garbage).
inline constexpr uint32_t kKvWireMaxRuns = 1u << 20;

struct KvWireRequest {
  uint32_t magic;
  uint32_t version;
  uint32_t num_runs;
  int32_t num_layers;  // the shape the client expects the server's pool to have
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t block_size;
  uint32_t reserved;  // 0
};
static_assert(sizeof(KvWireRequest) == 32);

struct KvWireRun {
  int32_t src_start;   // first block in the server's pool
  int32_t num_blocks;  // >= 1
};
static_assert(sizeof(KvWireRun) == 8);

struct KvWireResponse {
  uint32_t magic;
  int32_t status_code;     // absl::StatusCode; 0 = OK
  uint32_t message_bytes;  // length of the error message that follows
  uint32_t reserved;       // 0
  uint64_t payload_bytes;  // total block bytes that follow the message
};
static_assert(sizeof(KvWireResponse) == 24);

}  // namespace baton::runtime
