// The grid and block shape of a kernel launch, computed by the same inline function for the real
// launch (converted to dim3) and for the SIMT emulation. Plain C++, valid under nvcc and g++.
#pragma once

#include <cstddef>

namespace baton::simt {

inline constexpr int kWarpSize = 32;

struct LaunchShape {
  unsigned grid_x = 1;
  unsigned grid_y = 1;
  unsigned grid_z = 1;
  unsigned block_x = 1;
  unsigned block_y = 1;
  unsigned block_z = 1;
  size_t dynamic_shared_bytes = 0;
};

}  // namespace baton::simt
