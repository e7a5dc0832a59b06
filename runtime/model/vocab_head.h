// VocabHead: the two ends of the model that touch the vocabulary, for one rank: the token
// embedding (first pipeline stage) and lm_head (last stage). Replicated, every TP rank of the stage
// holds both whole tables and computes alone; or vocab-parallel (Megatron's VocabParallelEmbedding
// and parallel lm_head, as vLLM's vocab_parallel_embedding.py), TP rank t holds the vocab rows
// [vocab_begin, vocab_end) of both (TpVocabRange in model_shard.h: uneven ranges, no padded rows):
//   - Embed: the rank gathers the rows of the ids in its range and zero rows for the others, then
//     AllReduceSum over the TP ranks. Its table carries one zero row after its slice
//     (llama_weights.h) and the host maps the other ranks' ids to it, so the lookup is the one
//     Embedding op of the backend on any device. The sum is exact: each element is one rank's row
//     value plus zeros.
//   - Logits: the rank computes the logits of its rows, [num_seqs, num_vocab_rows], then AllGather
//     over the TP ranks. Every rank sends ceil(vocab_size / tp_size) * num_seqs floats (a rank with
//     one row less leaves the tail unused) and one strided copy per rank on the device moves rank
//     r's block into columns [vocab_begin_r, vocab_end_r) of [num_seqs, vocab_size]. Each logit is
//     the same dot product as the whole model's.
// Every TP rank ends with the same x (embedding) and the same logits, as when replicated. The
// next tokens are drawn from the logits where they are, with the backend's Sample op: the same
// tokens on every TP rank, and only the token ids (and the logits when asked) cross to the host.
//
// Borrows the backend, the communicator and the weights, which must outlive it. Holds scratch: not
// thread-safe, the rank's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "runtime/backend/device_backend.h"
#include "runtime/backend/device_buffer.h"
#include "runtime/batch/step_batch.h"
#include "runtime/model/llama_weights.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_shard.h"
#include "runtime/parallel/communicator.h"

namespace baton::runtime {

class VocabHead {
 public:
  // Pre-condition: `weights` holds the tables `shard` selects (LoadLlamaWeights with the same
  // shard and config); `tp` is the stage's TP communicator (size() == tp_size, rank() == tp_rank)
  // when shard.vocab_parallel, else unused (may be nullptr).
  VocabHead(const ModelConfig& config, const ModelShard& shard, const LlamaWeights& weights,
            DeviceBackend* backend, Communicator* tp);

  // Each end is split in what crosses between host and device (Stage*, Collect) and the device
  // work between (Embed, Head), which a graph may capture (decode_graphs.h).

  // Puts token_ids [num_tokens] (host) on the device for Embed; they must stay alive until then.
  // InvalidArgument naming the first id outside [0, vocab_size), before anything is written (the
  // TP ranks see the same ids, so all fail alike). First stage only.
  absl::Status StageTokens(std::span<const int32_t> token_ids);
  // x [num_tokens, hidden] (device) = the embedding rows of the staged ids, on every TP rank.
  absl::Status Embed(int num_tokens, float* x);

  // Puts each sequence's sampling options, and the logits processors' rows of those that have any
  // (TokenSampling::processing), on the device for Head (empty: greedy for all).
  // InvalidArgument for sampling of the wrong length, options that fail ValidateSamplingOptions,
  // or processors' entries that fail kernels::ValidateLogitsEntries.
  // Last stage only.
  absl::Status StageSampling(std::span<const TokenSampling> sampling, int num_seqs);
  // The logits of h [num_seqs, hidden] (device), h x lm_head^T, and each sequence's next token drawn
  // from them, through the staged logits processors and token bitmasks (on a copy), with the staged options, the same
  // on every TP rank; device work only.
  absl::Status Head(const float* h, int num_seqs);
  // The first num_seqs tokens of the last Head on the host, and their raw logits (before the
  // processors: the logprobs clients see are the model's, as vLLM's by default) when return_logits
  // (else out->logits is emptied).
  absl::Status Collect(int num_seqs, bool return_logits, StepOutput* out);

  // The logits of h [num_rows, hidden] (device) alone, without sampling, computed on every TP rank
  // and copied to host_logits ([num_rows, vocab_size], resized) where it is not null. Reuses Head's
  // scratch: call it after Collect. Last stage only.
  absl::Status Logits(const float* h, int num_rows, std::vector<float>* host_logits);

  // The device addresses Embed and Head work on, for a graph that captured them to check that none
  // has moved since.
  void AppendScratchAddresses(std::vector<const void*>* addresses) const;

 private:
  // Puts the rows of the sequences that have logits processors on the device (staged_processors_),
  // or leaves staged_processors_ null when none has: Head then skips the op. InvalidArgument for
  // entries that fail kernels::ValidateLogitsEntries.
  absl::Status StageProcessors(std::span<const TokenSampling> sampling, int num_seqs);
  // Notes the sequences that have a bitmask (staged_num_masked_; 0: Head skips the op) and puts
  // their bitmasks on the device now, or, while one is still being filled (token_bitmask_fill),
  // leaves that to Head, which waits for it. InvalidArgument for a bitmask of the wrong size.
  absl::Status StageBitmasks(std::span<const TokenSampling> sampling);
  // Waits for the noted bitmasks' fills and puts them on the device (staged_bitmask_).
  absl::Status UploadBitmasks();
  // The device address of `host`: itself on a host-memory backend, else a copy in `staging`.
  absl::StatusOr<const int32_t*> ToDevice(std::span<const int32_t> host, DeviceBuffer& staging);
  // logits_ [num_seqs, vocab_size] (device) = h x lm_head^T.
  absl::Status ComputeLogits(const float* h, int num_seqs);

  DeviceBackend* backend_;
  Communicator* tp_;  // nullptr when replicated
  const Weight& embed_tokens_;
  const Weight& lm_head_;
  int vocab_size_;
  int hidden_;
  int vocab_begin_;  // this rank's rows of both tables: [vocab_begin_, vocab_end_)
  int vocab_end_;
  std::vector<IndexRange> rank_vocab_;  // [tp_size] every TP rank's rows, when vocab-parallel
  int max_vocab_rows_ = 0;              // rows of the largest range: the all-gather's stride

  std::vector<int32_t> local_ids_;  // [num_tokens] ids in the rank's table (zero row for others)
  DeviceBuffer ids_staging_;        // [num_tokens] when the backend's memory is not the host's
  const int32_t* staged_ids_ = nullptr;  // what Embed reads
  std::byte* staged_sampling_ = nullptr;  // what Head reads and writes: sample_args_(_host_)
  int staged_num_seqs_ = 0;               // rows of staged_sampling_
  DeviceBuffer logits_;             // [num_seqs, vocab_size]
  DeviceBuffer local_logits_;       // [num_seqs, max_vocab_rows_] when vocab-parallel
  DeviceBuffer gathered_logits_;    // [tp_size, num_seqs, max_vocab_rows_] when vocab-parallel
  // The Sample op's arrays, packed (SampleArgs in vocab_head.cc): filled on the host, then copied
  // to sample_args_ when the backend's memory is not the host's.
  std::vector<std::byte> sample_args_host_;
  DeviceBuffer sample_args_;
  // The LogitsProcessors op's arrays, packed likewise (ProcessorArgs in vocab_head.cc); null when
  // no sequence of the step has processors.
  std::byte* staged_processors_ = nullptr;
  size_t staged_num_entries_ = 0;
  std::vector<std::byte> processors_host_;
  DeviceBuffer processor_args_;
  DeviceBuffer processed_logits_;  // [num_seqs, vocab_size]: logits_ through the processors
  // The TokenBitmask op's arrays: [num_masked] row ids, then [num_masked, words] bitmasks.
  struct MaskedRow {
    int32_t row;
    std::span<const int32_t> bitmask;
    const PendingFill* fill;  // nullptr: filled already
  };
  std::vector<MaskedRow> masked_rows_;
  std::vector<int32_t> bitmask_host_;
  DeviceBuffer bitmask_args_;
  const int32_t* staged_bitmask_ = nullptr;  // null until uploaded
  int staged_num_masked_ = 0;
};

}  // namespace baton::runtime
