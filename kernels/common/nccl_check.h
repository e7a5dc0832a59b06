// Turns NCCL errors into absl::Status, as cuda_check.h does for the CUDA runtime. Include only from
// targets built with NCCL (it includes <nccl.h>).
//
//   BATON_NCCL_CALL(ncclAllReduce(...));   // returns absl::InternalError from the enclosing
//                                          // function on failure, naming the statement, the NCCL
//                                          // error, NCCL's last error message and file:line
#pragma once

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace baton {

// OK for ncclSuccess; otherwise InternalError "<statement>: <error>: <last error> at file:line".
// (A non-blocking communicator's ncclInProgress is not an error: map it to ncclSuccess before.)
inline absl::Status NcclResultToStatus(ncclResult_t result, const char* statement, const char* file,
                                       int line) {
  if (result == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(statement, ": ", ncclGetErrorString(result), ": ",
                                          ncclGetLastError(nullptr), " at ", file, ":", line));
}

}  // namespace baton

#define BATON_NCCL_CALL(statement)                                                      \
  do {                                                                                  \
    if (absl::Status _baton_nccl_status =                                               \
            ::baton::NcclResultToStatus((statement), #statement, __FILE__, __LINE__);   \
        !_baton_nccl_status.ok()) {                                                     \
      return _baton_nccl_status;                                                        \
    }                                                                                   \
  } while (false)
