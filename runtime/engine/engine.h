// Engine: one serving instance's model, KV cache and continuous batch, driven one step at a time.
// The model runs on the instance's tp x pp ranks (model_ranks.h); the engine keeps one block
// allocator and one batch for all of them.
//
// Lifecycle: Create() loads the model and sizes the KV pool from a memory budget; AddRequest() queues
// a prompt; each Step() finishes one forward pass and returns the token sampled for every sequence
// that produced one; a sequence leaves the batch (and frees its blocks) as soon as it finishes or is
// cancelled, except that a prefill held for a hand-off keeps its blocks until ReleaseKv.
//
// Steps in flight: an instance of pp stages keeps up to max_steps_in_flight (default pp) steps on
// its ranks at once, over disjoint sequences, so its stages never wait between steps
// (model_ranks.h, step_scheduler.h). Step() starts as many steps as may be in flight and are
// ready, then waits for the oldest and returns its tokens; with one step in flight it is one
// synchronous forward pass. A sequence cancelled while its step runs leaves once the step is done.
//
// Swap space (EngineConfig::swap_space_bytes): a sequence preempted because the KV cache is full
// has its blocks copied to host memory and back (runtime/kv_cache/kv_swap.h) instead of being
// computed again; a step may then carry copies alone and return no token.
//
// Prefix caching (EngineConfig::enable_prefix_caching): the blocks of finished sequences stay in
// the allocator's prefix cache (runtime/kv_cache/block_allocator.h), named by hashes chained from
// PrefixCacheRoot(prefix_cache_salt()); a prompt computes only what follows its longest cached
// prefix (step_scheduler.h).
// Not thread-safe: a single engine thread owns it (see engine_loop for the threaded form).
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/batch/sequence.h"
#include "runtime/engine/model_ranks.h"
#include "runtime/engine/model_runner.h"
#include "runtime/engine/step_scheduler.h"
#include "runtime/engine/step_trace.h"
#include "runtime/kv_cache/block_allocator.h"
#include "runtime/model/model_shard.h"
#include "runtime/structured_output/sequence_constraints.h"

namespace baton::runtime {

struct EngineConfig {
  std::filesystem::path model_dir;
  DType weight_dtype = DType::kF32;     // matmul weights: kF32, kBF16 or kF16
  ParallelLayout parallel;              // tp x pp ranks (model_ranks.h)
  DeviceKind device = DeviceKind::kCpu; // what every rank computes on (model_ranks.h)
  int first_device_index = 0;           // kCuda: rank r on CUDA device first_device_index + r
  bool decode_graphs = true;            // GPU devices: decode steps as graphs (model_ranks.h)
  int num_threads = 1;                  // compute threads per rank
  int block_size = 16;                  // tokens per KV block
  // KV cache elements: kF32, or kBF16 (half the bytes per token, so twice the tokens per budget
  // and half what decode attention reads; kernels/include/baton/kernels/paged_kv.h).
  DType kv_cache_dtype = DType::kF32;
  // KV budget of the instance, split evenly over its ranks; 0 on GPU devices: each rank's
  // gpu_memory_utilization share of its device less its weights (ModelRanksOptions).
  size_t kv_cache_bytes = 256ull << 20;
  double gpu_memory_utilization = 0.9;
  int max_num_seqs = 64;
  int max_num_batched_tokens = 2048;    // without chunked prefill, raised to max_model_len
  bool chunked_prefill = false;         // decode-first steps with prompt chunks (colocated)
  int max_model_len = 0;                // 0: the model's max_position_embeddings
  // Empty: private KV pools. Else [num_ranks]: rank r's pool lives in shm segment kv_shm_names[r].
  std::vector<std::string> kv_shm_names;
  // Steps on the ranks at once; 0: one per pipeline stage (parallel.pp_size), 1: one at a time.
  int max_steps_in_flight = 0;
  // Host memory for the KV of sequences preempted when the cache is full, split over the ranks
  // (runtime/kv_cache/kv_swap.h): they are swapped out and back in rather than recomputed. 0: none,
  // every preemption recomputes (vLLM v1's rule; vLLM v0's --swap-space and DistServe swap).
  size_t swap_space_bytes = 0;
  // Full KV blocks outlive their sequences and serve later prompts with the same prefix
  // (step_scheduler.h), as vLLM's automatic prefix caching, on by default there too.
  bool enable_prefix_caching = true;
  // Structured outputs: a step's grammar bitmasks are filled on a helper thread while its forward
  // pass runs (sequence_constraints.h); false fills them on the engine thread before it (the
  // baseline benchmarks/engine/structured_output_bench.cc measures against).
  bool fill_masks_during_forward = true;
};

struct TokenOutput {
  SeqId seq_id;
  int32_t token_id;
  // Top num_logprobs when asked, then the sampled token's when it is not among them.
  std::vector<kernels::TokenLogprob> logprobs;
  std::vector<float> logits;                    // [vocab_size], when return_logits
  // On the first token when num_prompt_logprobs: [num_prompt_tokens], entry i scores prompt token i
  // (TopLogprobs of it), entry 0 empty.
  std::vector<std::vector<kernels::TokenLogprob>> prompt_logprobs;
  FinishReason finish_reason = FinishReason::kNone;  // kNone while the sequence goes on
  int64_t prefill_start_us = 0;  // on a sequence's first token: when its prefill entered a step
  // With it: the prompt tokens (and resumed request's generated ones) whose KV the prefill took
  // from the prefix cache rather than computed (OpenAI's usage.prompt_tokens_details.cached_tokens).
  int num_cached_tokens = 0;
};

class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config);
  // Compiles a request's output constraint into the engine's grammar cache. The one method callable
  // from any thread: a worker calls it on its RPC thread, so that the engine thread's AddRequest
  // finds the grammar compiled. The errors AddRequest would give for the constraint.
  absl::Status PrecompileConstraint(const OutputConstraint& constraint) const {
    return constraints_.Precompile(constraint);
  }

  const ModelConfig& model_config() const { return ranks_->config(); }
  // The instance's ranks: layout, per-rank KV pools (same block ids on every rank) and holdings.
  const ModelRanks& ranks() const { return *ranks_; }
  int max_model_len() const { return max_model_len_; }
  const BlockAllocator& allocator() const { return allocator_; }

  // generated_token_ids: tokens already sampled for the request elsewhere (a request resumed after
  // its worker died: token replay). The prefill computes prompt + generated, and the next token is
  // generated token generated_token_ids.size(), drawn as the uninterrupted run would draw it.
  // InvalidArgument if the prompt is empty, a token id is outside the vocabulary, prompt +
  // max_tokens exceeds max_model_len, or no token is left to generate; the message names the request.
  absl::StatusOr<SeqId> AddRequest(std::vector<int32_t> prompt_token_ids, GenerationParams params,
                                   std::vector<int32_t> generated_token_ids = {});
  // Frees the sequence's blocks and queue slot at once. NotFound for an unknown or finished id.
  absl::Status Cancel(SeqId seq_id);
  // Its consumer is not taking its tokens: the sequence leaves the batch (no steps, no batch slot)
  // as soon as it is running and not in a step, keeping its KV, until Resume. NotFound for an
  // unknown or finished id.
  absl::Status Pause(SeqId seq_id);
  absl::Status Resume(SeqId seq_id);
  int num_paused() const { return num_paused_; }
  // Paused sequences give their KV up (to be computed again when resumed) until num_kv_tokens fit,
  // for a prefilled request waiting to be admitted (CanAdmitPrefilled).
  void ReleasePausedKvFor(int num_kv_tokens);

  // Prefill role. A sequence added with hold_kv_after_prefill stops after its first token (unless that
  // token finishes it) and keeps its KV blocks until ReleaseKv; HeldKv names them.
  struct HeldKv {
    std::vector<BlockId> blocks;  // in token order
    int num_tokens = 0;           // tokens whose K/V the blocks hold
  };
  absl::StatusOr<HeldKv> GetHeldKv(SeqId seq_id) const;
  absl::Status ReleaseKv(SeqId seq_id);

  // Decode role. AdmitPrefilled takes a request whose KV is computed elsewhere and allocates the
  // blocks that will receive it (generated_token_ids: the tokens sampled so far, at least one). The
  // KV covers every token but the last sampled one: prompt + generated - 1 tokens, which
  // NumPrefilledKvTokens counts.
  // InvalidArgument as ValidatePrefilled; ResourceExhausted when the blocks are not free now: callers
  // ask CanAdmitPrefilled first and wait. A request ValidatePrefilled accepts fits in an empty pool.
  // After the transfer has filled the blocks, StartDecoding puts the sequence in the batch.
  absl::Status ValidatePrefilled(const std::vector<int32_t>& prompt_token_ids,
                                 const std::vector<int32_t>& generated_token_ids,
                                 const GenerationParams& params) const;
  // Whether the blocks are free now, counting the cached leading blocks other sequences hold (a
  // follow-up turn whose history another sequence still holds needs room for its new blocks only).
  bool CanAdmitPrefilled(const std::vector<int32_t>& prompt_token_ids,
                         const std::vector<int32_t>& generated_token_ids) const;
  absl::StatusOr<SeqId> AdmitPrefilled(std::vector<int32_t> prompt_token_ids,
                                       std::vector<int32_t> generated_token_ids,
                                       GenerationParams params);
  // With prefix caching, the admission takes the leading full blocks the cache holds (counted as
  // queries and hits); only the rest are to be filled: NumCachedBlocksOf of BlocksOf's blocks are
  // already.
  absl::StatusOr<std::vector<BlockId>> BlocksOf(SeqId seq_id) const;
  absl::StatusOr<int> NumCachedBlocksOf(SeqId seq_id) const;
  absl::Status StartDecoding(SeqId seq_id);

  int num_waiting() const { return scheduler_.num_waiting(); }
  int num_running() const { return scheduler_.num_running(); }
  int num_swapped() const { return scheduler_.num_swapped(); }
  // Preemptions so far: victims swapped out, and victims whose KV was dropped to compute again.
  int64_t num_swap_outs() const { return scheduler_.num_swap_outs(); }
  int64_t num_recomputes() const { return scheduler_.num_recomputes(); }
  // Prefix caching, in tokens: asked for by admitted sequences, and found in the cache.
  int64_t num_prefix_cache_queries() const { return scheduler_.num_prefix_cache_queries(); }
  int64_t num_prefix_cache_hits() const { return scheduler_.num_prefix_cache_hits(); }
  bool prefix_caching() const { return prefix_caching_; }
  // What the K/V of a token sequence depends on besides the tokens: the model's shape, its weight
  // and KV dtypes, the block size. Instances of one salt name equal blocks by equal hashes.
  const std::string& prefix_cache_salt() const { return prefix_cache_salt_; }
  // The prefix cache's events since the last call (block_allocator.h). With `snapshot`, or when
  // events were lost, a reset that names every block cached now instead.
  BlockAllocator::CacheEvents TakeCacheEvents(bool snapshot = false);
  const BlockAllocator& swap_allocator() const { return swap_allocator_; }
  int num_sequences() const { return static_cast<int>(seqs_.size()); }

  bool HasWork() const { return scheduler_.HasWork() || !in_flight_.empty(); }
  // Starts the steps that may start (see the top of this file), then waits for the oldest in flight
  // and returns its tokens; empty when nothing could run. An error here is an engine failure
  // (kernel or model), not a per-request one: every step in flight is dropped with it.
  absl::StatusOr<std::vector<TokenOutput>> Step();
  int max_steps_in_flight() const { return max_steps_in_flight_; }
  // Called on the engine thread with every step that finishes well: what it computed, from its
  // submission to the ranks to its outputs, and whether work was left (step_trace.h). With steps
  // in flight the intervals overlap. Empty: none.
  void SetStepObserver(std::function<void(const StepRecord&)> observer) {
    step_observer_ = std::move(observer);
  }

 private:
  Engine(const EngineConfig& config, std::unique_ptr<ModelRanks> ranks, int max_model_len);

  // A step on the ranks and what its sampling views.
  struct InFlightStep {
    ScheduledStep step;
    std::vector<TokenSampling> sampling;        // [num_seqs]
    std::vector<LogitsProcessing> processing;   // [num_seqs]: what sampling[i].processing views
    // The grammars' bitmasks of this step, filled while its forward pass runs (what
    // sampling[i].token_bitmask_fill points to); null when none is.
    std::shared_ptr<const PendingFill> bitmask_fill;
    bool return_logits = false;
    StepRecord record;  // its shape and start, for the step observer
  };
  void StartStep(ScheduledStep step);
  absl::StatusOr<std::vector<TokenOutput>> FinishOldestStep();
  // The tokens of a finished step's sequences (not of those cancelled during it); finished
  // sequences leave, held prefills are parked.
  absl::StatusOr<std::vector<TokenOutput>> TakeOutputs(const ScheduledStep& step, bool return_logits);
  // Forgets a sequence: its blocks, its queue slot, its state.
  void Erase(Sequence* seq);

  FinishReason CheckFinished(const Sequence& seq, int32_t token) const;
  // Starts the sequence's grammar matcher, walked through the tokens generated before, when its
  // params carry an output constraint. InvalidArgument naming the request otherwise.
  absl::Status AddConstraint(SeqId seq_id, const GenerationParams& params,
                             const std::vector<int32_t>& generated_token_ids);
  absl::Status ValidateRequest(SeqId seq_id, const std::vector<int32_t>& prompt_token_ids,
                               const std::vector<int32_t>& generated_token_ids,
                               const GenerationParams& params) const;
  Sequence* Find(SeqId seq_id) const;

  std::unique_ptr<ModelRanks> ranks_;
  // Structured outputs' matchers; mutable: ValidateRequest compiles (and caches) the grammars.
  mutable SequenceConstraints constraints_;
  int block_size_;
  bool prefix_caching_;
  bool fill_masks_during_forward_;
  std::string prefix_cache_salt_;
  int max_model_len_;
  BlockAllocator allocator_;
  BlockAllocator swap_allocator_;  // the ranks' swap pools; no blocks without swap space
  StepScheduler scheduler_;
  ModelRunner runner_;
  absl::flat_hash_map<SeqId, std::unique_ptr<Sequence>> seqs_;
  SeqId next_seq_id_ = 0;
  int num_paused_ = 0;
  int max_steps_in_flight_;
  std::deque<std::unique_ptr<InFlightStep>> in_flight_;  // oldest first
  std::vector<std::unique_ptr<InFlightStep>> spare_steps_;  // finished, kept for their buffers
  StepOutput output_;                    // of the last step
  std::function<void(const StepRecord&)> step_observer_;
};

}  // namespace baton::runtime
