// DeviceBuffer: one allocation of a DeviceBackend, freed with it (RAII, move-only). Its bytes live
// on backend->device(): host code reaches them only through the backend's copies and ops.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "runtime/backend/device_backend.h"

namespace baton::runtime {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // An empty buffer that will allocate from `backend` (which must outlive it).
  explicit DeviceBuffer(DeviceBackend* backend) : backend_(backend) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Release(); }

  // Makes room for at least `bytes`. Allocates only to grow (the old contents are dropped then), so
  // scratch reserved at every step allocates once per new maximum and is reused after that.
  // Pre-condition: constructed with a backend.
  absl::Status Reserve(size_t bytes);

  // Typed view of the device address (nullptr before the first Reserve).
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_);
  }
  size_t capacity_bytes() const { return capacity_bytes_; }
  DeviceBackend* backend() const { return backend_; }

 private:
  void Release();

  DeviceBackend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t capacity_bytes_ = 0;
};

}  // namespace baton::runtime
