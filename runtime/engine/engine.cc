#include "runtime/engine/engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/common/status_macros.h"
#include "runtime/engine/spare_objects.h"

namespace baton::runtime {
namespace {

std::string PrefixCacheSalt(const ModelConfig& model, const EngineConfig& config) {
  return absl::StrCat("baton-kv/1 ", model.architecture, " hidden ", model.hidden_size, " layers ",
                      model.num_layers, " heads ", model.num_heads, "/", model.num_kv_heads, " head_dim ",
                      model.head_dim, " vocab ", model.vocab_size, " rope ", model.rope_theta, " weights ",
                      std::string(DTypeName(config.weight_dtype)), " kv ", std::string(DTypeName(config.kv_cache_dtype)),
                      " block ",
                      config.block_size);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config) {
  if (config.block_size <= 0 || config.num_threads <= 0 || config.max_num_seqs <= 0) {
    return absl::InvalidArgumentError(
        "engine: block_size, num_threads and max_num_seqs must be positive");
  }
  if (config.max_steps_in_flight < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "engine: max_steps_in_flight ", config.max_steps_in_flight, " must be >= 0 (0: the pp size)"));
  }
  if (!IsKvDType(config.kv_cache_dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("engine: kv_cache_dtype ", std::string(DTypeName(config.kv_cache_dtype)),
                     " is not supported (f32 or bf16)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ModelRanks> ranks,
                   ModelRanks::Create(ModelRanksOptions{.model_dir = config.model_dir,
                                                        .weight_dtype = config.weight_dtype,
                                                        .layout = config.parallel,
                                                        .device = config.device,
                                                        .first_device_index = config.first_device_index,
                                                        .decode_graphs = config.decode_graphs,
                                                        .threads_per_rank = config.num_threads,
                                                        .block_size = config.block_size,
                                                        .kv_cache_dtype = config.kv_cache_dtype,
                                                        .kv_cache_bytes = config.kv_cache_bytes,
                                                        .gpu_memory_utilization =
                                                            config.gpu_memory_utilization,
                                                        .kv_shm_names = config.kv_shm_names,
                                                        .swap_space_bytes = config.swap_space_bytes}));
  const int model_len = ranks->config().max_position_embeddings;
  const int max_model_len = config.max_model_len > 0 ? std::min(config.max_model_len, model_len)
                                                     : model_len;
  const int num_blocks = ranks->num_blocks();
  if (num_blocks < NumBlocksFor(max_model_len, config.block_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "engine: the KV budget (", config.kv_cache_bytes == 0 ? "a share of the devices" :
        absl::StrCat(config.kv_cache_bytes, " bytes"), ") holds ", num_blocks,
        " blocks, fewer than one sequence of max_model_len ", max_model_len, " needs (",
        NumBlocksFor(max_model_len, config.block_size), " blocks of ",
        ranks->kv_pool(0).BlockBytes(), " bytes on rank 0): raise the KV budget (kv_cache_bytes; "
        "--kv-cache-mib), use a bf16 KV cache (--kv-cache-dtype bf16), or lower max_model_len "
        "(--max-model-len)"));
  }
  EngineConfig effective = config;
  if (config.max_steps_in_flight == 0) effective.max_steps_in_flight = config.parallel.pp_size;
  if (!config.chunked_prefill) {
    effective.max_num_batched_tokens = std::max(config.max_num_batched_tokens, max_model_len);
  } else if (config.max_num_batched_tokens < 2) {
    return absl::InvalidArgumentError("engine: chunked prefill needs max_num_batched_tokens >= 2");
  }
  return std::unique_ptr<Engine>(new Engine(effective, std::move(ranks), max_model_len));
}

Engine::Engine(const EngineConfig& config, std::unique_ptr<ModelRanks> ranks, int max_model_len)
    : ranks_(std::move(ranks)),
      constraints_(config.model_dir, ranks_->config().vocab_size, ranks_->config().eos_token_ids),
      block_size_(config.block_size),
      prefix_caching_(config.enable_prefix_caching),
      fill_masks_during_forward_(config.fill_masks_during_forward),
      prefix_cache_salt_(PrefixCacheSalt(ranks_->config(), config)),
      max_model_len_(max_model_len),
      allocator_(ranks_->num_blocks()),
      swap_allocator_(ranks_->num_swap_blocks()),
      scheduler_(StepSchedulerConfig{.max_num_seqs = config.max_num_seqs,
                                     .max_num_batched_tokens = config.max_num_batched_tokens,
                                     .chunked_prefill = config.chunked_prefill,
                                     .max_steps_in_flight = config.max_steps_in_flight,
                                     .prefix_caching = config.enable_prefix_caching,
                                     .prefix_cache_root = PrefixCacheRoot(prefix_cache_salt_)},
                 &allocator_, ranks_->num_swap_blocks() > 0 ? &swap_allocator_ : nullptr),
      runner_(ranks_.get(), config.max_steps_in_flight),
      max_steps_in_flight_(config.max_steps_in_flight) {
  // Enough for a heartbeat's worth of prompts; a reader that falls further behind gets a snapshot.
  if (prefix_caching_) allocator_.RecordCacheEvents(1 << 16);
}

BlockAllocator::CacheEvents Engine::TakeCacheEvents(bool snapshot) {
  BlockAllocator::CacheEvents events = allocator_.TakeCacheEvents();
  if (!snapshot && !events.reset) return events;
  events = BlockAllocator::CacheEvents{.reset = true};
  for (BlockHash hash : allocator_.CachedHashes()) events.events.push_back({.hash = hash, .stored = true});
  return events;
}

absl::Status Engine::ValidateRequest(SeqId seq_id, const std::vector<int32_t>& prompt_token_ids,
                                     const std::vector<int32_t>& generated_token_ids,
                                     const GenerationParams& params) const {
  const int vocab_size = ranks_->config().vocab_size;
  if (prompt_token_ids.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", seq_id, ": empty prompt"));
  }
  for (const auto& [what, ids] : {std::pair{"prompt", &prompt_token_ids},
                                  std::pair{"generated", &generated_token_ids}}) {
    for (int32_t id : *ids) {
      if (id < 0 || id >= vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("request ", seq_id, ": ", what, " token id ", id,
                                                       " is outside the vocabulary [0, ", vocab_size, ")"));
      }
    }
  }
  if (params.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", seq_id, ": max_tokens ", params.max_tokens, " must be >= 1"));
  }
  if (generated_token_ids.size() >= static_cast<size_t>(params.max_tokens)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", seq_id, ": ", generated_token_ids.size(), " tokens generated already; max_tokens ",
        params.max_tokens, " leaves none to generate"));
  }
  for (const auto& [what, k] : {std::pair{"logprobs", params.num_logprobs},
                                std::pair{"prompt_logprobs", params.num_prompt_logprobs}}) {
    if (k && (*k < 0 || *k > 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("request ", seq_id, ": ", what, " ", *k, " must be in [0, 20]"));
    }
  }
  if (absl::Status s = ValidateLogitsProcessorOptions(params.logits_processors, params.sampling,
                                                      params.max_tokens, vocab_size);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", seq_id, ": ", s.message()));
  }
  if (params.constraint.active()) {
    if (absl::Status s = constraints_.Check(params.constraint); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("request ", seq_id, ": ", s.message()));
    }
  }
  const int64_t total = static_cast<int64_t>(prompt_token_ids.size()) + params.max_tokens;
  if (total > max_model_len_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", seq_id, ": prompt length ", prompt_token_ids.size(), " + max_tokens ",
        params.max_tokens, " exceeds max_model_len ", max_model_len_));
  }
  return absl::OkStatus();
}

absl::StatusOr<SeqId> Engine::AddRequest(std::vector<int32_t> prompt_token_ids,
                                         GenerationParams params,
                                         std::vector<int32_t> generated_token_ids) {
  const SeqId seq_id = next_seq_id_;
  RETURN_IF_ERROR(ValidateRequest(seq_id, prompt_token_ids, generated_token_ids, params));
  RETURN_IF_ERROR(AddConstraint(seq_id, params, generated_token_ids));
  if (!params.ignore_eos) {
    for (int32_t eos : ranks_->config().eos_token_ids) params.stop_token_ids.push_back(eos);
  }
  ++next_seq_id_;
  auto seq = std::make_unique<Sequence>(seq_id, std::move(prompt_token_ids), std::move(params),
                                        block_size_);
  seq->token_ids.insert(seq->token_ids.end(), generated_token_ids.begin(), generated_token_ids.end());
  scheduler_.Add(seq.get());
  seqs_.emplace(seq_id, std::move(seq));
  return seq_id;
}

Sequence* Engine::Find(SeqId seq_id) const {
  auto it = seqs_.find(seq_id);
  // A sequence cancelled in a step is gone to callers; it stays until the step is done.
  return it == seqs_.end() || it->second->finish_reason == FinishReason::kCancelled
             ? nullptr
             : it->second.get();
}

absl::Status Engine::AddConstraint(SeqId seq_id, const GenerationParams& params,
                                   const std::vector<int32_t>& generated_token_ids) {
  if (!params.constraint.active()) return absl::OkStatus();
  const absl::Status added = constraints_.Add(seq_id, params.constraint, generated_token_ids);
  if (added.ok()) return added;
  return absl::Status(added.code(), absl::StrCat("request ", seq_id, ": ", added.message()));
}

void Engine::Erase(Sequence* seq) {
  if (seq->status == SeqStatus::kPaused) --num_paused_;
  scheduler_.Remove(seq);
  const SeqId id = seq->id;  // erase destroys seq
  constraints_.Erase(id);
  seqs_.erase(id);
}

absl::StatusOr<Engine::HeldKv> Engine::GetHeldKv(SeqId seq_id) const {
  const Sequence* seq = Find(seq_id);
  if (seq == nullptr || seq->status != SeqStatus::kHoldingKv) {
    return absl::FailedPreconditionError(absl::StrCat("request ", seq_id, " holds no KV"));
  }
  return HeldKv{.blocks = seq->block_table.blocks(), .num_tokens = seq->num_computed_tokens};
}

absl::Status Engine::ReleaseKv(SeqId seq_id) {
  const Sequence* seq = Find(seq_id);
  if (seq == nullptr || seq->status != SeqStatus::kHoldingKv) {
    return absl::FailedPreconditionError(absl::StrCat("request ", seq_id, " holds no KV"));
  }
  return Cancel(seq_id);
}

absl::Status Engine::ValidatePrefilled(const std::vector<int32_t>& prompt_token_ids,
                                       const std::vector<int32_t>& generated_token_ids,
                                       const GenerationParams& params) const {
  const SeqId seq_id = next_seq_id_;
  RETURN_IF_ERROR(ValidateRequest(seq_id, prompt_token_ids, generated_token_ids, params));
  if (generated_token_ids.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", seq_id, ": a prefilled request needs its first token"));
  }
  return absl::OkStatus();
}

bool Engine::CanAdmitPrefilled(const std::vector<int32_t>& prompt_token_ids,
                               const std::vector<int32_t>& generated_token_ids) const {
  const int num_kv_tokens = NumPrefilledKvTokens(prompt_token_ids, generated_token_ids);
  std::vector<int32_t> tokens = prompt_token_ids;
  tokens.insert(tokens.end(), generated_token_ids.begin(), generated_token_ids.end());
  // Room for the KV and the next token's, so the first decode step cannot preempt.
  return allocator_.CanAllocate(NumBlocksFor(num_kv_tokens + 1, block_size_) -
                                scheduler_.NumHeldCachedBlocks(tokens, num_kv_tokens, block_size_));
}

absl::StatusOr<SeqId> Engine::AdmitPrefilled(std::vector<int32_t> prompt_token_ids,
                                             std::vector<int32_t> generated_token_ids,
                                             GenerationParams params) {
  const SeqId seq_id = next_seq_id_;
  RETURN_IF_ERROR(ValidatePrefilled(prompt_token_ids, generated_token_ids, params));
  const int num_kv_tokens = NumPrefilledKvTokens(prompt_token_ids, generated_token_ids);
  const int num_blocks = NumBlocksFor(num_kv_tokens, block_size_);
  if (!CanAdmitPrefilled(prompt_token_ids, generated_token_ids)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request ", seq_id, ": ", num_blocks, " KV blocks needed, ", allocator_.num_blocks_free(), " free"));
  }
  RETURN_IF_ERROR(AddConstraint(seq_id, params, generated_token_ids));
  if (!params.ignore_eos) {
    for (int32_t eos : ranks_->config().eos_token_ids) params.stop_token_ids.push_back(eos);
  }
  ++next_seq_id_;
  auto seq = std::make_unique<Sequence>(seq_id, std::move(prompt_token_ids), std::move(params),
                                        block_size_);
  seq->token_ids.insert(seq->token_ids.end(), generated_token_ids.begin(), generated_token_ids.end());
  // Room for every block was checked: the cached ones taken first leave enough for the rest.
  const int num_cached = scheduler_.TakeCachedKv(seq.get(), num_kv_tokens);
  seq->block_table.AddBlocks(*allocator_.Allocate(num_blocks - num_cached));
  seq->block_table.AppendTokens(num_kv_tokens - seq->block_table.num_tokens());
  seq->num_computed_tokens = num_kv_tokens;
  seq->ends_prefill = false;
  seq->status = SeqStatus::kAwaitingKv;
  seqs_.emplace(seq_id, std::move(seq));
  return seq_id;
}

absl::StatusOr<std::vector<BlockId>> Engine::BlocksOf(SeqId seq_id) const {
  const Sequence* seq = Find(seq_id);
  if (seq == nullptr) return absl::NotFoundError(absl::StrCat("request ", seq_id, " is not in the engine"));
  return seq->block_table.blocks();
}

absl::StatusOr<int> Engine::NumCachedBlocksOf(SeqId seq_id) const {
  const Sequence* seq = Find(seq_id);
  if (seq == nullptr || seq->status != SeqStatus::kAwaitingKv) {
    return absl::FailedPreconditionError(absl::StrCat("request ", seq_id, " is not awaiting its KV"));
  }
  return seq->block_table.num_cached_blocks();
}

absl::Status Engine::StartDecoding(SeqId seq_id) {
  Sequence* seq = Find(seq_id);
  if (seq == nullptr || seq->status != SeqStatus::kAwaitingKv) {
    return absl::FailedPreconditionError(absl::StrCat("request ", seq_id, " is not awaiting its KV"));
  }
  scheduler_.AddRunning(seq);
  return absl::OkStatus();
}

absl::Status Engine::Cancel(SeqId seq_id) {
  Sequence* seq = Find(seq_id);
  if (seq == nullptr) {
    return absl::NotFoundError(absl::StrCat("request ", seq_id, " is not in the engine"));
  }
  if (seq->in_step) {
    seq->finish_reason = FinishReason::kCancelled;  // erased when its step is done
  } else {
    Erase(seq);
  }
  return absl::OkStatus();
}

absl::Status Engine::Pause(SeqId seq_id) {
  Sequence* seq = Find(seq_id);
  if (seq == nullptr) return absl::NotFoundError(absl::StrCat("request ", seq_id, " is not in the engine"));
  if (seq->status == SeqStatus::kPaused) return absl::OkStatus();
  if (seq->status == SeqStatus::kRunning && !seq->in_step) {
    scheduler_.Pause(seq);
    ++num_paused_;
  } else {
    seq->pause_requested = true;  // TakeOutputs pauses it after its next token
  }
  return absl::OkStatus();
}

void Engine::ReleasePausedKvFor(int num_kv_tokens) {
  scheduler_.ReleasePausedKv(NumBlocksFor(num_kv_tokens + 1, block_size_));
}

absl::Status Engine::Resume(SeqId seq_id) {
  Sequence* seq = Find(seq_id);
  if (seq == nullptr) return absl::NotFoundError(absl::StrCat("request ", seq_id, " is not in the engine"));
  seq->pause_requested = false;
  if (seq->status == SeqStatus::kPaused) {
    scheduler_.Resume(seq);
    --num_paused_;
  }
  return absl::OkStatus();
}

FinishReason Engine::CheckFinished(const Sequence& seq, int32_t token) const {
  const auto& stops = seq.params.stop_token_ids;
  // Before min_tokens the stop tokens are masked (logits_processors.h); should one still come
  // (every other logit -inf), it does not end the generation either, as in vLLM.
  const bool may_stop = seq.num_generated_tokens() >= seq.params.logits_processors.min_tokens;
  if (may_stop && std::find(stops.begin(), stops.end(), token) != stops.end()) {
    return FinishReason::kStop;
  }
  if (seq.num_generated_tokens() >= seq.params.max_tokens) return FinishReason::kLength;
  if (seq.num_tokens() >= max_model_len_) return FinishReason::kLength;
  return FinishReason::kNone;
}

absl::StatusOr<std::vector<TokenOutput>> Engine::Step() {
  while (static_cast<int>(in_flight_.size()) < max_steps_in_flight_) {
    ScheduledStep step = scheduler_.Schedule();
    if (step.empty()) break;
    StartStep(std::move(step));
  }
  if (in_flight_.empty()) return std::vector<TokenOutput>();
  return FinishOldestStep();
}

void Engine::StartStep(ScheduledStep step) {
  std::unique_ptr<InFlightStep> flight = TakeSpare(spare_steps_);
  flight->step = std::move(step);
  const int64_t now_us = absl::ToUnixMicros(absl::Now());
  for (Sequence* seq : flight->step.seqs) {
    if (seq->first_scheduled_us == 0) seq->first_scheduled_us = now_us;
  }
  // Draw n of the seed's stream samples generated token n: a function of the sequence alone, so a
  // decode worker continues a prefill worker's stream, and a recomputed sequence its own, with no
  // generator state to hand over. The logits come to the host only for what needs them.
  const ScheduledStep& scheduled = flight->step;
  flight->sampling.clear();
  flight->processing.resize(scheduled.seqs.size());  // sized before any pointer into it is taken
  flight->return_logits = false;
  std::vector<size_t> filled_later;  // rows whose bitmask is filled while the forward pass runs
  for (size_t i = 0; i < scheduled.seqs.size(); ++i) {
    Sequence* seq = scheduled.seqs[i];
    TokenSampling& sampling = flight->sampling.emplace_back(TokenSampling{
        .options = seq->params.sampling,
        .seed = seq->params.seed,
        .draw_idx = static_cast<uint64_t>(seq->num_generated_tokens())});
    // A prefill chunk short of the prompt's end samples nothing.
    const bool samples = seq->num_uncomputed_tokens() <= scheduled.q_lens[i];
    // The grammar's mask for the token this step samples, from the tokens accepted so far: filled
    // during the forward pass, or now when the min_tokens rule below must read it.
    const LogitsProcessorOptions& processors = seq->params.logits_processors;
    const bool constrained = samples && constraints_.Has(seq->id);
    if (constrained && seq->num_generated_tokens() < processors.min_tokens) {
      sampling.token_bitmask = constraints_.NextTokenBitmask(seq->id);
    } else if (constrained && fill_masks_during_forward_) {
      sampling.token_bitmask = constraints_.BitmaskOf(seq->id);
      filled_later.push_back(i);
    } else if (constrained) {
      sampling.token_bitmask = constraints_.NextTokenBitmask(seq->id);
    }
    // The processors' counts come from the sequence's tokens, so a resumed or handed-over
    // sequence gets the same ones.
    if (samples && NeedsLogitsProcessing(processors, seq->num_generated_tokens())) {
      seq->history.Update(seq->token_ids, seq->num_prompt_tokens);
      seq->history.Fill(processors, seq->params.stop_token_ids, seq->num_generated_tokens(),
                        &flight->processing[i]);
      sampling.processing = &flight->processing[i];
      // A complete output allows its stop tokens alone: the grammar outranks min_tokens, whose
      // mask would leave nothing to sample.
      if (constrained && seq->num_generated_tokens() < processors.min_tokens &&
          constraints_.OnlyStopTokensAllowed(seq->id)) {
        flight->processing[i].min_tokens = 0;
      }
    }
    flight->return_logits = flight->return_logits || seq->params.num_logprobs.has_value() ||
                            seq->params.return_logits;
  }
  flight->bitmask_fill.reset();
  if (!filled_later.empty()) {
    std::vector<int64_t> ids;
    for (size_t i : filled_later) ids.push_back(scheduled.seqs[i]->id);
    flight->bitmask_fill = constraints_.FillBitmasksAsync(ids);
    for (size_t i : filled_later) flight->sampling[i].token_bitmask_fill = flight->bitmask_fill.get();
  }
  if (step_observer_) {
    StepRecord& record = flight->record;
    record = StepRecord{};
    for (size_t i = 0; i < scheduled.seqs.size(); ++i) {
      const Sequence& seq = *scheduled.seqs[i];
      if (static_cast<int>(i) < scheduled.num_decode_seqs) {
        ++record.decode_seqs;
        record.decode_context += seq.num_tokens();
      } else {
        const double q = scheduled.q_lens[i];
        record.prompt_tokens += scheduled.q_lens[i];
        record.prompt_tokens_squared += q * (q + 2.0 * seq.num_computed_tokens);
      }
    }
    record.start_us = absl::ToUnixMicros(absl::Now());
  }
  runner_.Submit(scheduled, flight->sampling, flight->return_logits);
  in_flight_.push_back(std::move(flight));
}

absl::StatusOr<std::vector<TokenOutput>> Engine::FinishOldestStep() {
  spare_steps_.push_back(std::move(in_flight_.front()));
  in_flight_.pop_front();
  const ScheduledStep& step = spare_steps_.back()->step;
  const bool return_logits = spare_steps_.back()->return_logits;
  const absl::Status status = runner_.Wait(step, &output_);
  const int64_t end_us = step_observer_ ? absl::ToUnixMicros(absl::Now()) : 0;
  scheduler_.StepDone(step);
  if (!status.ok()) {
    // The instance failed: the steps behind this one fail too; none of them is waited for again.
    while (!in_flight_.empty()) {
      (void)runner_.Wait(in_flight_.front()->step, &output_);
      scheduler_.StepDone(in_flight_.front()->step);
      spare_steps_.push_back(std::move(in_flight_.front()));
      in_flight_.pop_front();
    }
    std::vector<Sequence*> cancelled;
    for (const auto& [id, seq] : seqs_) {
      if (seq->finish_reason == FinishReason::kCancelled) cancelled.push_back(seq.get());
    }
    for (Sequence* seq : cancelled) Erase(seq);
    return status;
  }
  scheduler_.CacheComputedBlocks(step);
  std::vector<Sequence*> cancelled;  // taken first: TakeOutputs erases the finished ones
  for (Sequence* seq : step.seqs) {
    if (seq->finish_reason == FinishReason::kCancelled) cancelled.push_back(seq);
  }
  absl::StatusOr<std::vector<TokenOutput>> outputs = TakeOutputs(step, return_logits);
  for (Sequence* seq : cancelled) Erase(seq);
  if (step_observer_ && outputs.ok()) {
    StepRecord& record = spare_steps_.back()->record;
    record.end_us = end_us;
    record.busy_after = HasWork();
    step_observer_(record);
  }
  return outputs;
}

absl::StatusOr<std::vector<TokenOutput>> Engine::TakeOutputs(const ScheduledStep& step,
                                                             bool return_logits) {
  std::vector<TokenOutput> outputs;
  for (PromptTokenLogprobs& scored : output_.prompt_logprobs) {
    Sequence& seq = *step.seqs[scored.seq];
    if (seq.prompt_logprobs.empty()) seq.prompt_logprobs.emplace_back();  // the first token's: none
    // A prompt computed again (preempted before its first token) is scored again: the first stands.
    if (scored.token_index == static_cast<int>(seq.prompt_logprobs.size())) {
      seq.prompt_logprobs.push_back(std::move(scored.logprobs));
    }
  }
  const int vocab_size = ranks_->config().vocab_size;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    Sequence& seq = *step.seqs[i];
    if (seq.finish_reason == FinishReason::kCancelled) continue;
    if (seq.num_uncomputed_tokens() > 0) continue;  // a prefill chunk short of the prompt's end
    const int32_t token = output_.token_ids[i];
    if (token < 0) {
      return absl::InternalError(
          absl::StrCat("request ", seq.id, ": the model's logits hold a NaN; no token to sample"));
    }
    const std::span<const float> row =
        return_logits ? std::span<const float>(output_.logits.data() + i * vocab_size, vocab_size)
                      : std::span<const float>();
    const bool scored_prompt = seq.ScoresPrompt();  // asked before the first token
    seq.token_ids.push_back(token);
    TokenOutput& out = outputs.emplace_back();
    if (scored_prompt) {
      seq.prompt_logprobs.resize(std::max(seq.num_prompt_tokens, 1));  // a 1-token prompt: none
      out.prompt_logprobs = std::move(seq.prompt_logprobs);
    }
    out.seq_id = seq.id;
    out.token_id = token;
    if (seq.params.num_logprobs) out.logprobs = kernels::TopLogprobs(row, *seq.params.num_logprobs, token);
    if (seq.params.return_logits) out.logits.assign(row.begin(), row.end());
    out.finish_reason = CheckFinished(seq, token);
    if (constraints_.Has(seq.id)) {
      RETURN_IF_ERROR(constraints_.Accept(seq.id, token));
      // Complete and its stop token taken: nothing more may follow (even with ignore_eos).
      if (out.finish_reason == FinishReason::kNone && constraints_.IsTerminated(seq.id)) {
        out.finish_reason = FinishReason::kStop;
      }
    }
    if (seq.ends_prefill) {
      out.prefill_start_us = seq.first_scheduled_us;
      out.num_cached_tokens = seq.num_cached_tokens;
    }
    seq.ends_prefill = false;
  }
  for (const TokenOutput& out : outputs) {
    Sequence* seq = seqs_.at(out.seq_id).get();
    if (out.finish_reason != FinishReason::kNone) {
      Erase(seq);
    } else if (seq->params.hold_kv_after_prefill) {
      scheduler_.Park(seq);
    } else if (seq->pause_requested && seq->status == SeqStatus::kRunning) {
      seq->pause_requested = false;
      scheduler_.Pause(seq);
      ++num_paused_;
    }
  }
  return outputs;
}

}  // namespace baton::runtime
