#include "runtime/model/decode_graphs.h"

#include <algorithm>
#include <bit>

#include "kernels/common/status_macros.h"

namespace baton::runtime {

std::optional<DecodeGraphShape> DecodeGraphs::ShapeOf(const StepBatch& batch) {
  const int num_seqs = batch.num_seqs();
  if (num_seqs == 0 || num_seqs > kMaxBatch || batch.num_decode_seqs != num_seqs ||
      batch.num_tokens() != num_seqs || !batch.prompt_targets.empty()) {
    return std::nullopt;
  }
  // The logits processors' and token bitmask ops are in a step only when a sequence has some, and
  // their inputs vary in number from step to step: such a batch runs eagerly rather than under a
  // graph without the op.
  for (const TokenSampling& sampling : batch.sampling) {
    if (sampling.processing != nullptr || !sampling.token_bitmask.empty()) return std::nullopt;
  }
  return DecodeGraphShape{
      .num_seqs = static_cast<int>(std::bit_ceil(static_cast<unsigned>(num_seqs))),
      .max_blocks_per_seq =
          static_cast<int>(std::bit_ceil(static_cast<unsigned>(batch.max_blocks_per_seq)))};
}

StepBatch DecodeGraphs::Pad(const StepBatch& batch, const DecodeGraphShape& shape) {
  const int n = batch.num_seqs();
  const int padded = shape.num_seqs;
  const int width = shape.max_blocks_per_seq;
  token_ids_.assign(batch.token_ids.begin(), batch.token_ids.end());
  token_ids_.resize(padded, 0);
  positions_.assign(batch.positions.begin(), batch.positions.end());
  positions_.resize(padded, 0);
  slot_mapping_.assign(batch.slot_mapping.begin(), batch.slot_mapping.end());
  slot_mapping_.resize(padded, -1);  // KvWrite skips the padding
  q_start_.resize(padded + 1);
  for (int s = 0; s <= padded; ++s) q_start_[s] = s;
  context_lens_.assign(batch.context_lens.begin(), batch.context_lens.end());
  context_lens_.resize(padded, 1);  // one token of block 0: any block is a valid read
  block_tables_.assign(static_cast<size_t>(padded) * width, 0);
  for (int s = 0; s < n; ++s) {
    std::copy_n(batch.block_tables.begin() + static_cast<size_t>(s) * batch.max_blocks_per_seq,
                batch.max_blocks_per_seq, block_tables_.begin() + static_cast<size_t>(s) * width);
  }
  sampling_.assign(batch.sampling.begin(), batch.sampling.end());
  sampling_.resize(padded);  // greedy, as an empty span would be for every row
  return StepBatch{.token_ids = token_ids_,
                   .positions = positions_,
                   .slot_mapping = slot_mapping_,
                   .q_start = q_start_,
                   .context_lens = context_lens_,
                   .block_tables = block_tables_,
                   .sampling = sampling_,
                   .num_decode_seqs = padded,
                   .max_blocks_per_seq = width,
                   .return_logits = batch.return_logits};
}

absl::StatusOr<DeviceGraph*> DecodeGraphs::Get(const DecodeGraphShape& shape,
                                               std::vector<const void*> addresses,
                                               const std::function<absl::Status()>& work) {
  auto it = graphs_.find(shape);
  if (it != graphs_.end() && it->second.addresses == addresses) return it->second.graph.get();
  if (it != graphs_.end()) graphs_.erase(it);  // its scratch moved: its memory goes first
  RETURN_IF_ERROR(backend_->BeginCapture());
  const absl::Status status = work();
  absl::StatusOr<std::unique_ptr<DeviceGraph>> graph = backend_->EndCapture();
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(graph.status());
  ++num_captures_;
  Captured& captured = graphs_[shape];
  captured.addresses = std::move(addresses);
  captured.graph = *std::move(graph);
  return captured.graph.get();
}

}  // namespace baton::runtime
