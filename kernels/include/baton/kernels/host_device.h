// BATON_HOST_DEVICE marks small inline helpers in the params headers that CUDA kernels call too.
#pragma once

#if defined(__CUDACC__)
#define BATON_HOST_DEVICE __host__ __device__
#else
#define BATON_HOST_DEVICE
#endif
