#include "runtime/rpc/kv_handoff_conversion.h"

#include <optional>
#include <string>

#include "kernels/common/dtype.h"

namespace baton::rpc {

void ToProto(const runtime::ParallelLayout& layout, v1::ParallelLayout* out) {
  out->set_tp_size(layout.tp_size);
  out->set_pp_size(layout.pp_size);
  out->mutable_stage_num_layers()->Assign(layout.stage_num_layers.begin(),
                                          layout.stage_num_layers.end());
}

runtime::ParallelLayout FromProto(const v1::ParallelLayout& layout) {
  return runtime::ParallelLayout{
      .tp_size = layout.tp_size(),
      .pp_size = layout.pp_size(),
      .stage_num_layers = {layout.stage_num_layers().begin(), layout.stage_num_layers().end()}};
}

void ToProto(const runtime::KvHandoff& handoff, v1::KvSource* out) {
  out->set_num_layers(handoff.model_shape.num_layers);
  out->set_num_kv_heads(handoff.model_shape.num_kv_heads);
  out->set_head_dim(handoff.model_shape.head_dim);
  out->set_block_size(handoff.model_shape.block_size);
  ToProto(handoff.layout, out->mutable_layout());
  for (const runtime::KvSource& source : handoff.rank_sources) {
    v1::KvRankEndpoint* rank = out->add_ranks();
    rank->set_hostname(source.hostname);
    rank->set_boot_id(source.boot_id);
    rank->set_shm_name(source.shm_name);
    rank->set_tcp_address(source.tcp_address);
    rank->set_kv_link(source.kv_link);
  }
  out->mutable_block_ids()->Assign(handoff.blocks.begin(), handoff.blocks.end());
  out->set_num_tokens(handoff.num_tokens);
  out->set_kv_grant(handoff.kv_grant);
  out->set_kv_dtype(handoff.unknown_kv_dtype.empty()
                        ? std::string(DTypeName(handoff.model_shape.dtype))
                        : handoff.unknown_kv_dtype);
}

runtime::KvHandoff FromProto(const v1::KvSource& source) {
  // Empty: a sender from before the field, whose pools were all f32.
  const std::optional<DType> dtype =
      source.kv_dtype().empty() ? DType::kF32 : KvDTypeFromName(source.kv_dtype());
  runtime::KvHandoff handoff{
      .model_shape = runtime::KvPoolShape{.num_layers = source.num_layers(),
                                          .num_kv_heads = source.num_kv_heads(),
                                          .head_dim = source.head_dim(),
                                          .block_size = source.block_size(),
                                          .dtype = dtype.value_or(DType::kF32)},
      .layout = FromProto(source.layout()),
      .blocks = {source.block_ids().begin(), source.block_ids().end()},
      .num_tokens = source.num_tokens(),
      .kv_grant = source.kv_grant(),
      .unknown_kv_dtype = dtype.has_value() ? std::string() : source.kv_dtype()};
  for (const v1::KvRankEndpoint& rank : source.ranks()) {
    handoff.rank_sources.push_back(runtime::KvSource{.hostname = rank.hostname(),
                                                     .boot_id = rank.boot_id(),
                                                     .shm_name = rank.shm_name(),
                                                     .tcp_address = rank.tcp_address(),
                                                     .kv_link = rank.kv_link()});
  }
  return handoff;
}

}  // namespace baton::rpc
