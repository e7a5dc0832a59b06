// The "post_processor" of tokenizer.json, reduced to what it does to one sequence's ids when
// add_special_tokens is set: ids to put before and after it. Supported: TemplateProcessing (its
// "single" template: special tokens around one $A), ByteLevel (offsets only: no ids), Sequence,
// RobertaProcessing and BertProcessing (cls $A sep). Others are Unimplemented.
// Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "runtime/tokenizer/json_fields.h"

namespace baton::runtime {

class PostProcessor {
 public:
  PostProcessor() = default;
  PostProcessor(std::vector<int32_t> prefix_ids, std::vector<int32_t> suffix_ids)
      : prefix_ids_(std::move(prefix_ids)), suffix_ids_(std::move(suffix_ids)) {}

  // A null `json` adds nothing.
  static absl::StatusOr<PostProcessor> FromJson(const nlohmann::json& json, const JsonPath& at);

  const std::vector<int32_t>& prefix_ids() const { return prefix_ids_; }
  const std::vector<int32_t>& suffix_ids() const { return suffix_ids_; }

 private:
  // Wraps the current template in `json`'s own prefix and suffix.
  absl::Status Wrap(const nlohmann::json& json, const JsonPath& at);

  std::vector<int32_t> prefix_ids_;
  std::vector<int32_t> suffix_ids_;
};

}  // namespace baton::runtime
