#include "runtime/transfer/kv_pool_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"
#include "runtime/transfer/kv_dtype.h"

namespace baton::runtime {
namespace {

// Opens `name` read-only and returns the fd and its stat, or the failure as a status.
absl::StatusOr<int> OpenSegment(const std::string& name, struct stat* st) {
  const int fd = shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    const std::string what = absl::StrCat("KV segment \"", name, "\": ", std::strerror(err));
    if (err == ENOENT) return absl::UnavailableError(absl::StrCat(what, " (owner gone?)"));
    if (err == EINVAL || err == ENAMETOOLONG) return absl::InvalidArgumentError(what);
    return absl::UnavailableError(what);
  }
  if (fstat(fd, st) != 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(
        absl::StrCat("KV segment \"", name, "\": fstat: ", std::strerror(err)));
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvPoolMapping>> KvPoolMapping::Open(const std::string& shm_name) {
  struct stat st {};
  absl::StatusOr<int> fd = OpenSegment(shm_name, &st);
  if (!fd.ok()) return fd.status();
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < kKvSegmentHeaderBytes) {
    close(*fd);
    return absl::UnavailableError(absl::StrCat("KV segment \"", shm_name, "\": ", size,
                                               " bytes, its owner has not initialized it yet"));
  }
  void* mapping = mmap(nullptr, size, PROT_READ, MAP_SHARED, *fd, 0);
  const int mmap_errno = errno;
  close(*fd);
  if (mapping == MAP_FAILED) {
    return absl::UnavailableError(
        absl::StrCat("KV segment \"", shm_name, "\": mmap: ", std::strerror(mmap_errno)));
  }
  std::unique_ptr<KvPoolMapping> result(new KvPoolMapping());
  result->shm_name_ = shm_name;
  result->mapping_ = static_cast<const std::byte*>(mapping);
  result->mapping_bytes_ = size;
  result->device_ = st.st_dev;
  result->inode_ = st.st_ino;

  auto* header = static_cast<KvSegmentHeader*>(mapping);
  const uint64_t magic = std::atomic_ref<uint64_t>(header->magic).load(std::memory_order_acquire);
  if (magic == 0) {
    return absl::UnavailableError(
        absl::StrCat("KV segment \"", shm_name, "\": its owner has not initialized it yet"));
  }
  if (magic != KvSegmentHeader::kMagic || header->version != KvSegmentHeader::kVersion) {
    return absl::FailedPreconditionError(absl::StrCat("KV segment \"", shm_name,
                                                      "\" is not a Baton KV pool of version ",
                                                      KvSegmentHeader::kVersion));
  }
  const std::optional<DType> dtype = KvDTypeFromCode(header->dtype);
  if (!dtype.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "KV segment \"", shm_name, "\": unknown KV element type ", header->dtype,
        " in its header (this build knows f32 and bf16)"));
  }
  result->shape_ = KvPoolShape{.num_layers = header->num_layers,
                               .num_kv_heads = header->num_kv_heads,
                               .head_dim = header->head_dim,
                               .block_size = header->block_size,
                               .dtype = *dtype};
  result->num_blocks_ = header->num_blocks;
  result->owner_pid_ = header->owner_pid;
  const uint64_t expected_data_bytes = static_cast<uint64_t>(result->shape_.BlockBytes()) *
                                       static_cast<uint64_t>(header->num_blocks);
  const KvPoolShape& shape = result->shape_;
  if (shape.num_layers <= 0 || shape.num_kv_heads <= 0 || shape.head_dim <= 0 ||
      shape.block_size <= 0 || header->num_blocks < 0 ||
      header->data_bytes != expected_data_bytes ||
      header->data_offset_bytes < sizeof(KvSegmentHeader) || header->data_offset_bytes > size ||
      header->data_bytes > size - header->data_offset_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("KV segment \"", shm_name, "\": header (", header->num_blocks, " blocks of ",
                     result->shape_.BlockBytes(), " bytes at offset ", header->data_offset_bytes,
                     ") disagrees with its size of ", size, " bytes"));
  }
  result->data_ = result->mapping_ + header->data_offset_bytes;
  return result;
}

KvPoolMapping::~KvPoolMapping() {
  if (mapping_ != nullptr) munmap(const_cast<std::byte*>(mapping_), mapping_bytes_);
}

const std::byte* KvPoolMapping::BlockData(BlockId block) const {
  BATON_DCHECK(block >= 0 && block < num_blocks_);
  return data_ + static_cast<size_t>(block) * BlockBytes();
}

absl::Status KvPoolMapping::CheckLive() const {
  struct stat st {};
  absl::StatusOr<int> fd = OpenSegment(shm_name_, &st);
  if (!fd.ok()) {
    return absl::UnavailableError(
        absl::StrCat("KV segment \"", shm_name_, "\" was removed: ", fd.status().message()));
  }
  close(*fd);
  if (st.st_dev != device_ || st.st_ino != inode_) {
    return absl::UnavailableError(
        absl::StrCat("KV segment \"", shm_name_, "\" was re-created by another owner"));
  }
  if (owner_pid_ > 0 && kill(static_cast<pid_t>(owner_pid_), 0) != 0 && errno == ESRCH) {
    return absl::UnavailableError(absl::StrCat("KV segment \"", shm_name_, "\": its owner (pid ",
                                               owner_pid_, ") has exited"));
  }
  return absl::OkStatus();
}

}  // namespace baton::runtime
