#include "runtime/kv_cache/kv_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"

namespace baton::runtime {
namespace {

absl::Status ValidateShmName(const std::string& name) {
  if (name.size() < 2 || name.size() > NAME_MAX || name[0] != '/' ||
      name.find('/', 1) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV pool: shm name \"", name, "\" must be \"/name\" with no other '/' and at most ",
        NAME_MAX, " characters"));
  }
  return absl::OkStatus();
}

// Creates, sizes and maps a new segment holding the header page and `data_bytes`, and writes the
// header. On failure nothing is left behind.
absl::StatusOr<std::byte*> CreateSharedMapping(const std::string& name, const KvPoolShape& shape,
                                               int num_blocks, size_t data_bytes) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    const std::string what =
        absl::StrCat("KV pool: shm_open(\"", name, "\"): ", std::strerror(err));
    if (err == EEXIST) return absl::AlreadyExistsError(what);
    if (err == EINVAL || err == ENAMETOOLONG) return absl::InvalidArgumentError(what);
    return absl::ResourceExhaustedError(what);
  }
  const size_t mapping_bytes = kKvSegmentHeaderBytes + data_bytes;
  auto fail = [&](const char* step, int err) {
    close(fd);
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("KV pool: ", step, " of ", mapping_bytes, " bytes for \"", name, "\": ",
                     std::strerror(err), " (is /dev/shm big enough?)"));
  };
  if (ftruncate(fd, static_cast<off_t>(mapping_bytes)) != 0) return fail("ftruncate", errno);
  // Reserve the pages now: tmpfs would otherwise raise SIGBUS on first touch when /dev/shm is full.
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(mapping_bytes)); err != 0) {
    return fail("posix_fallocate", err);
  }
  void* mapping = mmap(nullptr, mapping_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) return fail("mmap", errno);
  close(fd);

  auto* header = static_cast<KvSegmentHeader*>(mapping);
  header->version = KvSegmentHeader::kVersion;
  header->num_layers = shape.num_layers;
  header->num_kv_heads = shape.num_kv_heads;
  header->head_dim = shape.head_dim;
  header->block_size = shape.block_size;
  header->num_blocks = num_blocks;
  header->dtype = static_cast<uint32_t>(shape.dtype);
  header->owner_pid = getpid();
  header->data_offset_bytes = kKvSegmentHeaderBytes;
  header->data_bytes = data_bytes;
  std::atomic_ref<uint64_t>(header->magic)
      .store(KvSegmentHeader::kMagic, std::memory_order_release);
  return static_cast<std::byte*>(mapping);
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvPool>> KvPool::Create(const KvPoolShape& shape, int num_blocks,
                                                       const KvPoolOptions& options) {
  if (shape.num_layers <= 0 || shape.num_kv_heads <= 0 || shape.head_dim <= 0 ||
      shape.block_size <= 0 || num_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV pool: invalid shape (layers ", shape.num_layers, ", kv heads ", shape.num_kv_heads,
        ", head_dim ", shape.head_dim, ", block_size ", shape.block_size, ", blocks ", num_blocks, ")"));
  }
  if (!IsKvDType(shape.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("KV pool: dtype ", std::string(DTypeName(shape.dtype)),
                                                   " is not supported (f32 or bf16)"));
  }
  if (options.device_storage != nullptr) {
    if (!options.shm_name.empty()) {
      return absl::InvalidArgumentError("KV pool: a pool in device storage cannot be shared memory");
    }
    auto pool = std::unique_ptr<KvPool>(new KvPool(shape, num_blocks, options.device_storage,
                                                   /*mapping_bytes=*/0, /*data_offset_bytes=*/0,
                                                   "", getpid(), /*device=*/true));
    pool->device_ordinal_ = options.device_ordinal;
    return pool;
  }
  if (!options.shm_name.empty()) {
    if (absl::Status status = ValidateShmName(options.shm_name); !status.ok()) return status;
    const size_t data_bytes = shape.BlockBytes() * num_blocks;
    absl::StatusOr<std::byte*> mapping =
        CreateSharedMapping(options.shm_name, shape, num_blocks, data_bytes);
    if (!mapping.ok()) return mapping.status();
    return std::unique_ptr<KvPool>(new KvPool(shape, num_blocks, *mapping,
                                              kKvSegmentHeaderBytes + data_bytes,
                                              kKvSegmentHeaderBytes, options.shm_name, getpid()));
  }
  const size_t num_bytes = std::max<size_t>(1, shape.BlockBytes() * num_blocks);
  void* data = mmap(nullptr, num_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV pool: cannot map ", num_bytes, " bytes: ", std::strerror(errno)));
  }
  // Decode attention streams each sequence's blocks; on huge pages (where THP is "madvise") a
  // block's rows cost no TLB miss per 4 KiB (see runtime/model/huge_page_arena.h).
  madvise(data, num_bytes, MADV_HUGEPAGE);
  return std::unique_ptr<KvPool>(new KvPool(shape, num_blocks, static_cast<std::byte*>(data),
                                            num_bytes, /*data_offset_bytes=*/0, "", getpid()));
}

int KvPool::NumBlocksForBudget(const KvPoolShape& shape, size_t budget_bytes) {
  const size_t block_bytes = shape.BlockBytes();
  return block_bytes == 0 ? 0 : static_cast<int>(budget_bytes / block_bytes);
}

KvPool::~KvPool() {
  if (!shm_name_.empty() && getpid() == owner_pid_) shm_unlink(shm_name_.c_str());
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
}

kernels::PagedKvView KvPool::LayerView(int layer_idx) const {
  BATON_DCHECK(layer_idx >= 0 && layer_idx < shape_.num_layers);
  const int64_t side_elems =
      static_cast<int64_t>(shape_.block_size) * shape_.num_kv_heads * shape_.head_dim;
  const int64_t side_bytes = side_elems * static_cast<int64_t>(DTypeBytes(shape_.dtype));
  std::byte* k = data_ + static_cast<int64_t>(layer_idx) * 2 * side_bytes;
  return kernels::PagedKvView{.k = k,
                              .v = k + side_bytes,
                              .block_stride = shape_.BlockElems(),
                              .block_size = shape_.block_size,
                              .num_kv_heads = shape_.num_kv_heads,
                              .head_dim = shape_.head_dim,
                              .dtype = shape_.dtype};
}

std::byte* KvPool::BlockData(BlockId block) const {
  BATON_DCHECK(block >= 0 && block < num_blocks_);
  return data_ + static_cast<int64_t>(block) * static_cast<int64_t>(shape_.BlockBytes());
}

}  // namespace baton::runtime
