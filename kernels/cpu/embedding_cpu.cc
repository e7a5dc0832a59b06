#include <cstring>

#include "absl/strings/str_cat.h"
#include "baton/kernels/embedding.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/parallel.h"

namespace baton::kernels {

absl::Status EmbeddingCpu(const EmbeddingParams& p, ThreadPool* pool) {
  RETURN_IF_ERROR(Validate(p));
  for (int t = 0; t < p.num_tokens; ++t) {
    if (p.token_ids[t] < 0 || p.token_ids[t] >= p.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("Embedding: token id ", p.token_ids[t],
                                                     " at position ", t, " is outside [0, ",
                                                     p.vocab_size, ")"));
    }
  }
  const int64_t hidden = p.hidden;
  internal::ParallelChunks(pool, p.num_tokens, hidden, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      float* out = p.out + t * hidden;
      const int64_t row = int64_t{p.token_ids[t]} * hidden;
      switch (p.table_dtype) {
        case DType::kF32:
          std::memcpy(out, static_cast<const float*>(p.table) + row, hidden * sizeof(float));
          break;
        case DType::kBF16: {
          const uint16_t* src = static_cast<const uint16_t*>(p.table) + row;
          for (int64_t d = 0; d < hidden; ++d) out[d] = Bf16ToF32(src[d]);
          break;
        }
        case DType::kF16: {
          const uint16_t* src = static_cast<const uint16_t*>(p.table) + row;
          for (int64_t d = 0; d < hidden; ++d) out[d] = F16ToF32(src[d]);
          break;
        }
        case DType::kI8:  // refused by Validate
        case DType::kI4:
        case DType::kF8E4M3:
          break;
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace baton::kernels
