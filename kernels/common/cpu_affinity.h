// Which CPUs this process may run on, and pinning a thread to one of them. The ranks of a CPU
// instance (runtime/engine/model_ranks.h) pin each rank's threads to cores of their own, so a rank
// keeps its caches and the ranks do not trade cores mid-step.
#pragma once

#include <vector>

namespace baton {

// The CPUs of this process's affinity mask, ascending (sched_getaffinity); empty if unknown.
std::vector<int> AllowedCpus();

// Pins the calling thread to `cpu`. False (and the thread unpinned) if the system refuses.
bool PinThisThread(int cpu);

}  // namespace baton
