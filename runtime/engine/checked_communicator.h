// CheckedCommunicator: a rank's communicator that first asks the rank's backend whether each
// buffer it is handed may go to a collective (DeviceBackend::CheckCollectiveBuffer), then
// delegates. Why: the ranks of a cuda-emulated instance talk in-process, on host memory
// (instance_comms.h), where a host pointer would go through unnoticed — but NCCL on a GPU takes
// device memory only. ModelRanks wraps every cuda-emulated rank's communicators with this, so a
// forward pass that hands NCCL a host array fails in CI (Internal, naming the op and the buffer)
// instead of on the first GPU it meets. Used by the rank's thread only; Abort() from any.
#pragma once

#include "runtime/backend/device_backend.h"
#include "runtime/parallel/communicator.h"

namespace baton::runtime {

class CheckedCommunicator final : public Communicator {
 public:
  // Both must outlive this communicator.
  CheckedCommunicator(Communicator* inner, DeviceBackend* backend)
      : inner_(inner), backend_(backend) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  using Communicator::AllReduceSum;
  absl::Status AllReduceSum(void* data, size_t count, DType dtype) override;
  absl::Status AllGather(const void* send, void* recv, size_t bytes_per_rank) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Send(const void* data, size_t bytes, int peer) override;
  absl::Status Recv(void* data, size_t bytes, int peer) override;
  absl::Status Barrier() override { return inner_->Barrier(); }
  void Abort(absl::string_view reason) override { inner_->Abort(reason); }

 private:
  Communicator* const inner_;
  DeviceBackend* const backend_;
};

}  // namespace baton::runtime
