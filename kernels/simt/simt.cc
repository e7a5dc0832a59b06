#include "kernels/simt/simt.h"

#include <ucontext.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace baton::simt {

namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned char kPoisonByte = 0xFF;
constexpr uint64_t kPoisonBits = ~uint64_t{0};

struct Fiber {
  ucontext_t context;
  internal::ThreadState state;
  const uint64_t* wait_generation = nullptr;  // non-null while blocked at a barrier
  uint64_t wait_value = 0;                    // blocked until *wait_generation != wait_value
  bool at_warp_barrier = false;
  bool done = false;
};

struct Barrier {
  int num_live = 0;
  int num_arrived = 0;
  uint64_t generation = 0;

  // Returns true if this arrival completed the barrier.
  bool Arrive() {
    if (++num_arrived < num_live) return false;
    num_arrived = 0;
    ++generation;
    return true;
  }
  void Leave() {
    --num_live;
    if (num_arrived > 0 && num_arrived == num_live) {
      num_arrived = 0;
      ++generation;
    }
  }
};

struct Warp {
  Barrier barrier;
  uint64_t exchange[kWarpSize];
  bool live[kWarpSize];
  uint32_t mma_a[kWarpSize][4];  // each lane's MMA fragments, between two warp barriers
  uint32_t mma_b[kWarpSize][2];
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Barrier barrier;
  std::vector<unsigned char> static_shared;
  std::vector<unsigned char> dynamic_shared;
  ucontext_t scheduler;
  Fiber* current = nullptr;
  const std::function<void()>* body = nullptr;
};

thread_local Block* g_block = nullptr;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "simt: %s\n", what);
  std::abort();
}

Block& CurrentBlock() {
  if (g_block == nullptr || g_block->current == nullptr) Die("called outside a Launch() body");
  return *g_block;
}

void Yield(Block& block) { swapcontext(&block.current->context, &block.scheduler); }

// Blocks the current fiber on `barrier` unless this arrival completes it.
void Wait(Block& block, Barrier& barrier, bool warp) {
  Fiber& fiber = *block.current;
  const uint64_t generation = barrier.generation;
  if (barrier.Arrive()) return;
  fiber.wait_generation = &barrier.generation;
  fiber.wait_value = generation;
  fiber.at_warp_barrier = warp;
  Yield(block);
  fiber.wait_generation = nullptr;
}

Warp& CurrentWarp(Block& block) {
  return block.warps[block.current->state.linear_idx / kWarpSize];
}

void FiberMain() {
  Block& block = *g_block;
  (*block.body)();
  Fiber& fiber = *block.current;
  fiber.done = true;
  block.barrier.Leave();
  Warp& warp = CurrentWarp(block);
  const int lane = fiber.state.linear_idx % kWarpSize;
  warp.live[lane] = false;
  warp.exchange[lane] = kPoisonBits;
  warp.barrier.Leave();
  // Returning resumes uc_link, the scheduler.
}

uint64_t Volume(uint64_t x, uint64_t y, uint64_t z) { return x * y * z; }

// Kept out of line: getcontext() returns twice, which must not happen in a frame with live loop
// variables (-Wclobbered).
[[gnu::noinline]] void InitFiberContext(Fiber& fiber, char* stack, ucontext_t* link) {
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = stack;
  fiber.context.uc_stack.ss_size = kStackBytes;
  fiber.context.uc_link = link;
  makecontext(&fiber.context, FiberMain, 0);
}

}  // namespace

namespace internal {

ThreadState& Current() { return CurrentBlock().current->state; }

void SyncThreads() {
  Block& block = CurrentBlock();
  Wait(block, block.barrier, /*warp=*/false);
}

void SyncWarp() {
  Block& block = CurrentBlock();
  Wait(block, CurrentWarp(block).barrier, /*warp=*/true);
}

uint64_t WarpExchange(uint64_t bits, int src_lane) {
  Block& block = CurrentBlock();
  Warp& warp = CurrentWarp(block);
  const int lane = block.current->state.linear_idx % kWarpSize;
  warp.exchange[lane] = bits;
  Wait(block, warp.barrier, /*warp=*/true);
  const uint64_t out = (src_lane >= 0 && src_lane < kWarpSize && warp.live[src_lane])
                           ? warp.exchange[src_lane]
                           : kPoisonBits;
  Wait(block, warp.barrier, /*warp=*/true);  // nobody overwrites a slot before all have read
  return out;
}

void MmaM16N8K16Bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  Block& block = CurrentBlock();
  Warp& warp = CurrentWarp(block);
  const int lane = block.current->state.linear_idx % kWarpSize;
  std::copy(a, a + 4, warp.mma_a[lane]);
  std::copy(b, b + 2, warp.mma_b[lane]);
  Wait(block, warp.barrier, /*warp=*/true);
  for (int other = 0; other < kWarpSize; ++other) {
    if (!warp.live[other]) Die("mma.sync with lanes that have exited (all 32 must take part)");
  }
  // The whole A and B from the fragments, as the PTX ISA lays them out: lane L holds, with
  // group = L / 4 and t = L % 4, element j of A at row group (+8 for j in {2, 3, 6, 7}), column
  // 2t + (j & 1) (+8 for j >= 4); element j of B at row 2t + (j & 1) (+8 for j >= 2), column group.
  float a_full[16][16];
  float b_full[16][8];
  for (int other = 0; other < kWarpSize; ++other) {
    const int group = other / 4;
    const int t = other % 4;
    for (int j = 0; j < 8; ++j) {
      const uint32_t reg = warp.mma_a[other][j / 2];
      const uint16_t bits = static_cast<uint16_t>(j % 2 == 0 ? reg : reg >> 16);
      const int row = group + ((j % 4) >= 2 ? 8 : 0);
      const int col = 2 * t + (j & 1) + (j >= 4 ? 8 : 0);
      a_full[row][col] = std::bit_cast<float>(uint32_t{bits} << 16);
    }
    for (int j = 0; j < 4; ++j) {
      const uint32_t reg = warp.mma_b[other][j / 2];
      const uint16_t bits = static_cast<uint16_t>(j % 2 == 0 ? reg : reg >> 16);
      b_full[2 * t + (j & 1) + (j >= 2 ? 8 : 0)][group] = std::bit_cast<float>(uint32_t{bits} << 16);
    }
  }
  // This lane's D: element i at row group (+8 for i >= 2), column 2t + (i & 1).
  const int group = lane / 4;
  const int t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = group + (i >= 2 ? 8 : 0);
    const int col = 2 * t + (i & 1);
    float sum = c[i];
    for (int k = 0; k < 16; ++k) sum += a_full[row][k] * b_full[k][col];
    d[i] = sum;
  }
  Wait(block, warp.barrier, /*warp=*/true);  // nobody overwrites a fragment before all have read
}

void* SharedArena(size_t bytes, size_t align) {
  Block& block = CurrentBlock();
  ThreadState& state = block.current->state;
  const size_t offset = (state.shared_cursor + align - 1) / align * align;
  if (offset + bytes > block.static_shared.size()) {
    Die("static shared memory beyond what kMaxStaticSharedBytes leaves beside the dynamic");
  }
  state.shared_cursor = offset + bytes;
  return block.static_shared.data() + offset;
}

void* DynamicShared() {
  Block& block = CurrentBlock();
  return block.dynamic_shared.data();
}

}  // namespace internal

absl::Status CheckLaunchShape(const LaunchShape& shape) {
  const uint64_t num_threads = Volume(shape.block_x, shape.block_y, shape.block_z);
  if (num_threads == 0 || num_threads > kMaxThreadsPerBlock || shape.block_x > kMaxBlockXy ||
      shape.block_y > kMaxBlockXy || shape.block_z > kMaxBlockZ) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simt: block (", shape.block_x, ", ", shape.block_y, ", ", shape.block_z,
        ") is not 1..", kMaxThreadsPerBlock, " threads with x, y <= ", kMaxBlockXy,
        " and z <= ", kMaxBlockZ));
  }
  if (shape.grid_x > kMaxGridX || shape.grid_y > kMaxGridYz || shape.grid_z > kMaxGridYz) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simt: grid (", shape.grid_x, ", ", shape.grid_y, ", ", shape.grid_z,
        ") is past CUDA's limits (x <= ", kMaxGridX, ", y and z <= ", kMaxGridYz, ")"));
  }
  if (shape.dynamic_shared_bytes > kMaxStaticSharedBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simt: ", shape.dynamic_shared_bytes, " bytes of dynamic shared memory (at most ",
        kMaxStaticSharedBytes, " without opting in)"));
  }
  return absl::OkStatus();
}

absl::Status Launch(const LaunchShape& shape, const std::function<void()>& body) {
  RETURN_IF_ERROR(CheckLaunchShape(shape));
  const unsigned num_threads = static_cast<unsigned>(Volume(shape.block_x, shape.block_y,
                                                            shape.block_z));
  const uint64_t num_blocks = Volume(shape.grid_x, shape.grid_y, shape.grid_z);
  if (num_blocks == 0) return absl::OkStatus();
  if (g_block != nullptr) return absl::FailedPreconditionError("simt: nested Launch()");

  Block block;
  block.body = &body;
  block.fibers.resize(num_threads);
  const int num_warps = static_cast<int>((num_threads + kWarpSize - 1) / kWarpSize);
  block.warps.resize(num_warps);
  // Static and dynamic shared memory share the 48 KiB (CheckLaunchShape bounds the dynamic part).
  block.static_shared.resize(kMaxStaticSharedBytes - shape.dynamic_shared_bytes);
  block.dynamic_shared.resize(std::max<size_t>(shape.dynamic_shared_bytes, 16));
  std::vector<std::unique_ptr<char[]>> stacks(num_threads);
  for (auto& stack : stacks) stack.reset(new char[kStackBytes]);
  g_block = &block;
  struct ResetOnExit {
    ~ResetOnExit() { g_block = nullptr; }
  } reset_on_exit;

  const Dim3 grid_dim{shape.grid_x, shape.grid_y, shape.grid_z};
  const Dim3 block_dim{shape.block_x, shape.block_y, shape.block_z};
  for (uint64_t b = 0; b < num_blocks; ++b) {
    const Dim3 block_idx{static_cast<unsigned>(b % shape.grid_x),
                         static_cast<unsigned>((b / shape.grid_x) % shape.grid_y),
                         static_cast<unsigned>(b / (uint64_t{shape.grid_x} * shape.grid_y))};
    std::fill(block.static_shared.begin(), block.static_shared.end(), kPoisonByte);
    std::fill(block.dynamic_shared.begin(), block.dynamic_shared.end(), kPoisonByte);
    block.barrier = Barrier{.num_live = static_cast<int>(num_threads)};
    for (int w = 0; w < num_warps; ++w) {
      Warp& warp = block.warps[w];
      const int lanes = std::min<int>(kWarpSize, static_cast<int>(num_threads) - w * kWarpSize);
      warp.barrier = Barrier{.num_live = lanes};
      for (int lane = 0; lane < kWarpSize; ++lane) {
        warp.live[lane] = lane < lanes;
        warp.exchange[lane] = kPoisonBits;
      }
    }
    for (unsigned t = 0; t < num_threads; ++t) {
      Fiber& fiber = block.fibers[t];
      fiber.state = internal::ThreadState{
          .thread_idx = {t % shape.block_x, (t / shape.block_x) % shape.block_y,
                         t / (shape.block_x * shape.block_y)},
          .block_idx = block_idx,
          .block_dim = block_dim,
          .grid_dim = grid_dim,
          .linear_idx = static_cast<int>(t),
          .shared_cursor = 0};
      fiber.wait_generation = nullptr;
      fiber.at_warp_barrier = false;
      fiber.done = false;
      InitFiberContext(fiber, stacks[t].get(), &block.scheduler);
    }
    unsigned num_done = 0;
    while (num_done < num_threads) {
      bool progressed = false;
      num_done = 0;
      for (Fiber& fiber : block.fibers) {
        if (fiber.done) {
          ++num_done;
          continue;
        }
        if (fiber.wait_generation != nullptr && *fiber.wait_generation == fiber.wait_value) {
          continue;
        }
        block.current = &fiber;
        swapcontext(&block.scheduler, &fiber.context);
        block.current = nullptr;
        progressed = true;
      }
      if (!progressed && num_done < num_threads) {
        int at_block = 0;
        int at_warp = 0;
        for (const Fiber& fiber : block.fibers) {
          if (!fiber.done) ++(fiber.at_warp_barrier ? at_warp : at_block);
        }
        return absl::InternalError(absl::StrCat(
            "simt: deadlock in block (", block_idx.x, ",", block_idx.y, ",", block_idx.z, "): ",
            at_block, " threads wait at __syncthreads, ", at_warp,
            " at a warp barrier, ", num_done, " have exited"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace baton::simt
