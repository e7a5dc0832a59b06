#include "runtime/model/device_weights.h"

#include <cstdint>
#include <map>
#include <utility>

#include "kernels/common/status_macros.h"

namespace baton::runtime {
namespace {

// Every present weight of the rank, in a fixed order.
std::vector<Weight*> PresentWeights(LlamaWeights& weights) {
  std::vector<Weight*> all = {&weights.embed_tokens, &weights.final_norm, &weights.lm_head};
  for (LayerWeights& layer : weights.layers) {
    for (Weight* w : {&layer.input_norm, &layer.q_proj, &layer.k_proj, &layer.v_proj,
                      &layer.o_proj, &layer.q_bias, &layer.k_bias, &layer.v_bias,
                      &layer.post_attention_norm, &layer.gate_proj, &layer.up_proj,
                      &layer.down_proj}) {
      all.push_back(w);
    }
  }
  std::vector<Weight*> present;
  for (Weight* w : all) {
    if (w->data != nullptr && w->numel() > 0) present.push_back(w);
  }
  return present;
}

}  // namespace

absl::Status UploadWeights(LlamaWeights& weights, DeviceBackend& backend,
                           std::vector<DeviceBuffer>* storage) {
  if (backend.IsHostMemory()) return absl::OkStatus();
  const std::vector<Weight*> present = PresentWeights(weights);
  // One device copy per host start address, as large as its largest user: a weight that starts
  // where another does (tied lm_head on the table's first rows) reads the same copy.
  std::map<const void*, size_t> bytes_at;
  for (const Weight* w : present) {
    size_t& bytes = bytes_at[w->data];
    bytes = std::max(bytes, w->num_bytes());
  }
  std::vector<DeviceBuffer> uploaded;
  std::map<const void*, const void*> device_at;
  for (const auto& [host, bytes] : bytes_at) {
    DeviceBuffer& buffer = uploaded.emplace_back(&backend);
    RETURN_IF_ERROR(buffer.Reserve(bytes));
    RETURN_IF_ERROR(backend.CopyToDevice(buffer.data<void>(), host, bytes));
    device_at[host] = buffer.data<void>();
  }
  for (Weight* w : present) w->data = device_at.at(w->data);
  // A quantized weight's scales and zero points, one copy each (no two weights share theirs).
  auto upload_floats = [&](const float*& host, int64_t count) -> absl::Status {
    if (host == nullptr) return absl::OkStatus();
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    DeviceBuffer& buffer = uploaded.emplace_back(&backend);
    RETURN_IF_ERROR(buffer.Reserve(bytes));
    RETURN_IF_ERROR(backend.CopyToDevice(buffer.data<void>(), host, bytes));
    host = buffer.data<float>();
    return absl::OkStatus();
  };
  for (Weight* w : present) {
    RETURN_IF_ERROR(upload_floats(w->scales, w->num_scales()));
    RETURN_IF_ERROR(upload_floats(w->zeros, w->num_scales()));
  }
  for (DeviceBuffer& buffer : uploaded) storage->push_back(std::move(buffer));
  // The device holds the weights now; the host copies and maps are not read again.
  weights.owned.clear();
  weights.arena.Clear();
  weights.checkpoint.reset();
  return absl::OkStatus();
}

}  // namespace baton::runtime
