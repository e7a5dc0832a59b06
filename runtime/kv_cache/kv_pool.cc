#include "runtime/kv_cache/kv_pool.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/common/check.h"

namespace baton::runtime {

absl::StatusOr<std::unique_ptr<KvPool>> KvPool::Create(const KvPoolShape& shape, int num_blocks) {
  if (shape.num_layers <= 0 || shape.num_kv_heads <= 0 || shape.head_dim <= 0 ||
      shape.block_size <= 0 || num_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV pool: invalid shape (layers ", shape.num_layers, ", kv heads ", shape.num_kv_heads,
        ", head_dim ", shape.head_dim, ", block_size ", shape.block_size, ", blocks ", num_blocks, ")"));
  }
  const size_t num_bytes = std::max<size_t>(1, shape.BlockBytes() * num_blocks);
  void* data = mmap(nullptr, num_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV pool: cannot map ", num_bytes, " bytes: ", std::strerror(errno)));
  }
  return std::unique_ptr<KvPool>(
      new KvPool(shape, num_blocks, static_cast<float*>(data), num_bytes));
}

int KvPool::NumBlocksForBudget(const KvPoolShape& shape, size_t budget_bytes) {
  const size_t block_bytes = shape.BlockBytes();
  return block_bytes == 0 ? 0 : static_cast<int>(budget_bytes / block_bytes);
}

KvPool::~KvPool() { munmap(data_, num_bytes_); }

kernels::PagedKvView KvPool::LayerView(int layer_idx) const {
  BATON_DCHECK(layer_idx >= 0 && layer_idx < shape_.num_layers);
  const int64_t side_elems =
      static_cast<int64_t>(shape_.block_size) * shape_.num_kv_heads * shape_.head_dim;
  float* k = data_ + static_cast<int64_t>(layer_idx) * 2 * side_elems;
  return kernels::PagedKvView{.k = k,
                              .v = k + side_elems,
                              .block_stride = shape_.BlockElems(),
                              .block_size = shape_.block_size,
                              .num_kv_heads = shape_.num_kv_heads,
                              .head_dim = shape_.head_dim};
}

std::byte* KvPool::BlockData(BlockId block) const {
  BATON_DCHECK(block >= 0 && block < num_blocks_);
  return reinterpret_cast<std::byte*>(data_ + static_cast<int64_t>(block) * shape_.BlockElems());
}

}  // namespace baton::runtime
