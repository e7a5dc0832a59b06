// Quantization of matmul weights at load time (vLLM's on-the-fly quantization): a checkpoint in
// f32/bf16/f16 becomes int8 weights with one scale per output row (MatmulParams with weight_dtype
// kI8, a byte per weight), fp8 E4M3 weights with one scale per output row (kF8E4M3, a byte per
// weight), or int4 weights with a scale and zero point per group of columns (kI4, half a byte per
// weight).
#pragma once

#include <cstdint>

namespace baton::runtime {

// Symmetric per-row int8, as compressed-tensors' channel-wise int8 and vLLM's W8A16: for each of
// `rows` rows of `cols` values, scale = max |w| / 127 (1 for a row of zeros, so that dividing by it
// is defined) and q = round-half-to-even(w / scale), which lies in [-127, 127] (torch.round's
// rounding, so a reference quantizer in numpy or torch gives the same integers).
void QuantizeRowsInt8(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scales);

// Per-row fp8 E4M3, as llm-compressor's FP8 channel scheme (vLLM's dynamic `--quantization fp8`
// takes one scale per tensor; a row's own is never coarser): scale = max |w| / 448 (1 for a row of
// zeros), q = F32ToFp8E4M3(w / scale) (nearest, ties to even; kernels/common/dtype.h).
void QuantizeRowsFp8(const float* w, int64_t rows, int64_t cols, uint8_t* q, float* scales);

// The group size QuantizeRowsInt4 uses for rows of `cols` values: 128 (AWQ's and GPTQ's default)
// when it divides cols, else the largest of 64 and 32 that does; 0 when none does (cols cannot be
// int4 weights: kernels/include/baton/kernels/matmul.h).
int Int4GroupSize(int64_t cols);

// Asymmetric int4 in groups of `group_size` columns, AutoAWQ's zero-point round-to-nearest with the
// range widened to take in 0 (so that a group of one sign is still represented): with lo = min(0,
// min w), hi = max(0, max w) over the group, scale = (hi - lo) / 15 (1 for a group of zeros),
// zero = round(-lo / scale) in [0, 15], u = clamp(round(w / scale) + zero, 0, 15), and
// w ~ scale * (u - zero). Rounding is half to even (torch.round's). `packed` gets [rows, cols / 2]
// bytes in MatmulParams' kI4 order; scales and zeros [rows, cols / group_size].
void QuantizeRowsInt4(const float* w, int64_t rows, int64_t cols, int group_size, uint8_t* packed,
                      float* scales, float* zeros);

// Packs `cols` nibbles (u[c] in [0, 15], cols a multiple of 32) into cols / 2 bytes in
// MatmulParams' kI4 order: byte b of each 32-column run holds column b low, column b + 16 high.
void PackInt4Row(const uint8_t* u, int64_t cols, uint8_t* packed);

}  // namespace baton::runtime
