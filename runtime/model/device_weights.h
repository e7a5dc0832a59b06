// Weights on a device whose memory is not the host's (a GPU, or the cuda-emulated device): each
// present weight of a rank's LlamaWeights is copied once into device memory at load, and its
// Weight::data then points at the copy, so the forward pass hands the ops device pointers only.
// The host storage (the checkpoint's maps, the converted copies) is released after the upload:
// the rank then holds its weights on the device alone.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "runtime/backend/device_backend.h"
#include "runtime/backend/device_buffer.h"
#include "runtime/model/llama_weights.h"

namespace baton::runtime {

// Uploads `weights` to `backend` (no-op when backend.IsHostMemory()); the device copies are
// appended to `storage`, which must outlive every use of the weights. Weights that alias (a tied
// lm_head reading the first rows of the embedding table) keep aliasing on the device: one copy.
// ResourceExhausted when the device has no room (nothing of the weights is changed then).
absl::Status UploadWeights(LlamaWeights& weights, DeviceBackend& backend,
                           std::vector<DeviceBuffer>* storage);

}  // namespace baton::runtime
