#include "runtime/backend/device_buffer.h"

#include <utility>

#include "kernels/common/check.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      capacity_bytes_(std::exchange(other.capacity_bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    backend_ = std::exchange(other.backend_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    capacity_bytes_ = std::exchange(other.capacity_bytes_, 0);
  }
  return *this;
}

absl::Status DeviceBuffer::Reserve(size_t bytes) {
  if (bytes <= capacity_bytes_) return absl::OkStatus();
  BATON_CHECK(backend_ != nullptr);
  Release();
  ASSIGN_OR_RETURN(data_, backend_->Allocate(bytes));
  capacity_bytes_ = bytes;
  return absl::OkStatus();
}

void DeviceBuffer::Release() {
  if (data_ != nullptr) backend_->Free(data_);
  data_ = nullptr;
  capacity_bytes_ = 0;
}

}  // namespace baton::runtime
