#include "runtime/tokenizer/normalizer.h"

#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime {
namespace {

// Trims White_Space characters from either end.
std::string StripWhitespace(std::string_view text, bool left, bool right) {
  size_t begin = 0;
  size_t end = text.size();
  if (left) {
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t char_begin = pos;
      if (!unicode::IsWhitespace(utf8::DecodeAt(text, &pos))) {
        begin = char_begin;
        break;
      }
      begin = pos;
    }
  }
  if (right) {
    // Walk forward remembering where the trailing whitespace run starts.
    size_t pos = begin;
    size_t run_begin = end;
    bool in_run = false;
    while (pos < end) {
      const size_t char_begin = pos;
      const bool is_space = unicode::IsWhitespace(utf8::DecodeAt(text, &pos));
      if (is_space && !in_run) run_begin = char_begin;
      in_run = is_space;
    }
    if (in_run) end = run_begin;
  }
  return std::string(text.substr(begin, end - begin));
}

}  // namespace

absl::StatusOr<Normalizer> Normalizer::FromJson(const nlohmann::json& json, const JsonPath& at) {
  Normalizer normalizer;
  if (!json.is_null()) RETURN_IF_ERROR(AppendSteps(json, at, &normalizer.steps_));
  return normalizer;
}

absl::Status Normalizer::AppendSteps(const nlohmann::json& json, const JsonPath& at,
                                     std::vector<Step>* steps) {
  ASSIGN_OR_RETURN(const std::string type, ReadString(json, "type", at));
  if (type == "Sequence") {
    const nlohmann::json* children = FindField(json, "normalizers");
    if (children == nullptr || !children->is_array()) {
      return at.Child("normalizers").Invalid("expected an array");
    }
    for (size_t i = 0; i < children->size(); ++i) {
      RETURN_IF_ERROR(AppendSteps((*children)[i], at.Child("normalizers").Index(i), steps));
    }
  } else if (type == "Prepend") {
    ASSIGN_OR_RETURN(std::string prefix, ReadString(json, "prepend", at));
    steps->push_back(Prepend{std::move(prefix)});
  } else if (type == "Replace") {
    ASSIGN_OR_RETURN(ReplaceStep replace, ParseReplaceStep(json, at));
    steps->push_back(std::move(replace));
  } else if (type == "NFC") {
    steps->push_back(UnicodeForm{unicode::NormalizationForm::kNfc});
  } else if (type == "NFD") {
    steps->push_back(UnicodeForm{unicode::NormalizationForm::kNfd});
  } else if (type == "NFKC") {
    steps->push_back(UnicodeForm{unicode::NormalizationForm::kNfkc});
  } else if (type == "NFKD") {
    steps->push_back(UnicodeForm{unicode::NormalizationForm::kNfkd});
  } else if (type == "Lowercase") {
    steps->push_back(Lowercase{});
  } else if (type == "Strip") {
    ASSIGN_OR_RETURN(const bool left, ReadBool(json, "strip_left", true, at));
    ASSIGN_OR_RETURN(const bool right, ReadBool(json, "strip_right", true, at));
    steps->push_back(Strip{left, right});
  } else {
    return at.Child("type").Unsupported("normalizer type \"" + type + "\" is not supported");
  }
  return absl::OkStatus();
}

std::string Normalizer::Apply(std::string_view text) const {
  std::string current(text);
  for (const Step& step : steps_) {
    if (const auto* prepend = std::get_if<Prepend>(&step)) {
      if (!current.empty()) current.insert(0, prepend->prefix);
    } else if (const auto* replace = std::get_if<ReplaceStep>(&step)) {
      current = replace->Apply(current);
    } else if (const auto* form = std::get_if<UnicodeForm>(&step)) {
      current = unicode::Normalize(current, form->form);
    } else if (std::holds_alternative<Lowercase>(step)) {
      current = unicode::Lowercase(current);
    } else if (const auto* strip = std::get_if<Strip>(&step)) {
      current = StripWhitespace(current, strip->left, strip->right);
    }
  }
  return current;
}

}  // namespace baton::runtime
