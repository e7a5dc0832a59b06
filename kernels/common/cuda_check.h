// Turns CUDA runtime errors into absl::Status. Include only from CUDA targets (it includes
// <cuda_runtime_api.h>).
//
//   BATON_CUDA_CALL(cudaMemcpyAsync(...));   // returns absl::InternalError from the enclosing
//                                            // function on failure, naming the statement, the
//                                            // CUDA error and file:line
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace baton {

// OK for cudaSuccess; otherwise InternalError "<statement>: <error name>: <message> at file:line".
inline absl::Status CudaErrorToStatus(cudaError_t error, const char* statement, const char* file,
                                      int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(statement, ": ", cudaGetErrorName(error), ": ",
                                          cudaGetErrorString(error), " at ", file, ":", line));
}

}  // namespace baton

#define BATON_CUDA_CALL(statement)                                                      \
  do {                                                                                  \
    if (absl::Status _baton_cuda_status =                                               \
            ::baton::CudaErrorToStatus((statement), #statement, __FILE__, __LINE__);    \
        !_baton_cuda_status.ok()) {                                                     \
      return _baton_cuda_status;                                                        \
    }                                                                                   \
  } while (false)
