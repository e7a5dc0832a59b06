#include "runtime/batch/logits_processing.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace baton::runtime {

absl::Status ValidateLogitsProcessorOptions(const LogitsProcessorOptions& options,
                                            const kernels::SamplingOptions& sampling,
                                            int max_tokens, int vocab_size) {
  const auto in_range = [](float x, float lo, float hi) { return x >= lo && x <= hi; };
  if (!in_range(options.presence_penalty, -2, 2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampling.presence_penalty ", options.presence_penalty, " must be in [-2, 2]"));
  }
  if (!in_range(options.frequency_penalty, -2, 2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampling.frequency_penalty ", options.frequency_penalty, " must be in [-2, 2]"));
  }
  if (!(options.repetition_penalty > 0) || std::isinf(options.repetition_penalty)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampling.repetition_penalty ", options.repetition_penalty, " must be finite and > 0"));
  }
  if (!in_range(sampling.min_p, 0, 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling.min_p ", sampling.min_p, " must be in [0, 1]"));
  }
  for (const auto& [token_id, bias] : options.logit_bias) {
    if (token_id < 0 || (vocab_size > 0 && token_id >= vocab_size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sampling.logit_bias: token id ", token_id, " is outside the vocabulary",
                       vocab_size > 0 ? absl::StrCat(" [0, ", vocab_size, ")") : ""));
    }
    if (!in_range(bias, -100, 100)) {
      return absl::InvalidArgumentError(absl::StrCat("sampling.logit_bias: bias ", bias,
                                                     " of token id ", token_id,
                                                     " must be in [-100, 100]"));
    }
  }
  if (options.min_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("stop.min_tokens ", options.min_tokens, " must be >= 0"));
  }
  if (max_tokens > 0 && options.min_tokens > max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("stop.min_tokens ", options.min_tokens,
                                                   " must be <= max_tokens ", max_tokens));
  }
  return absl::OkStatus();
}

void TokenHistory::Update(const std::vector<int32_t>& token_ids, int num_prompt_tokens) {
  if (token_ids.size() < num_counted_) {
    counts_.clear();
    num_counted_ = 0;
  }
  for (; num_counted_ < token_ids.size(); ++num_counted_) {
    Counts& counts = counts_[token_ids[num_counted_]];
    if (num_counted_ < static_cast<size_t>(num_prompt_tokens)) {
      counts.in_prompt = true;
    } else {
      ++counts.output;
    }
  }
}

bool NeedsLogitsProcessing(const LogitsProcessorOptions& options, int num_generated) {
  return options.penalties() || !options.logit_bias.empty() || num_generated < options.min_tokens;
}

void TokenHistory::Fill(const LogitsProcessorOptions& options,
                        const std::vector<int32_t>& stop_token_ids, int num_generated,
                        LogitsProcessing* out) const {
  out->repetition_penalty = options.repetition_penalty;
  out->frequency_penalty = options.frequency_penalty;
  out->presence_penalty = options.presence_penalty;
  out->num_generated = num_generated;
  out->min_tokens = options.min_tokens;
  out->entries.clear();
  // One entry per token id: the history's first (when a penalty is on), then the bias keys and
  // stop tokens, merged into an existing entry when the token is there already.
  absl::flat_hash_map<int32_t, size_t> index;
  const auto entry = [&](int32_t token_id) -> kernels::LogitsTokenEntry& {
    auto [it, inserted] = index.try_emplace(token_id, out->entries.size());
    if (inserted) {
      out->entries.push_back(
          kernels::LogitsTokenEntry{.token_id = token_id, .output_count = 0, .bias = 0, .flags = 0});
    }
    return out->entries[it->second];
  };
  if (options.penalties()) {
    // Only the repetition penalty reads the prompt; the others read the generated tokens.
    const bool repetition = options.repetition_penalty != 1;
    for (const auto& [token_id, counts] : counts_) {
      if (!repetition && counts.output == 0) continue;
      kernels::LogitsTokenEntry& e = entry(token_id);
      e.output_count = counts.output;
      e.flags |= kernels::kLogitsTokenSeen;
    }
  }
  for (const auto& [token_id, bias] : options.logit_bias) entry(token_id).bias = bias;
  if (num_generated < options.min_tokens) {
    for (int32_t token_id : stop_token_ids) entry(token_id).flags |= kernels::kLogitsTokenStop;
  }
  // The hash map's order is arbitrary; the op does not care, but a fixed order is easier to read.
  std::sort(out->entries.begin(), out->entries.end(),
            [](const auto& a, const auto& b) { return a.token_id < b.token_id; });
}

}  // namespace baton::runtime
