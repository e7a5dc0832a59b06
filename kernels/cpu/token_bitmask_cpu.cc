// The token bitmask on the CPU: each listed row's disallowed tokens to -inf.
#include <cmath>

#include "baton/kernels/token_bitmask.h"
#include "kernels/common/status_macros.h"

namespace baton::kernels {

absl::Status TokenBitmaskCpu(const TokenBitmaskParams& p) {
  RETURN_IF_ERROR(Validate(p));
  for (int m = 0; m < p.num_masked; ++m) {
    float* row = p.logits + int64_t{p.rows[m]} * p.vocab_size;
    const int32_t* bits = p.bitmask + int64_t{m} * p.bitmask_words;
    for (int t = 0; t < p.vocab_size; ++t) {
      if (!TokenAllowed(bits, t)) row[t] = -INFINITY;
    }
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
