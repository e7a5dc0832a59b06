// DecodeGraphs: one rank's decode steps replayed as device graphs (CUDA graphs), so that a step
// costs one graph launch instead of a dozen kernel launches per layer, which at small batches is
// most of a decode step's time on a GPU (vLLM and SGLang capture theirs the same way).
//
// A graph replays fixed work on fixed addresses, so a decode batch is padded to a shape:
//   - its sequences to the next of 1, 2, 4, ..., kMaxBatch (a batch above kMaxBatch runs eagerly);
//     a padding row has token 0 at position 0, its K/V is not written (slot -1), it attends to
//     one token of block 0 and its sampled token is dropped;
//   - its block-table width to the next power of two, which also fixes the split-KV decision
//     (PagedAttentionSplitKvNumSplits reads the width, not the lengths).
// One graph per shape, captured the first time that shape runs. The model stages the padded
// batch's arrays into its scratch before each replay; the graph remembers the scratch addresses
// it captured and is captured again when any has moved (a larger step regrew a buffer), so a
// replay never reads a freed buffer. Only prefix-free decode batches of a one-rank instance are
// graphed (llama_model.cc), and only batches without logits processors (penalties, logit_bias,
// min_tokens: their op's work varies per step): collectives inside a capture are NCCL's to record, and the CPU
// communicator of cuda-emulated could not be, so TP/PP instances run eagerly.
//
// Not thread-safe: the rank's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend/device_backend.h"
#include "runtime/batch/step_batch.h"

namespace baton::runtime {

struct DecodeGraphShape {
  int num_seqs = 0;            // padded
  int max_blocks_per_seq = 0;  // padded
  auto operator<=>(const DecodeGraphShape&) const = default;
};

class DecodeGraphs {
 public:
  static constexpr int kMaxBatch = 256;

  // The padded shape of a decode-only batch, or nullopt when it is not graphed (too many
  // sequences, or prompt tokens in it).
  static std::optional<DecodeGraphShape> ShapeOf(const StepBatch& batch);

  // `backend` captures and must outlive this object; SupportsGraphs() must be true.
  explicit DecodeGraphs(DeviceBackend* backend) : backend_(backend) {}

  // `batch` padded to `shape` (ShapeOf(batch)), viewing arrays this object owns until the next Pad.
  StepBatch Pad(const StepBatch& batch, const DecodeGraphShape& shape);

  // The graph of `shape`, captured now by running `work` (which must enqueue device work only)
  // unless one captured over the same `addresses` exists. On error nothing is kept.
  absl::StatusOr<DeviceGraph*> Get(const DecodeGraphShape& shape,
                                   std::vector<const void*> addresses,
                                   const std::function<absl::Status()>& work);

  int num_graphs() const { return static_cast<int>(graphs_.size()); }
  int64_t num_captures() const { return num_captures_; }

 private:
  struct Captured {
    std::vector<const void*> addresses;
    std::unique_ptr<DeviceGraph> graph;
  };

  DeviceBackend* backend_;
  std::map<DecodeGraphShape, Captured> graphs_;
  int64_t num_captures_ = 0;

  // The padded batch's arrays.
  std::vector<int32_t> token_ids_, positions_, slot_mapping_, q_start_, context_lens_,
      block_tables_;
  std::vector<TokenSampling> sampling_;
};

}  // namespace baton::runtime
