// DeviceMemoryInfo: how much of a device's memory is free, for sizing what is left to the KV cache.
#pragma once

#include <cstddef>

namespace baton::runtime {

struct DeviceMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

}  // namespace baton::runtime
