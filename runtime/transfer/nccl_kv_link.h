// The KvLink of real GPUs (kv_link.h): a two-rank NCCL communicator between the prefill rank's
// device and the decode rank's. Built only with CUDA and NCCL (BATON_HAS_NCCL); no CUDA or NCCL
// type appears here. transport_factory.cc picks it for the link kind "nccl".
//
// Join: ncclCommInitRankConfig, non-blocking (config.blocking = 0), its completion polled until the
// deadline, on a stream of the link's own on `device` (cudaStreamNonBlocking, so it never waits
// for the engine's stream: the KV it reads was written by a step that has completed on the host's
// side before the prefill worker handed the request off). Send/Recv: ncclGroupStart, one
// ncclSend/ncclRecv per span (bytes, ncclUint8), ncclGroupEnd, then the stream and the
// communicator's async error polled until done or the deadline; past it, or on any error, the
// communicator is aborted (ncclCommAbort) and the link is broken. Untested here: CI has no GPU.
#pragma once

#include <memory>

#include "runtime/transfer/kv_link.h"

namespace baton::runtime {

std::unique_ptr<KvLinkFactory> MakeNcclKvLinkFactory();

}  // namespace baton::runtime
