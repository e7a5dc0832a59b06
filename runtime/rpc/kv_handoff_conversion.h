// KvHandoff <-> v1::KvSource and ParallelLayout <-> v1::ParallelLayout.
//
// FromProto converts field by field and checks nothing: the scheduler carries a hand-off unchanged,
// and the decode worker checks it against its own model and layout (PlanKvPulls, kv_handoff.h), so
// a malformed one fails there with InvalidArgument, in one place. That includes a kv_dtype this
// build does not know: FromProto keeps it in KvHandoff::unknown_kv_dtype (and ToProto sends it on
// as it came), and ValidateKvHandoff, which PlanKvPulls runs first, refuses it by name.
#pragma once

#include "baton/v1/worker.pb.h"
#include "runtime/model/model_shard.h"
#include "runtime/transfer/kv_handoff.h"

namespace baton::rpc {

void ToProto(const runtime::ParallelLayout& layout, v1::ParallelLayout* out);
runtime::ParallelLayout FromProto(const v1::ParallelLayout& layout);

void ToProto(const runtime::KvHandoff& handoff, v1::KvSource* out);
runtime::KvHandoff FromProto(const v1::KvSource& source);

}  // namespace baton::rpc
