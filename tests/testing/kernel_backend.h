// The backend parameter of layer (b) of the kernel tests: a way to run a CUDA kernel on host
// buffers. "emulated" runs the kernel body through the SIMT emulation (always available); "cuda"
// (instantiated only when BATON_HAS_CUDA) copies the buffers to a GPU, launches the real kernel and
// copies the outputs back, and is unavailable (the test skips) when no device is visible.
#pragma once

#include <ostream>

#include "absl/status/status.h"

namespace baton::testing {

template <typename Params>
struct KernelBackend {
  const char* name;
  absl::Status (*run)(const Params& host_params);
  bool (*available)();
};

inline bool AlwaysAvailable() { return true; }

template <typename Params>
void PrintTo(const KernelBackend<Params>& backend, std::ostream* os) {
  *os << backend.name;
}

}  // namespace baton::testing
