#include "runtime/rpc/kv_source_conversion.h"

namespace baton::rpc {

void ToProto(const runtime::KvPullSpec& spec, v1::KvSource* out) {
  out->set_hostname(spec.source.hostname);
  out->set_boot_id(spec.source.boot_id);
  out->set_shm_name(spec.source.shm_name);
  out->set_tcp_address(spec.source.tcp_address);
  out->set_num_layers(spec.shape.num_layers);
  out->set_num_kv_heads(spec.shape.num_kv_heads);
  out->set_head_dim(spec.shape.head_dim);
  out->set_block_size(spec.shape.block_size);
  for (runtime::BlockId block : spec.src_blocks) out->add_block_ids(block);
  out->set_num_tokens(spec.num_tokens);
}

runtime::KvPullSpec FromProto(const v1::KvSource& source) {
  return runtime::KvPullSpec{
      .source = runtime::KvSource{.hostname = source.hostname(),
                                  .boot_id = source.boot_id(),
                                  .shm_name = source.shm_name(),
                                  .tcp_address = source.tcp_address()},
      .shape = runtime::KvPoolShape{.num_layers = source.num_layers(),
                                    .num_kv_heads = source.num_kv_heads(),
                                    .head_dim = source.head_dim(),
                                    .block_size = source.block_size()},
      .src_blocks = std::vector<runtime::BlockId>(source.block_ids().begin(), source.block_ids().end()),
      .num_tokens = source.num_tokens()};
}

}  // namespace baton::rpc
