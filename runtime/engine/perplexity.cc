#include "runtime/engine/perplexity.h"

#include <algorithm>
#include <deque>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {
namespace {

// Windows served at once: enough to batch the steps, few enough that their prompt logits (one
// [window, vocab] block each) stay small.
constexpr int kWindowsInFlight = 4;

}  // namespace

std::vector<std::vector<int32_t>> PerplexityWindows(const std::vector<int32_t>& text_ids,
                                                    const PerplexityOptions& options) {
  std::vector<std::vector<int32_t>> windows;
  const size_t width = static_cast<size_t>(std::max(options.window, 1));
  for (size_t start = 0; start < text_ids.size(); start += width) {
    std::vector<int32_t>& window = windows.emplace_back();
    window = options.prefix;
    const size_t end = std::min(text_ids.size(), start + width);
    window.insert(window.end(), text_ids.begin() + start, text_ids.begin() + end);
  }
  return windows;
}

absl::StatusOr<PerplexityResult> ScorePerplexity(Engine& engine, const std::vector<int32_t>& text_ids,
                                                 const PerplexityOptions& options) {
  if (text_ids.empty()) return absl::InvalidArgumentError("the text has no tokens to score");
  if (options.window < 2) {
    return absl::InvalidArgumentError(absl::StrCat("window must be >= 2 tokens, got ", options.window));
  }
  if (engine.HasWork()) return absl::FailedPreconditionError("the engine is serving other requests");
  // Position 0 has no context; the prefix is not the text.
  const size_t first_scored = std::max<size_t>(1, options.prefix.size());
  std::deque<std::vector<int32_t>> queued;
  for (std::vector<int32_t>& window : PerplexityWindows(text_ids, options)) {
    // A last window of one token with no prefix scores nothing.
    if (window.size() > first_scored) queued.push_back(std::move(window));
  }
  GenerationParams params;
  params.sampling.temperature = 0;
  params.max_tokens = 1;
  params.ignore_eos = true;
  params.num_prompt_logprobs = 0;  // the prompt token's own logprob, no alternatives

  PerplexityResult result;
  absl::flat_hash_set<SeqId> in_flight;
  while (!queued.empty() || !in_flight.empty()) {
    while (!queued.empty() && in_flight.size() < kWindowsInFlight) {
      std::vector<int32_t> window = std::move(queued.front());
      queued.pop_front();
      absl::StatusOr<SeqId> id = engine.AddRequest(window, params);
      if (!id.ok()) {
        return absl::Status(id.status().code(),
                            absl::StrCat("window ", result.num_windows + in_flight.size(), " (",
                                         window.size(), " tokens): ", id.status().message()));
      }
      in_flight.insert(*id);
    }
    // Every step finishes or advances some window (max_tokens 1); an engine with no work left
    // while windows are out has dropped them.
    if (!engine.HasWork()) return absl::InternalError("the engine stopped with windows unscored");
    ASSIGN_OR_RETURN(std::vector<TokenOutput> outputs, engine.Step());
    for (const TokenOutput& out : outputs) {
      if (!in_flight.erase(out.seq_id)) continue;
      for (size_t i = first_scored; i < out.prompt_logprobs.size(); ++i) {
        if (out.prompt_logprobs[i].empty()) {
          return absl::InternalError(absl::StrCat("prompt token ", i, " came back unscored"));
        }
        // k = 0: the entry holds the prompt token's own logprob alone.
        result.total_nll -= out.prompt_logprobs[i].back().logprob;
        ++result.num_scored_tokens;
      }
      ++result.num_windows;
    }
  }
  return result;
}

}  // namespace baton::runtime
