// SIMT emulation: runs a CUDA kernel body on the CPU, for tests.
//
// Launch() runs the grid's blocks one at a time; a block's threads are fibers (ucontext) on the
// calling thread, scheduled cooperatively: a thread runs until it reaches a barrier
// (__syncthreads, a warp shuffle or __syncwarp) or returns, then the next thread runs. So
//   - __syncthreads() is a barrier over the block's live threads;
//   - warp shuffles exchange values through a per-warp buffer between two warp barriers;
//   - shared memory is one per-block arena, filled with 0xFF bytes (NaN as f32) at block start so
//     that reads of unwritten shared memory show up;
//   - a barrier that can never complete (divergent __syncthreads, a shuffle some lanes skip) is
//     reported as an error from Launch() instead of hanging;
//   - declaring more static shared memory than kMaxStaticSharedBytes leaves beside the launch's
//     dynamic shared memory, or a warp op with a partial mask (not emulated), aborts: those are
//     bugs in the kernel.
// Execution is deterministic (threads always run in the same order). Races that the interleaving
// does not expose are not detected: this checks indexing and barrier structure, not memory
// ordering. One launch at a time per host thread; kernels must not throw.
//
// Kernel code does not include this header directly; it includes kernels/simt/device.h, which maps
// the CUDA vocabulary (threadIdx, __syncthreads, __shfl_xor_sync, shared arrays) onto this file
// when compiled by a host compiler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

#include "absl/status/status.h"
#include "kernels/simt/launch_shape.h"

namespace baton::simt {

struct Dim3 {
  unsigned x = 1;
  unsigned y = 1;
  unsigned z = 1;
};

// CUDA's launch limits on sm_80 and sm_90 (the CUDA C++ Programming Guide's table of compute
// capabilities). Shared memory: static and dynamic together up to 48 KiB, as a kernel gets without
// cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize), which no kernel here calls.
inline constexpr size_t kMaxStaticSharedBytes = 48 * 1024;
inline constexpr int kMaxThreadsPerBlock = 1024;
inline constexpr unsigned kMaxBlockXy = 1024;
inline constexpr unsigned kMaxBlockZ = 64;
inline constexpr unsigned kMaxGridX = 2147483647u;  // 2^31 - 1
inline constexpr unsigned kMaxGridYz = 65535;

// OK when a GPU would accept `shape` (an empty grid included: Launch runs nothing); otherwise
// InvalidArgument naming the first limit it exceeds, the launch a GPU refuses with
// cudaErrorInvalidConfiguration, and which the emulation must refuse too so CI sees it.
absl::Status CheckLaunchShape(const LaunchShape& shape);

// Runs body() once per thread of every block of `shape`, as described above. InvalidArgument for
// an empty block or a shape CheckLaunchShape refuses; Internal for a barrier deadlock, naming the
// block and where its threads wait.
absl::Status Launch(const LaunchShape& shape, const std::function<void()>& body);

namespace internal {

// State of the calling fiber's thread; valid only inside a Launch() body.
struct ThreadState {
  Dim3 thread_idx;
  Dim3 block_idx;
  Dim3 block_dim;
  Dim3 grid_dim;
  int linear_idx = 0;  // thread_idx.x + block_dim.x * (thread_idx.y + block_dim.y * thread_idx.z)
  size_t shared_cursor = 0;  // bytes of static shared memory this thread has declared so far
};

ThreadState& Current();
void SyncThreads();
void SyncWarp();
// Publishes `bits` as this lane's value and returns the value published by `src_lane` of the same
// warp (poison if that lane does not exist or has exited).
uint64_t WarpExchange(uint64_t bits, int src_lane);
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 for the calling lane: every lane of the warp
// passes its fragments of A (16 x 16), B (16 x 8) and C (16 x 8) in the PTX ISA's layout ("Matrix
// Fragments for mma.m16n8k16 with floating point type"; bf16 pairs low half first) and gets its
// fragment of D = A B + C, summed in f32 in k order. All 32 lanes must take part (.aligned);
// otherwise it aborts, as a GPU's behaviour is undefined there.
void MmaM16N8K16Bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]);
void* SharedArena(size_t bytes, size_t align);  // static __shared__ declaration
void* DynamicShared();                          // extern __shared__ array

template <typename T>
T Shuffle(T value, int src_lane) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = WarpExchange(bits, src_lane);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

}  // namespace internal
}  // namespace baton::simt
