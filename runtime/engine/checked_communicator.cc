#include "runtime/engine/checked_communicator.h"

#include "kernels/common/status_macros.h"

namespace baton::runtime {

absl::Status CheckedCommunicator::AllReduceSum(void* data, size_t count, DType dtype) {
  RETURN_IF_ERROR(backend_->CheckCollectiveBuffer("all-reduce", data, count * DTypeBytes(dtype)));
  return inner_->AllReduceSum(data, count, dtype);
}

absl::Status CheckedCommunicator::AllGather(const void* send, void* recv, size_t bytes_per_rank) {
  RETURN_IF_ERROR(backend_->CheckCollectiveBuffer("all-gather send", send, bytes_per_rank));
  RETURN_IF_ERROR(backend_->CheckCollectiveBuffer("all-gather recv", recv,
                                                  bytes_per_rank * static_cast<size_t>(size())));
  return inner_->AllGather(send, recv, bytes_per_rank);
}

absl::Status CheckedCommunicator::Broadcast(void* data, size_t bytes, int root) {
  RETURN_IF_ERROR(backend_->CheckCollectiveBuffer("broadcast", data, bytes));
  return inner_->Broadcast(data, bytes, root);
}

absl::Status CheckedCommunicator::Send(const void* data, size_t bytes, int peer) {
  RETURN_IF_ERROR(backend_->CheckCollectiveBuffer("send", data, bytes));
  return inner_->Send(data, bytes, peer);
}

absl::Status CheckedCommunicator::Recv(void* data, size_t bytes, int peer) {
  RETURN_IF_ERROR(backend_->CheckCollectiveBuffer("recv", data, bytes));
  return inner_->Recv(data, bytes, peer);
}

}  // namespace baton::runtime
