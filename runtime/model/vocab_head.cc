#include "runtime/model/vocab_head.h"

#include <algorithm>

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
      logits_(backend),
      local_logits_(backend),
      gathered_logits_(backend),
      sample_args_(backend),
      processor_args_(backend),
      processed_logits_(backend),
      bitmask_args_(backend) {
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

absl::Status VocabHead::StageTokens(std::span<const int32_t> token_ids) {
  const int num_tokens = static_cast<int>(token_ids.size());
  for (int t = 0; t < num_tokens; ++t) {
    const int32_t id = token_ids[t];
    if (id < 0 || id >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat("Embedding: token id ", id, " at position ",
                                                     t, " is outside [0, ", vocab_size_, ")"));
    }
  }
  if (tp_ == nullptr) {
    ASSIGN_OR_RETURN(staged_ids_, ToDevice(token_ids, ids_staging_));
    return absl::OkStatus();
  }
  // The other ranks' ids read this rank's zero row, row num_rows.
  const int num_rows = vocab_end_ - vocab_begin_;
  local_ids_.resize(num_tokens);
  for (int t = 0; t < num_tokens; ++t) {
    const int32_t id = token_ids[t];
    local_ids_[t] = id >= vocab_begin_ && id < vocab_end_ ? id - vocab_begin_ : num_rows;
  }
  ASSIGN_OR_RETURN(staged_ids_, ToDevice(std::span<const int32_t>(local_ids_), ids_staging_));
  return absl::OkStatus();
}

absl::Status VocabHead::Embed(int num_tokens, float* x) {
  const int table_rows = tp_ == nullptr ? vocab_size_ : vocab_end_ - vocab_begin_ + 1;
  RETURN_IF_ERROR(backend_->Embedding(kernels::EmbeddingParams{.out = x,
                                                               .table = embed_tokens_.data,
                                                               .table_dtype = embed_tokens_.dtype,
                                                               .token_ids = staged_ids_,
                                                               .num_tokens = num_tokens,
                                                               .hidden = hidden_,
                                                               .vocab_size = table_rows}));
  if (tp_ == nullptr) return absl::OkStatus();
  return tp_->AllReduceSum(x, static_cast<size_t>(num_tokens) * hidden_);
}

absl::Status VocabHead::ComputeLogits(const float* h, int num_seqs) {
  const size_t vocab = static_cast<size_t>(vocab_size_);
  RETURN_IF_ERROR(logits_.Reserve(sizeof(float) * num_seqs * vocab));
  auto matmul = [&](float* out) {
    return backend_->Matmul(kernels::MatmulParams{.out = out,
                                                  .in = h,
                                                  .weight = lm_head_.data,
                                                  .weight_dtype = lm_head_.dtype,
                                                  .bias = nullptr,
                                                  .m = num_seqs,
                                                  .n = vocab_end_ - vocab_begin_,
                                                  .k = hidden_,
                                                  .weight_scales = lm_head_.scales,
                                                  .weight_zeros = lm_head_.zeros,
                                                  .weight_group_size = lm_head_.group_size});
  };
  if (tp_ == nullptr) return matmul(logits_.data<float>());

  const size_t block_elems = static_cast<size_t>(num_seqs) * max_vocab_rows_;  // one rank's send
  RETURN_IF_ERROR(local_logits_.Reserve(sizeof(float) * block_elems));
  RETURN_IF_ERROR(gathered_logits_.Reserve(sizeof(float) * block_elems * rank_vocab_.size()));
  RETURN_IF_ERROR(matmul(local_logits_.data<float>()));
  RETURN_IF_ERROR(tp_->AllGather(local_logits_.data<float>(), gathered_logits_.data<float>(),
                                 sizeof(float) * block_elems));
  // Rank r's block is its [num_seqs, rows_r] logits, packed: columns [begin_r, end_r) of each row.
  for (size_t r = 0; r < rank_vocab_.size(); ++r) {
    const IndexRange range = rank_vocab_[r];
    RETURN_IF_ERROR(backend_->CopyOnDevice2D(
        logits_.data<float>() + range.begin, sizeof(float) * vocab,
        gathered_logits_.data<float>() + r * block_elems, sizeof(float) * range.size(),
        sizeof(float) * range.size(), num_seqs));
  }
  return absl::OkStatus();
}

namespace {

// Where the Sample op's arrays lie in one buffer of `bytes`, the 8-byte ones first so that every
// array is aligned to its element (the buffer is at least 16-byte aligned).
struct SampleArgs {
  explicit SampleArgs(size_t n)
      : seed(0),
        draw_idx(8 * n),
        temperature(16 * n),
        top_p(20 * n),
        top_k(24 * n),
        min_p(28 * n),
        token_ids(32 * n),
        bytes(36 * n) {}
  size_t seed, draw_idx, temperature, top_p, top_k, min_p, token_ids, bytes;
};

// Where the logits processors' arrays lie in one buffer: all of 4-byte elements, the entries last.
struct ProcessorArgs {
  ProcessorArgs(size_t n, size_t num_entries)
      : entry_offsets(0),
        repetition_penalty(4 * (n + 1)),
        frequency_penalty(repetition_penalty + 4 * n),
        presence_penalty(frequency_penalty + 4 * n),
        num_generated(presence_penalty + 4 * n),
        min_tokens(num_generated + 4 * n),
        entries(min_tokens + 4 * n),
        bytes(entries + sizeof(kernels::LogitsTokenEntry) * num_entries) {}
  size_t entry_offsets, repetition_penalty, frequency_penalty, presence_penalty, num_generated,
      min_tokens, entries, bytes;
};

template <typename T>
T* At(std::byte* base, size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

}  // namespace

absl::Status VocabHead::StageSampling(std::span<const TokenSampling> sampling, int num_seqs) {
  if (!sampling.empty() && static_cast<int>(sampling.size()) != num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: ", sampling.size(),
                                                   " rows of options for ", num_seqs,
                                                   " sequences"));
  }
  const size_t n = static_cast<size_t>(num_seqs);
  const SampleArgs args(n);
  sample_args_host_.resize(args.bytes);
  std::byte* host = sample_args_host_.data();
  for (size_t s = 0; s < n; ++s) {
    const TokenSampling row = sampling.empty() ? TokenSampling{} : sampling[s];
    RETURN_IF_ERROR(kernels::ValidateSamplingOptions(row.options));
    At<uint64_t>(host, args.seed)[s] = row.seed;
    At<uint64_t>(host, args.draw_idx)[s] = row.draw_idx;
    At<float>(host, args.temperature)[s] = row.options.temperature;
    At<float>(host, args.top_p)[s] = row.options.top_p;
    At<int32_t>(host, args.top_k)[s] = row.options.top_k;
    At<float>(host, args.min_p)[s] = row.options.min_p;
  }
  staged_sampling_ = host;
  staged_num_seqs_ = num_seqs;
  RETURN_IF_ERROR(StageProcessors(sampling, num_seqs));
  RETURN_IF_ERROR(StageBitmasks(sampling));
  if (backend_->IsHostMemory()) return absl::OkStatus();
  RETURN_IF_ERROR(sample_args_.Reserve(args.bytes));
  staged_sampling_ = sample_args_.data<std::byte>();
  return backend_->CopyToDevice(staged_sampling_, host, args.token_ids);  // the inputs
}

absl::Status VocabHead::StageProcessors(std::span<const TokenSampling> sampling, int num_seqs) {
  staged_processors_ = nullptr;
  size_t num_entries = 0;
  bool any = false;
  for (const TokenSampling& row : sampling) {
    if (row.processing == nullptr) continue;
    any = true;
    num_entries += row.processing->entries.size();
  }
  if (!any) return absl::OkStatus();  // the step skips the op
  const size_t n = static_cast<size_t>(num_seqs);
  const ProcessorArgs args(n, num_entries);
  processors_host_.resize(args.bytes);
  std::byte* host = processors_host_.data();
  auto* entries = At<kernels::LogitsTokenEntry>(host, args.entries);
  int32_t offset = 0;
  for (size_t s = 0; s < n; ++s) {
    const LogitsProcessing none;
    const LogitsProcessing& row = sampling[s].processing != nullptr ? *sampling[s].processing : none;
    RETURN_IF_ERROR(kernels::ValidateLogitsEntries(static_cast<int>(s), row.entries.data(),
                                                   static_cast<int>(row.entries.size()),
                                                   row.repetition_penalty, vocab_size_));
    At<int32_t>(host, args.entry_offsets)[s] = offset;
    At<float>(host, args.repetition_penalty)[s] = row.repetition_penalty;
    At<float>(host, args.frequency_penalty)[s] = row.frequency_penalty;
    At<float>(host, args.presence_penalty)[s] = row.presence_penalty;
    At<int32_t>(host, args.num_generated)[s] = row.num_generated;
    At<int32_t>(host, args.min_tokens)[s] = row.min_tokens;
    std::copy(row.entries.begin(), row.entries.end(), entries + offset);
    offset += static_cast<int32_t>(row.entries.size());
  }
  At<int32_t>(host, args.entry_offsets)[n] = offset;
  staged_processors_ = host;
  staged_num_entries_ = num_entries;
  if (backend_->IsHostMemory()) return absl::OkStatus();
  RETURN_IF_ERROR(processor_args_.Reserve(args.bytes));
  staged_processors_ = processor_args_.data<std::byte>();
  return backend_->CopyToDevice(staged_processors_, host, args.bytes);
}

absl::Status VocabHead::StageBitmasks(std::span<const TokenSampling> sampling) {
  staged_num_masked_ = 0;
  staged_bitmask_ = nullptr;
  masked_rows_.clear();
  const size_t words = static_cast<size_t>(kernels::TokenBitmaskWordsFor(vocab_size_));
  bool all_filled = true;
  for (size_t s = 0; s < sampling.size(); ++s) {
    if (sampling[s].token_bitmask.empty()) continue;
    if (sampling[s].token_bitmask.size() != words) {
      return absl::InvalidArgumentError(absl::StrCat("sampling: sequence ", s, "'s token bitmask has ",
                                                     sampling[s].token_bitmask.size(), " words, not ",
                                                     words, " for vocab_size ", vocab_size_));
    }
    masked_rows_.push_back({static_cast<int32_t>(s), sampling[s].token_bitmask, sampling[s].token_bitmask_fill});
    all_filled = all_filled && (sampling[s].token_bitmask_fill == nullptr || sampling[s].token_bitmask_fill->done());
  }
  staged_num_masked_ = static_cast<int>(masked_rows_.size());
  if (staged_num_masked_ == 0 || !all_filled) return absl::OkStatus();  // nothing, or Head's to do
  return UploadBitmasks();
}

absl::Status VocabHead::UploadBitmasks() {
  bitmask_host_.clear();
  for (const MaskedRow& masked : masked_rows_) bitmask_host_.push_back(masked.row);
  for (const MaskedRow& masked : masked_rows_) {
    if (masked.fill != nullptr) RETURN_IF_ERROR(masked.fill->Wait());
    bitmask_host_.insert(bitmask_host_.end(), masked.bitmask.begin(), masked.bitmask.end());
  }
  staged_bitmask_ = bitmask_host_.data();
  if (backend_->IsHostMemory()) return absl::OkStatus();
  const size_t bytes = sizeof(int32_t) * bitmask_host_.size();
  RETURN_IF_ERROR(bitmask_args_.Reserve(bytes));
  staged_bitmask_ = bitmask_args_.data<int32_t>();
  return backend_->CopyToDevice(bitmask_args_.data<void>(), bitmask_host_.data(), bytes);
}

absl::Status VocabHead::Head(const float* h, int num_seqs) {
  RETURN_IF_ERROR(ComputeLogits(h, num_seqs));
  const float* sampled_logits = logits_.data<float>();
  if (staged_processors_ != nullptr || staged_num_masked_ > 0) {
    // On a copy of the raw logits, before temperature and the cuts, as vLLM orders them; the raw
    // ones stay for Collect: the logprobs a client sees are the model's, as vLLM's by default.
    const size_t bytes = sizeof(float) * static_cast<size_t>(num_seqs) * vocab_size_;
    RETURN_IF_ERROR(processed_logits_.Reserve(bytes));
    RETURN_IF_ERROR(backend_->CopyOnDevice(processed_logits_.data<void>(), logits_.data<void>(), bytes));
    sampled_logits = processed_logits_.data<float>();
  }
  if (staged_processors_ != nullptr) {
    const ProcessorArgs p(static_cast<size_t>(num_seqs), staged_num_entries_);
    std::byte* d = staged_processors_;
    RETURN_IF_ERROR(backend_->LogitsProcessors(kernels::LogitsProcessorsParams{
        .logits = processed_logits_.data<float>(),
        .entries = staged_num_entries_ > 0 ? At<const kernels::LogitsTokenEntry>(d, p.entries)
                                           : nullptr,
        .entry_offsets = At<const int32_t>(d, p.entry_offsets),
        .repetition_penalty = At<const float>(d, p.repetition_penalty),
        .frequency_penalty = At<const float>(d, p.frequency_penalty),
        .presence_penalty = At<const float>(d, p.presence_penalty),
        .num_generated = At<const int32_t>(d, p.num_generated),
        .min_tokens = At<const int32_t>(d, p.min_tokens),
        .num_seqs = num_seqs,
        .vocab_size = vocab_size_}));
  }
  if (staged_num_masked_ > 0) {
    // The grammar's mask last, after the processors: a bias cannot lift a token it forbids.
    if (staged_bitmask_ == nullptr) RETURN_IF_ERROR(UploadBitmasks());  // filled during the forward
    RETURN_IF_ERROR(backend_->TokenBitmask(kernels::TokenBitmaskParams{
        .logits = processed_logits_.data<float>(),
        .bitmask = staged_bitmask_ + staged_num_masked_,
        .rows = staged_bitmask_,
        .num_masked = staged_num_masked_,
        .vocab_size = vocab_size_,
        .bitmask_words = kernels::TokenBitmaskWordsFor(vocab_size_)}));
  }
  const SampleArgs args(static_cast<size_t>(num_seqs));
  std::byte* device = staged_sampling_;
  return backend_->Sample(kernels::SampleParams{
      .logits = sampled_logits,
      .temperature = At<float>(device, args.temperature),
      .top_k = At<int32_t>(device, args.top_k),
      .top_p = At<float>(device, args.top_p),
      .min_p = At<float>(device, args.min_p),
      .seed = At<uint64_t>(device, args.seed),
      .draw_idx = At<uint64_t>(device, args.draw_idx),
      .token_ids = At<int32_t>(device, args.token_ids),
      .logprobs = nullptr,
      .num_seqs = num_seqs,
      .vocab_size = vocab_size_});
}

absl::Status VocabHead::Collect(int num_seqs, bool return_logits, StepOutput* out) {
  BATON_CHECK(num_seqs <= staged_num_seqs_);
  const size_t n = static_cast<size_t>(num_seqs);
  // The staged batch may hold more rows than are wanted (a graph's padding): the tokens sit after
  // all of its options.
  const SampleArgs args(static_cast<size_t>(staged_num_seqs_));
  out->token_ids.resize(n);
  RETURN_IF_ERROR(backend_->CopyToHost(out->token_ids.data(),
                                       At<int32_t>(staged_sampling_, args.token_ids),
                                       sizeof(int32_t) * n));
  if (!return_logits) {
    out->logits.clear();
    return absl::OkStatus();
  }
  out->logits.resize(n * vocab_size_);
  return backend_->CopyToHost(out->logits.data(), logits_.data<float>(),
                              sizeof(float) * out->logits.size());
}

absl::Status VocabHead::Logits(const float* h, int num_rows, std::vector<float>* host_logits) {
  RETURN_IF_ERROR(ComputeLogits(h, num_rows));
  if (host_logits == nullptr) return absl::OkStatus();
  host_logits->resize(static_cast<size_t>(num_rows) * vocab_size_);
  return backend_->CopyToHost(host_logits->data(), logits_.data<float>(),
                              sizeof(float) * host_logits->size());
}

void VocabHead::AppendScratchAddresses(std::vector<const void*>* addresses) const {
  for (const DeviceBuffer* buffer :
       {&ids_staging_, &logits_, &local_logits_, &gathered_logits_, &sample_args_}) {
    // Not the processors' buffers: a step with processors is never graphed (decode_graphs.h).
    addresses->push_back(buffer->data<void>());
  }
  addresses->push_back(staged_ids_);
  addresses->push_back(staged_sampling_);
}

}  // namespace baton::runtime
