// Quantization of matmul weights at load time (vLLM's on-the-fly quantization): a checkpoint in
// f32/bf16/f16 becomes int8 weights with one scale per output row, which the matmul kernels read
// at a byte per weight (MatmulParams with weight_dtype kI8).
#pragma once

#include <cstdint>

namespace baton::runtime {

// Symmetric per-row int8, as compressed-tensors' channel-wise int8 and vLLM's W8A16: for each of
// `rows` rows of `cols` values, scale = max |w| / 127 (1 for a row of zeros, so that dividing by it
// is defined) and q = round-half-to-even(w / scale), which lies in [-127, 127] (torch.round's
// rounding, so a reference quantizer in numpy or torch gives the same integers).
void QuantizeRowsInt8(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scales);

}  // namespace baton::runtime
