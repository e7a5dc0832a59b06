// ModelRanks: the tp x pp ranks of one serving instance, run as one model (runtime/README.md,
// "Ranks"). Each rank has its own thread pool, backend, LlamaModel shard (model_shard.h) and KV pool
// (its layers x its KV heads); the ranks talk through their instance's communicators
// (runtime/parallel/instance_comms.h: in-process on the CPU and cuda-emulated, NCCL between GPUs,
// its init run on a thread per rank since every member must join at once). Ranks are numbered
// stage-major (rank_idx = pp_rank * tp_size + tp_rank).
//
// Threads: a one-rank instance runs on the thread that calls Forward (no extra thread, no
// hand-off). With several ranks, every rank has a thread of its own, started by Create and stopped
// by the destructor, that waits for the caller's next Forward while the caller sleeps. Each rank's
// thread pool has threads_per_rank threads, the rank's thread among them. When the process may run
// on at least num_ranks x threads_per_rank CPUs, rank r's threads are pinned to the r-th group of
// threads_per_rank of them (cpu_affinity.h), so ranks do not trade cores mid-step; the memory a
// rank first touches then stays near its cores (one NUMA node on the machines we test; binding
// ranks to nodes explicitly is not done).
//
// Blocks: every rank's pool has the same number of blocks, and a sequence's block ids are the same
// on every rank (one allocator for the instance, in the engine); only the bytes per block differ.
//
// Pipeline micro-batches: a step is a list of micro-batches. Each rank runs them in order; a stage
// sends micro-batch m to the next stage and starts m + 1 at once (the CPU communicator buffers
// sends), so with pp stages and m micro-batches the stages overlap except for a bubble of (pp - 1)
// micro-batch times per step. With one stage, one micro-batch is best.
//
// Steps in flight: Submit starts a step and returns at once; Wait gives its outputs. Every rank
// runs the submitted steps in submission order, so stage 0 starts step t + 1 as soon as it is done
// with step t while the later stages finish t: with a step in flight per stage there is no bubble
// between steps (the engine keeps pp of them, over disjoint sequences). The same order on every
// rank is also what keeps the KV cache right: a block freed by step t and reused by step t + 1 is
// written by t first on every rank. Forward is Submit then Wait.
//
// Swaps: a step may carry block copies between each rank's KV pool and its swap pool in host
// memory (kv_swap.h); every rank runs them, swap-outs first, before the step's micro-batches.
//
// Failure: an error on any rank aborts the communicator group, so no rank waits for a peer that
// will never come; Forward returns the first rank's error and every later Forward returns
// FailedPrecondition: the instance must be recreated. Not thread-safe: one thread (the engine's)
// calls everything but the const accessors. Destruction waits for the submitted steps to finish.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/common/dtype.h"
#include "runtime/backend/device_backend.h"
#include "runtime/batch/step_batch.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/kv_cache/kv_swap.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_shard.h"

namespace baton::runtime {

struct ModelRanksOptions {
  std::filesystem::path model_dir;
  DType weight_dtype = DType::kF32;  // matmul weights: kF32, kBF16 or kF16
  ParallelLayout layout;
  // The device every rank computes on (backend_registry.h). Not the host's memory (a GPU, or
  // cuda-emulated): weights are uploaded at load and each rank's KV pool lives in device memory.
  DeviceKind device = DeviceKind::kCpu;
  int first_device_index = 0;  // kCuda: rank r runs on CUDA device first_device_index + r
  // Decode steps replayed as device graphs (decode_graphs.h) where the device has them (cuda,
  // cuda-emulated) and the instance is one rank; ignored otherwise.
  bool decode_graphs = true;
  int threads_per_rank = 1;
  int block_size = 16;                  // tokens per KV block
  DType kv_cache_dtype = DType::kF32;   // KV cache elements: kF32 or kBF16
  // The instance's KV budget, split evenly over its ranks. 0 (GPU devices): each rank takes
  // gpu_memory_utilization of its device's memory, less what is in use once its weights are
  // loaded (vLLM's rule), and every rank gets the smallest such share.
  size_t kv_cache_bytes = 256ull << 20;
  double gpu_memory_utilization = 0.9;  // in (0, 1], with kv_cache_bytes 0
  // Empty: private pools. Else [num_ranks]: rank r's pool lives in the shm segment kv_shm_names[r].
  std::vector<std::string> kv_shm_names;
  // The instance's host swap space for preempted sequences' KV (runtime/kv_cache/kv_swap.h), split
  // evenly over its ranks like kv_cache_bytes; each rank's swap pool has the same blocks as its KV
  // pool, num_swap_blocks() of them. 0: none.
  size_t swap_space_bytes = 0;
  absl::Duration comm_timeout = absl::Seconds(60);  // longest wait for a peer rank in one call
};

// What one rank holds, for stats and logs.
struct RankHoldings {
  ModelShard shard;
  int64_t weight_bytes = 0;   // the rank's weights (owned copies and mapped checkpoint slices)
  int64_t kv_block_bytes = 0; // one block of the rank's KV pool
};

class ModelRanks {
 public:
  // Loads every rank's shard and creates its pool, then starts the rank threads. InvalidArgument
  // for a layout that does not fit the model (MakeModelShard's message), threads_per_rank < 1,
  // kv_shm_names of the wrong length, or a KV budget whose per-rank share holds no block; the
  // load's and the pools' errors otherwise.
  static absl::StatusOr<std::unique_ptr<ModelRanks>> Create(const ModelRanksOptions& options);
  ~ModelRanks();
  ModelRanks(const ModelRanks&) = delete;
  ModelRanks& operator=(const ModelRanks&) = delete;

  const ModelConfig& config() const;
  const ParallelLayout& layout() const;
  int num_ranks() const;
  int num_blocks() const;  // of every rank's pool
  int num_swap_blocks() const;  // of every rank's swap pool; 0 without swap space
  const KvPool& kv_pool(int rank_idx) const;
  RankHoldings holdings(int rank_idx) const;

  // Starts the micro-batches, in order, on every rank and returns a ticket for Wait. With one rank
  // the step runs here, before Submit returns. Pre-condition: each micro-batch is consistent
  // (StepBatch), its slots and block ids are below num_blocks(), and the arrays it views stay alive
  // and unchanged until its Wait returns; so do the swap copies' (KV pool -> swap pool, and back),
  // whose ids are below num_blocks() on the KV side and num_swap_blocks() on the swap side.
  // Null copies: none.
  uint64_t Submit(std::span<const StepBatch> micro_batches, const BlockCopies* swap_out = nullptr,
                  const BlockCopies* swap_in = nullptr);
  // Waits for the oldest submitted step, whose ticket this must be (steps are waited in submission
  // order). On OK, (*out) holds the last stage's answers to its micro-batches one after another: a
  // token per sequence, and the logits [sum of the micro-batches' num_seqs, vocab_size] of the
  // micro-batches that return_logits; the scored prompt tokens' seq counts those sequences
  // likewise. An error means the instance failed (see Failure above).
  absl::Status Wait(uint64_t ticket, StepOutput* out);
  // Submit, then Wait.
  absl::Status Forward(std::span<const StepBatch> micro_batches, StepOutput* out);

 private:
  struct State;
  explicit ModelRanks(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace baton::runtime
