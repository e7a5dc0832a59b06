#include "kernels/reference/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace baton::kernels::reference {

namespace {

float LoadAsF32(const void* data, DType dtype, int64_t idx) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(data)[idx];
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(data)[idx]);
    case DType::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(data)[idx]);
    case DType::kI8:  // the integer, without its row's scale
      return static_cast<const int8_t*>(data)[idx];
    case DType::kI4:  // read by Int4Weight, which knows the row length
      break;
    case DType::kF8E4M3:  // the fp8 value, without its scale
      return Fp8E4M3ToF32(static_cast<const uint8_t*>(data)[idx]);
  }
  return std::numeric_limits<float>::quiet_NaN();
}

// Stores `value` rounded to `dtype` (nearest even).
void StoreFromF32(void* data, DType dtype, int64_t idx, float value) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(data)[idx] = value;
      return;
    case DType::kF16:
      static_cast<uint16_t*>(data)[idx] = F32ToF16(value);
      return;
    case DType::kBF16:
      static_cast<uint16_t*>(data)[idx] = F32ToBf16(value);
      return;
    case DType::kI8:
      static_cast<int8_t*>(data)[idx] =
          static_cast<int8_t>(std::clamp(std::nearbyint(value), -128.0f, 127.0f));
      return;
    case DType::kI4:  // packed with group scales: never a per-element store
      return;
    case DType::kF8E4M3:
      static_cast<uint8_t*>(data)[idx] = F32ToFp8E4M3(value);
      return;
  }
}

// Weight [j, c] of kI4 weights (MatmulParams), dequantized: scale * (u - zero).
double Int4Weight(const MatmulParams& p, int j, int c) {
  const auto* bytes = static_cast<const uint8_t*>(p.weight);
  const int block = c / kInt4ColumnBlock * kInt4ColumnBlock;
  const int half = kInt4ColumnBlock / 2;
  const int within = c - block;
  const uint8_t byte = bytes[(int64_t{j} * p.k + block) / 2 + within % half];
  const int u = within < half ? (byte & 0xF) : (byte >> 4);
  const int64_t group = int64_t{j} * (p.k / p.weight_group_size) + c / p.weight_group_size;
  const double zero = p.weight_zeros != nullptr ? p.weight_zeros[group] : 8.0;
  return double{p.weight_scales[group]} * (u - zero);
}

// The scale of weight [j, c] when it is fp8 (a row's, or its group's), else 1.
double Fp8Scale(const MatmulParams& p, int j, int c) {
  if (p.weight_dtype != DType::kF8E4M3) return 1.0;
  if (p.weight_group_size == 0) return p.weight_scales[j];
  return p.weight_scales[int64_t{j} * (p.k / p.weight_group_size) + c / p.weight_group_size];
}

}  // namespace

void Embedding(const EmbeddingParams& p) {
  for (int t = 0; t < p.num_tokens; ++t) {
    const int64_t row = p.token_ids[t];
    for (int d = 0; d < p.hidden; ++d) {
      p.out[int64_t{t} * p.hidden + d] = LoadAsF32(p.table, p.table_dtype, row * p.hidden + d);
    }
  }
}

void RmsNorm(const RmsNormParams& p) {
  for (int t = 0; t < p.num_tokens; ++t) {
    const float* in = p.in + int64_t{t} * p.hidden;
    float* out = p.out + int64_t{t} * p.hidden;
    double sum_sq = 0;
    for (int d = 0; d < p.hidden; ++d) sum_sq += double{in[d]} * in[d];
    const double inv_rms = 1.0 / std::sqrt(sum_sq / p.hidden + p.eps);
    for (int d = 0; d < p.hidden; ++d) {
      out[d] = static_cast<float>(in[d] * inv_rms * p.weight[d]);
    }
  }
}

void AddRmsNorm(const AddRmsNormParams& p) {
  for (int t = 0; t < p.num_tokens; ++t) {
    float* residual = p.residual + int64_t{t} * p.hidden;
    const float* in = p.in + int64_t{t} * p.hidden;
    for (int d = 0; d < p.hidden; ++d) residual[d] += in[d];
  }
  RmsNorm({.out = p.out,
           .in = p.residual,
           .weight = p.weight,
           .num_tokens = p.num_tokens,
           .hidden = p.hidden,
           .eps = p.eps});
}

namespace {

void RotateHead(float* x, int head_dim, const std::vector<double>& cos_a,
                const std::vector<double>& sin_a) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double x0 = x[i];
    const double x1 = x[i + half];
    x[i] = static_cast<float>(x0 * cos_a[i] - x1 * sin_a[i]);
    x[i + half] = static_cast<float>(x1 * cos_a[i] + x0 * sin_a[i]);
  }
}

}  // namespace

void Rope(const RopeParams& p) {
  const int half = p.head_dim / 2;
  std::vector<double> cos_a(half);
  std::vector<double> sin_a(half);
  for (int t = 0; t < p.num_tokens; ++t) {
    for (int i = 0; i < half; ++i) {
      // The angle is an f32 product, as in HF (positions.float() @ inv_freq).
      const float angle = static_cast<float>(p.positions[t]) * p.inv_freq[i];
      cos_a[i] = std::cos(double{angle});
      sin_a[i] = std::sin(double{angle});
    }
    for (int h = 0; h < p.num_heads; ++h) {
      RotateHead(p.q + int64_t{t} * p.q_stride + int64_t{h} * p.head_dim, p.head_dim, cos_a, sin_a);
    }
    for (int h = 0; h < p.num_kv_heads; ++h) {
      RotateHead(p.k + int64_t{t} * p.k_stride + int64_t{h} * p.head_dim, p.head_dim, cos_a, sin_a);
    }
  }
}

void KvWrite(const KvWriteParams& p) {
  const PagedKvView& c = p.cache;
  for (int t = 0; t < p.num_tokens; ++t) {
    const int64_t slot_idx = p.slot_mapping[t];
    if (slot_idx < 0) continue;
    for (int h = 0; h < c.num_kv_heads; ++h) {
      const int64_t dst = KvOffset(c, slot_idx, h);
      const int64_t src = int64_t{t} * p.kv_stride + int64_t{h} * c.head_dim;
      for (int d = 0; d < c.head_dim; ++d) {
        StoreFromF32(c.k, c.dtype, dst + d, p.k[src + d]);
        StoreFromF32(c.v, c.dtype, dst + d, p.v[src + d]);
      }
    }
  }
}

void KvGather(const KvGatherParams& p) {
  const PagedKvView& c = p.cache;
  for (int s = 0; s < p.num_seqs; ++s) {
    for (int j = 0; j < p.out_start[s + 1] - p.out_start[s]; ++j) {
      const int32_t block_id = p.block_tables[int64_t{s} * p.max_blocks_per_seq + j / c.block_size];
      const int64_t slot_idx = int64_t{block_id} * c.block_size + j % c.block_size;
      const int64_t row = int64_t{p.out_start[s]} + j;
      for (int h = 0; h < c.num_kv_heads; ++h) {
        const int64_t src = KvOffset(c, slot_idx, h);
        const int64_t dst = row * p.out_stride + int64_t{h} * c.head_dim;
        for (int d = 0; d < c.head_dim; ++d) {
          p.k_out[dst + d] = LoadAsF32(c.k, c.dtype, src + d);
          p.v_out[dst + d] = LoadAsF32(c.v, c.dtype, src + d);
        }
      }
    }
  }
}

void Swiglu(const SwigluParams& p) {
  for (int t = 0; t < p.num_tokens; ++t) {
    for (int i = 0; i < p.intermediate; ++i) {
      const double g = p.gate[int64_t{t} * p.in_stride + i];
      const double u = p.up[int64_t{t} * p.in_stride + i];
      p.out[int64_t{t} * p.out_stride + i] = static_cast<float>(g / (1 + std::exp(-g)) * u);
    }
  }
}

void Add(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Matmul(const MatmulParams& p) {
  for (int i = 0; i < p.m; ++i) {
    for (int j = 0; j < p.n; ++j) {
      double acc = 0.0;
      for (int l = 0; l < p.k; ++l) {
        const double w = p.weight_dtype == DType::kI4
                             ? Int4Weight(p, j, l)
                             : LoadAsF32(p.weight, p.weight_dtype, int64_t{j} * p.k + l);
        acc += double{p.in[int64_t{i} * p.k + l]} * w * Fp8Scale(p, j, l);
      }
      if (p.weight_dtype == DType::kI8) acc *= p.weight_scales[j];
      if (p.bias != nullptr) acc += p.bias[j];
      p.out[int64_t{i} * p.n + j] = static_cast<float>(acc);
    }
  }
}

void DenseAttention(float* out, const float* q, const float* k, const float* v, int num_keys,
                    int head_dim, int64_t kv_stride, float scale) {
  std::vector<double> scores(num_keys);
  double max_score = -std::numeric_limits<double>::infinity();
  for (int j = 0; j < num_keys; ++j) {
    double dot = 0;
    for (int d = 0; d < head_dim; ++d) dot += double{q[d]} * k[j * kv_stride + d];
    scores[j] = dot * scale;
    max_score = std::max(max_score, scores[j]);
  }
  double denom = 0;
  for (double& s : scores) {
    s = std::exp(s - max_score);
    denom += s;
  }
  for (int d = 0; d < head_dim; ++d) {
    double acc = 0;
    for (int j = 0; j < num_keys; ++j) acc += scores[j] * v[j * kv_stride + d];
    out[d] = static_cast<float>(acc / denom);
  }
}

void PrefillAttention(const PrefillAttentionParams& p) {
  const int group = p.num_heads / p.num_kv_heads;
  for (int s = 0; s < p.num_seqs; ++s) {
    const int q_len = p.q_start[s + 1] - p.q_start[s];
    const int kv_len = p.kv_start[s + 1] - p.kv_start[s];
    for (int i = 0; i < q_len; ++i) {
      const int64_t q_row = p.q_start[s] + i;
      const int num_keys = kv_len - q_len + i + 1;  // causal: keys [0, num_keys)
      for (int h = 0; h < p.num_heads; ++h) {
        const int kv_head = h / group;
        DenseAttention(p.out + q_row * p.num_heads * p.head_dim + int64_t{h} * p.head_dim,
                       p.q + q_row * p.q_stride + int64_t{h} * p.head_dim,
                       p.k + int64_t{p.kv_start[s]} * p.kv_stride + int64_t{kv_head} * p.head_dim,
                       p.v + int64_t{p.kv_start[s]} * p.kv_stride + int64_t{kv_head} * p.head_dim,
                       num_keys, p.head_dim, p.kv_stride, p.scale);
      }
    }
  }
}

void PagedAttentionDecode(const PagedAttentionParams& p) {
  const PagedKvView& c = p.cache;
  const int group = p.num_heads / c.num_kv_heads;
  const int64_t row_elems = int64_t{c.num_kv_heads} * c.head_dim;
  for (int s = 0; s < p.num_seqs; ++s) {
    const int len = p.context_lens[s];
    // Dense copies [len, num_kv_heads * head_dim] of the sequence's keys and values.
    std::vector<float> k_dense(len * row_elems);
    std::vector<float> v_dense(len * row_elems);
    for (int j = 0; j < len; ++j) {
      const int32_t block_id = p.block_tables[int64_t{s} * p.max_blocks_per_seq + j / c.block_size];
      const int64_t slot_idx = int64_t{block_id} * c.block_size + j % c.block_size;
      for (int h = 0; h < c.num_kv_heads; ++h) {
        const int64_t src = KvOffset(c, slot_idx, h);
        for (int d = 0; d < c.head_dim; ++d) {
          k_dense[j * row_elems + h * c.head_dim + d] = LoadAsF32(c.k, c.dtype, src + d);
          v_dense[j * row_elems + h * c.head_dim + d] = LoadAsF32(c.v, c.dtype, src + d);
        }
      }
    }
    for (int h = 0; h < p.num_heads; ++h) {
      const int kv_head = h / group;
      DenseAttention(p.out + int64_t{s} * p.num_heads * c.head_dim + int64_t{h} * c.head_dim,
                     p.q + int64_t{s} * p.q_stride + int64_t{h} * c.head_dim,
                     k_dense.data() + kv_head * c.head_dim, v_dense.data() + kv_head * c.head_dim,
                     len, c.head_dim, row_elems, p.scale);
    }
  }
}

std::vector<double> LogSoftmax(std::span<const float> logits) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float x : logits) max_logit = std::max(max_logit, double{x});
  double sum = 0;
  for (float x : logits) sum += std::exp(x - max_logit);
  const double log_sum = std::log(sum) + max_logit;
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - log_sum;
  return out;
}

std::vector<double> SamplingDistribution(std::span<const float> logits,
                                         const SamplingOptions& options) {
  const size_t n = logits.size();
  std::vector<double> probs(n);
  double max_scaled = -std::numeric_limits<double>::infinity();
  for (float x : logits) max_scaled = std::max(max_scaled, double{x} / options.temperature);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    probs[i] = std::exp(double{logits[i]} / options.temperature - max_scaled);
    sum += probs[i];
  }
  for (double& p : probs) p /= sum;
  // Order by descending probability, lower index first among equals.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  size_t keep = n;
  if (options.top_k > 0) keep = std::min(keep, static_cast<size_t>(options.top_k));
  double kept_mass = 0;
  for (size_t r = 0; r < keep; ++r) kept_mass += probs[order[r]];
  if (options.top_p < 1) {
    double cum = 0;
    for (size_t r = 0; r < keep; ++r) {
      cum += probs[order[r]] / kept_mass;
      if (cum >= options.top_p) {
        keep = r + 1;
        break;
      }
    }
  }
  std::vector<double> out(n, 0.0);
  double total = 0;
  for (size_t r = 0; r < keep; ++r) total += probs[order[r]];
  for (size_t r = 0; r < keep; ++r) out[order[r]] = probs[order[r]] / total;
  return out;
}

}  // namespace baton::kernels::reference
