#include "runtime/model/llama_weights.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {
namespace {

constexpr size_t kBufferAlignment = 64;  // a cache line, and an AVX-512 register
// Below this many elements a conversion runs on the calling thread: waking the pool costs more.
constexpr int64_t kMinParallelElements = 1 << 16;

float LoadAsF32(const std::byte* src, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32: {
      float value;
      std::memcpy(&value, src + 4 * i, 4);
      return value;
    }
    case DType::kF16: {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * i, 2);
      return F16ToF32(bits);
    }
    case DType::kBF16: {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * i, 2);
      return Bf16ToF32(bits);
    }
  }
  return 0;
}

// dst[begin, end) = src[begin, end) converted from src_dtype to dst_dtype. dst is aligned for
// dst_dtype; src may be unaligned (it points into a file mapping).
void ConvertRange(const std::byte* src, DType src_dtype, std::byte* dst, DType dst_dtype,
                  int64_t begin, int64_t end) {
  if (src_dtype == dst_dtype) {
    const size_t elem_bytes = DTypeBytes(dst_dtype);
    std::memcpy(dst + begin * elem_bytes, src + begin * elem_bytes, (end - begin) * elem_bytes);
    return;
  }
  switch (dst_dtype) {
    case DType::kF32: {
      auto* out = reinterpret_cast<float*>(dst);
      for (int64_t i = begin; i < end; ++i) out[i] = LoadAsF32(src, src_dtype, i);
      return;
    }
    case DType::kBF16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = begin; i < end; ++i) out[i] = F32ToBf16(LoadAsF32(src, src_dtype, i));
      return;
    }
    case DType::kF16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = begin; i < end; ++i) out[i] = F32ToF16(LoadAsF32(src, src_dtype, i));
      return;
    }
  }
}

// Loads the tensors of one checkpoint into Weights of the requested dtypes, keeping or converting.
class WeightLoader {
 public:
  WeightLoader(const Checkpoint& checkpoint, ThreadPool& pool, LlamaWeights& out)
      : checkpoint_(checkpoint), pool_(pool), out_(out) {}

  // The tensor `name` of exactly `shape`, as `target` (nullopt: as stored).
  absl::StatusOr<Weight> Load(const std::string& name, std::vector<int64_t> shape,
                              std::optional<DType> target) {
    ASSIGN_OR_RETURN(TensorInfo info, checkpoint_.Get(name, shape));
    return FromInfo(info, target.value_or(info.dtype));
  }

  // `info` as `target`: zero-copy when it already is and is aligned, else a converted copy.
  Weight FromInfo(const TensorInfo& info, DType target) {
    Weight weight{.dtype = target, .shape = info.shape, .data = info.data};
    if (info.dtype == target && reinterpret_cast<uintptr_t>(info.data) % DTypeBytes(target) == 0) {
      return weight;
    }
    const int64_t numel = weight.numel();
    const size_t num_bytes = weight.num_bytes();
    const size_t alloc_bytes = std::max<size_t>(
        kBufferAlignment, (num_bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment);
    OwnedBuffer buffer(static_cast<std::byte*>(std::aligned_alloc(kBufferAlignment, alloc_bytes)));
    BATON_CHECK(buffer != nullptr);
    std::byte* dst = buffer.get();
    if (numel < kMinParallelElements) {
      ConvertRange(info.data, info.dtype, dst, target, 0, numel);
    } else {
      pool_.ParallelFor(numel, [&](int64_t begin, int64_t end, int) {
        ConvertRange(info.data, info.dtype, dst, target, begin, end);
      });
    }
    weight.data = dst;
    out_.owned.push_back(std::move(buffer));
    out_.num_owned_bytes += num_bytes;
    return weight;
  }

 private:
  const Checkpoint& checkpoint_;
  ThreadPool& pool_;
  LlamaWeights& out_;
};

absl::StatusOr<LayerWeights> LoadLayer(WeightLoader& loader, const ModelConfig& config,
                                       int layer_idx, DType matmul_dtype) {
  const std::string prefix = absl::StrCat("model.layers.", layer_idx, ".");
  const int64_t hidden = config.hidden_size;
  const int64_t q_dim = int64_t{config.num_heads} * config.head_dim;
  const int64_t kv_dim = int64_t{config.num_kv_heads} * config.head_dim;
  const int64_t inter = config.intermediate_size;
  auto matmul = [&](std::string_view name, std::vector<int64_t> shape) {
    return loader.Load(prefix + std::string(name), std::move(shape), matmul_dtype);
  };
  auto f32 = [&](std::string_view name, std::vector<int64_t> shape) {
    return loader.Load(prefix + std::string(name), std::move(shape), DType::kF32);
  };

  LayerWeights layer;
  ASSIGN_OR_RETURN(layer.input_norm, f32("input_layernorm.weight", {hidden}));
  ASSIGN_OR_RETURN(layer.q_proj, matmul("self_attn.q_proj.weight", {q_dim, hidden}));
  ASSIGN_OR_RETURN(layer.k_proj, matmul("self_attn.k_proj.weight", {kv_dim, hidden}));
  ASSIGN_OR_RETURN(layer.v_proj, matmul("self_attn.v_proj.weight", {kv_dim, hidden}));
  ASSIGN_OR_RETURN(layer.o_proj, matmul("self_attn.o_proj.weight", {hidden, q_dim}));
  if (config.attention_bias) {
    ASSIGN_OR_RETURN(layer.q_bias, f32("self_attn.q_proj.bias", {q_dim}));
    ASSIGN_OR_RETURN(layer.k_bias, f32("self_attn.k_proj.bias", {kv_dim}));
    ASSIGN_OR_RETURN(layer.v_bias, f32("self_attn.v_proj.bias", {kv_dim}));
  }
  ASSIGN_OR_RETURN(layer.post_attention_norm, f32("post_attention_layernorm.weight", {hidden}));
  ASSIGN_OR_RETURN(layer.gate_proj, matmul("mlp.gate_proj.weight", {inter, hidden}));
  ASSIGN_OR_RETURN(layer.up_proj, matmul("mlp.up_proj.weight", {inter, hidden}));
  ASSIGN_OR_RETURN(layer.down_proj, matmul("mlp.down_proj.weight", {hidden, inter}));
  return layer;
}

}  // namespace

int64_t Weight::numel() const { return data == nullptr ? 0 : NumElements(shape); }

absl::StatusOr<std::unique_ptr<LlamaWeights>> LoadLlamaWeights(
    const std::filesystem::path& model_dir, const ModelConfig& config, DType matmul_dtype,
    ThreadPool* pool) {
  if (matmul_dtype != DType::kF32 && matmul_dtype != DType::kBF16) {
    return absl::InvalidArgumentError(absl::StrCat("matmul dtype must be f32 or bf16, got ",
                                                   std::string(DTypeName(matmul_dtype))));
  }
  std::optional<ThreadPool> local_pool;
  if (pool == nullptr) {
    local_pool.emplace(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    pool = &*local_pool;
  }
  auto weights = std::make_unique<LlamaWeights>();
  ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Open(model_dir));
  weights->checkpoint = std::make_unique<const Checkpoint>(std::move(checkpoint));
  WeightLoader loader(*weights->checkpoint, *pool, *weights);

  const int64_t hidden = config.hidden_size;
  const int64_t vocab = config.vocab_size;
  ASSIGN_OR_RETURN(TensorInfo embed, weights->checkpoint->Get("model.embed_tokens.weight",
                                                              std::vector<int64_t>{vocab, hidden}));
  // The embedding kernel reads f32 and bf16 tables; f16 is widened.
  weights->embed_tokens =
      loader.FromInfo(embed, embed.dtype == DType::kF16 ? DType::kF32 : embed.dtype);
  if (config.tie_word_embeddings) {
    weights->lm_head = weights->embed_tokens.dtype == matmul_dtype
                           ? weights->embed_tokens
                           : loader.FromInfo(embed, matmul_dtype);
  } else {
    ASSIGN_OR_RETURN(weights->lm_head,
                     loader.Load("lm_head.weight", {vocab, hidden}, matmul_dtype));
  }
  ASSIGN_OR_RETURN(weights->final_norm, loader.Load("model.norm.weight", {hidden}, DType::kF32));

  weights->layers.reserve(config.num_layers);
  for (int layer_idx = 0; layer_idx < config.num_layers; ++layer_idx) {
    ASSIGN_OR_RETURN(LayerWeights layer, LoadLayer(loader, config, layer_idx, matmul_dtype));
    weights->layers.push_back(std::move(layer));
  }
  return weights;
}

}  // namespace baton::runtime
