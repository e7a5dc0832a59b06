// What a worker instance does: prefill for a hand-off, decode handed-off requests, or both phases.
#pragma once

namespace baton::runtime {

enum class WorkerRole { kPrefill, kDecode, kColocated };

const char* WorkerRoleName(WorkerRole role);

}  // namespace baton::runtime
