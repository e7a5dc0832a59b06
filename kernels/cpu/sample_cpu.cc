// The batched sampling op on the CPU: SampleToken per row, each row drawing at its own
// (seed, draw index).
#include <algorithm>
#include <cmath>
#include <span>

#include "absl/strings/str_cat.h"
#include "baton/kernels/sample.h"
#include "baton/kernels/sampling.h"
#include "kernels/common/status_macros.h"

namespace baton::kernels {

absl::Status SampleCpu(const SampleParams& p) {
  RETURN_IF_ERROR(Validate(p));
  for (int s = 0; s < p.num_seqs; ++s) {
    const std::span<const float> row(p.logits + int64_t{s} * p.vocab_size, p.vocab_size);
    const SamplingOptions options{
        .temperature = p.temperature[s], .top_k = p.top_k[s], .top_p = p.top_p[s],
        .min_p = p.min_p != nullptr ? p.min_p[s] : 0.0f};
    // A NaN logit is the kernel's -1, not an error, so that one bad row does not hide the others'
    // tokens (as it cannot on the device, where the launch has no status per row).
    if (std::any_of(row.begin(), row.end(), [](float x) { return std::isnan(x); })) {
      p.token_ids[s] = -1;
      if (p.logprobs != nullptr) p.logprobs[s] = NAN;
      continue;
    }
    SamplerRng rng(p.seed[s], p.draw_idx[s]);
    absl::StatusOr<int32_t> token = SampleToken(row, options, rng);
    if (!token.ok()) {
      return absl::Status(token.status().code(),
                          absl::StrCat("Sample: sequence ", s, ": ", token.status().message()));
    }
    p.token_ids[s] = *token;
    if (p.logprobs != nullptr) {
      double max_logit = row[0];
      for (float x : row) max_logit = std::max<double>(max_logit, x);
      double sum = 0;
      for (float x : row) sum += std::exp(double{x} - max_logit);
      p.logprobs[s] = static_cast<float>(double{row[*token]} - max_logit - std::log(sum));
    }
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
