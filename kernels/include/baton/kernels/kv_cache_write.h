// KvWriteParams and KvWriteCpu live in paged_kv.h next to the view they write through; this header
// exists so that code can include the op by its name.
#pragma once

#include "baton/kernels/paged_kv.h"
