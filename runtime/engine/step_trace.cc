#include "runtime/engine/step_trace.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace baton::runtime {

absl::StatusOr<std::unique_ptr<StepTraceWriter>> StepTraceWriter::Create(
    const std::filesystem::path& path, const StepTraceHeader& header) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("step trace: cannot write ", path.string()));
  out << nlohmann::json{{"role", header.role},     {"instance", header.instance},
                        {"tp", header.tp},         {"pp", header.pp},
                        {"device", header.device}, {"pid", static_cast<int64_t>(getpid())}}
             .dump()
      << '\n';
  out.flush();
  if (!out) return absl::InvalidArgumentError(absl::StrCat("step trace: cannot write ", path.string()));
  return std::unique_ptr<StepTraceWriter>(new StepTraceWriter(std::move(out)));
}

StepTraceWriter::~StepTraceWriter() { out_.flush(); }

void StepTraceWriter::Append(const StepRecord& record) {
  out_ << nlohmann::json{{"start_us", record.start_us},
                         {"end_us", record.end_us},
                         {"prompt_tokens", record.prompt_tokens},
                         {"prompt_tokens_squared", record.prompt_tokens_squared},
                         {"decode_seqs", record.decode_seqs},
                         {"decode_context", record.decode_context},
                         {"busy_after", record.busy_after}}
              .dump()
       << '\n';
  if (++unflushed_ >= kFlushEvery) {
    out_.flush();
    unflushed_ = 0;
  }
}

}  // namespace baton::runtime
