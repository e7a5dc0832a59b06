// MeasureCudaRoofline in a build without CUDA (CMake picks this file or roofline_cuda.cc, so no
// source needs `#if BATON_HAS_CUDA`).
#include "benchmarks/gpu/roofline.h"

namespace baton::bench {

absl::StatusOr<Roofline> MeasureCudaRoofline(int, const RooflineOptions&) {
  return absl::UnimplementedError("cuda: this build has no CUDA (configure with -DBATON_CUDA=ON)");
}

absl::StatusOr<std::string> DescribeCudaDevice(int) {
  return absl::UnimplementedError("cuda: this build has no CUDA (configure with -DBATON_CUDA=ON)");
}

}  // namespace baton::bench
