// KvPullSpec <-> v1::KvSource.
#pragma once

#include "baton/v1/worker.pb.h"
#include "runtime/transfer/kv_transport.h"

namespace baton::rpc {

void ToProto(const runtime::KvPullSpec& spec, v1::KvSource* out);
runtime::KvPullSpec FromProto(const v1::KvSource& source);

}  // namespace baton::rpc
