// <immintrin.h> for the CPU kernels. GCC 12's AVX-512 headers build some intrinsics on
// _mm512_undefined_ps(), which trips -Wuninitialized once inlined (GCC bug 105593, fixed in 12.3);
// the warnings point into the header, so silencing them around the include silences only those.
#pragma once

#if defined(__AVX512F__) || defined(__AVX2__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
