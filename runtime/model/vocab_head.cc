#include "runtime/model/vocab_head.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {

VocabHead::VocabHead(const ModelConfig& config, const ModelShard& shard,
                     const LlamaWeights& weights, DeviceBackend* backend, Communicator* tp)
    : backend_(backend),
      tp_(shard.vocab_parallel ? tp : nullptr),
      embed_tokens_(weights.embed_tokens),
      lm_head_(weights.lm_head),
      vocab_size_(config.vocab_size),
      hidden_(config.hidden_size),
      vocab_begin_(shard.vocab_begin),
      vocab_end_(shard.vocab_end),
      ids_staging_(backend),
      local_logits_(backend),
      gathered_logits_(backend) {
  if (!shard.vocab_parallel) return;
  BATON_CHECK(tp_ != nullptr && tp_->size() == shard.spec.tp_size);
  for (int r = 0; r < shard.spec.tp_size; ++r) {
    absl::StatusOr<IndexRange> range = TpVocabRange(vocab_size_, shard.spec.tp_size, r);
    BATON_CHECK(range.ok());  // MakeModelShard accepted the same split
    rank_vocab_.push_back(*range);
    max_vocab_rows_ = std::max(max_vocab_rows_, range->size());
  }
}

absl::StatusOr<const int32_t*> VocabHead::ToDevice(std::span<const int32_t> host,
                                                   DeviceBuffer& staging) {
  if (backend_->IsHostMemory()) return host.data();
  RETURN_IF_ERROR(staging.Reserve(host.size_bytes()));
  RETURN_IF_ERROR(backend_->CopyToDevice(staging.data<void>(), host.data(), host.size_bytes()));
  return staging.data<const int32_t>();
}

absl::Status VocabHead::Embed(std::span<const int32_t> token_ids, float* x) {
  const int num_tokens = static_cast<int>(token_ids.size());
  if (tp_ == nullptr) {  // the whole table: the kernel checks the ids
    ASSIGN_OR_RETURN(const int32_t* ids, ToDevice(token_ids, ids_staging_));
    return backend_->Embedding(kernels::EmbeddingParams{.out = x,
                                                        .table = embed_tokens_.data,
                                                        .table_dtype = embed_tokens_.dtype,
                                                        .token_ids = ids,
                                                        .num_tokens = num_tokens,
                                                        .hidden = hidden_,
                                                        .vocab_size = vocab_size_});
  }
  const int num_rows = vocab_end_ - vocab_begin_;  // the zero row is row num_rows
  local_ids_.resize(num_tokens);
  for (int t = 0; t < num_tokens; ++t) {
    const int32_t id = token_ids[t];
    if (id < 0 || id >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat("Embedding: token id ", id, " at position ",
                                                     t, " is outside [0, ", vocab_size_, ")"));
    }
    local_ids_[t] = id >= vocab_begin_ && id < vocab_end_ ? id - vocab_begin_ : num_rows;
  }
  ASSIGN_OR_RETURN(const int32_t* ids,
                   ToDevice(std::span<const int32_t>(local_ids_), ids_staging_));
  RETURN_IF_ERROR(backend_->Embedding(kernels::EmbeddingParams{.out = x,
                                                               .table = embed_tokens_.data,
                                                               .table_dtype = embed_tokens_.dtype,
                                                               .token_ids = ids,
                                                               .num_tokens = num_tokens,
                                                               .hidden = hidden_,
                                                               .vocab_size = num_rows + 1}));
  return tp_->AllReduceSum(x, static_cast<size_t>(num_tokens) * hidden_);
}

absl::Status VocabHead::Logits(const float* h, int num_seqs, std::vector<float>* logits) {
  const size_t vocab = static_cast<size_t>(vocab_size_);
  logits->resize(static_cast<size_t>(num_seqs) * vocab);
  const int num_rows = vocab_end_ - vocab_begin_;
  auto matmul = [&](float* out) {
    return backend_->Matmul(kernels::MatmulParams{.out = out,
                                                  .in = h,
                                                  .weight = lm_head_.data,
                                                  .weight_dtype = lm_head_.dtype,
                                                  .bias = nullptr,
                                                  .m = num_seqs,
                                                  .n = num_rows,
                                                  .k = hidden_});
  };
  if (tp_ == nullptr) {
    if (backend_->IsHostMemory()) return matmul(logits->data());
    RETURN_IF_ERROR(local_logits_.Reserve(sizeof(float) * logits->size()));
    RETURN_IF_ERROR(matmul(local_logits_.data<float>()));
    return backend_->CopyToHost(logits->data(), local_logits_.data<float>(),
                                sizeof(float) * logits->size());
  }

  const size_t block_elems = static_cast<size_t>(num_seqs) * max_vocab_rows_;  // one rank's send
  const size_t gathered_elems = block_elems * rank_vocab_.size();
  RETURN_IF_ERROR(local_logits_.Reserve(sizeof(float) * block_elems));
  RETURN_IF_ERROR(gathered_logits_.Reserve(sizeof(float) * gathered_elems));
  RETURN_IF_ERROR(matmul(local_logits_.data<float>()));
  RETURN_IF_ERROR(tp_->AllGather(local_logits_.data<float>(), gathered_logits_.data<float>(),
                                 sizeof(float) * block_elems));
  const float* gathered = gathered_logits_.data<float>();
  if (!backend_->IsHostMemory()) {
    host_gathered_.resize(gathered_elems);
    RETURN_IF_ERROR(
        backend_->CopyToHost(host_gathered_.data(), gathered, sizeof(float) * gathered_elems));
    gathered = host_gathered_.data();
  }
  // Rank r's block is its [num_seqs, rows_r] logits, packed: columns [begin_r, end_r) of each row.
  for (size_t r = 0; r < rank_vocab_.size(); ++r) {
    const IndexRange range = rank_vocab_[r];
    const float* block = gathered + r * block_elems;
    for (int s = 0; s < num_seqs; ++s) {
      std::memcpy(logits->data() + s * vocab + range.begin,
                  block + static_cast<size_t>(s) * range.size(), sizeof(float) * range.size());
    }
  }
  return absl::OkStatus();
}

}  // namespace baton::runtime
