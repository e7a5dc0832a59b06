#include "runtime/tokenizer/pre_tokenizer.h"

#include "kernels/common/check.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime {
namespace {

// The pattern of GPT-2's byte-level pre-tokenizer (ByteLevel with use_regex).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const Pattern& Gpt2Pattern() {
  static const Pattern* const pattern = [] {
    absl::StatusOr<Regex> regex = Regex::Compile(kGpt2Pattern);
    BATON_CHECK(regex.ok());  // a constant pattern
    return new Pattern(Pattern::FromRegex(*std::move(regex)));
  }();
  return *pattern;
}

// Splits each piece with `pattern` and `behavior`, appending the pieces to *out.
void SplitPieces(std::vector<PreTokenPiece>& pieces, const Pattern& pattern,
                 SplitBehavior behavior, bool invert, std::vector<PreTokenPiece>* out) {
  for (PreTokenPiece& piece : pieces) {
    const std::vector<Span> spans =
        SplitSegments(pattern.Find(piece.text), behavior, invert);
    if (spans.size() == 1 && spans[0].begin == 0 && spans[0].end == piece.text.size()) {
      out->push_back(std::move(piece));
      continue;
    }
    for (const Span& span : spans) {
      out->push_back({piece.text.substr(span.begin, span.end - span.begin),
                      piece.at_origin && span.begin == 0});
    }
  }
}

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizer::FromJson(const nlohmann::json& json,
                                                    const JsonPath& at) {
  PreTokenizer pre_tokenizer;
  if (!json.is_null()) RETURN_IF_ERROR(AppendSteps(json, at, &pre_tokenizer.steps_));
  return pre_tokenizer;
}

absl::Status PreTokenizer::AppendSteps(const nlohmann::json& json, const JsonPath& at,
                                       std::vector<Step>* steps) {
  ASSIGN_OR_RETURN(const std::string type, ReadString(json, "type", at));
  if (type == "Sequence") {
    const nlohmann::json* children = FindField(json, "pretokenizers");
    if (children == nullptr || !children->is_array()) {
      return at.Child("pretokenizers").Invalid("expected an array");
    }
    for (size_t i = 0; i < children->size(); ++i) {
      RETURN_IF_ERROR(AppendSteps((*children)[i], at.Child("pretokenizers").Index(i), steps));
    }
  } else if (type == "Split") {
    const nlohmann::json* pattern_json = FindField(json, "pattern");
    if (pattern_json == nullptr) return at.Child("pattern").Invalid("missing");
    ASSIGN_OR_RETURN(Pattern pattern, Pattern::FromJson(*pattern_json, at.Child("pattern")));
    const nlohmann::json* behavior_json = FindField(json, "behavior");
    if (behavior_json == nullptr) return at.Child("behavior").Invalid("missing");
    ASSIGN_OR_RETURN(const SplitBehavior behavior,
                     ParseSplitBehavior(*behavior_json, at.Child("behavior")));
    ASSIGN_OR_RETURN(const bool invert, ReadBool(json, "invert", false, at));
    steps->push_back(Split{std::move(pattern), behavior, invert});
  } else if (type == "ByteLevel") {
    ASSIGN_OR_RETURN(const bool add_prefix_space, ReadBool(json, "add_prefix_space", true, at));
    ASSIGN_OR_RETURN(const bool use_regex, ReadBool(json, "use_regex", true, at));
    steps->push_back(ByteLevel{add_prefix_space, use_regex});
  } else if (type == "Metaspace") {
    ASSIGN_OR_RETURN(std::string replacement, ReadString(json, "replacement", "\xE2\x96\x81", at));
    size_t end = 0;
    if (replacement.empty() || !utf8::IsValid(replacement) ||
        (utf8::DecodeAt(replacement, &end), end != replacement.size())) {
      return at.Child("replacement").Invalid("expected exactly one character");
    }
    PrependScheme scheme = PrependScheme::kAlways;
    if (const nlohmann::json* scheme_json = FindField(json, "prepend_scheme")) {
      const std::string name = scheme_json->is_string() ? scheme_json->get<std::string>() : "";
      if (name == "always") {
        scheme = PrependScheme::kAlways;
      } else if (name == "first") {
        scheme = PrependScheme::kFirst;
      } else if (name == "never") {
        scheme = PrependScheme::kNever;
      } else {
        return at.Child("prepend_scheme").Invalid("expected \"always\", \"first\" or \"never\"");
      }
    } else {
      ASSIGN_OR_RETURN(const bool add_prefix_space, ReadBool(json, "add_prefix_space", true, at));
      scheme = add_prefix_space ? PrependScheme::kAlways : PrependScheme::kNever;
    }
    ASSIGN_OR_RETURN(const bool split, ReadBool(json, "split", true, at));
    steps->push_back(Metaspace{std::move(replacement), scheme, split});
  } else if (type == "Digits") {
    ASSIGN_OR_RETURN(const bool individual, ReadBool(json, "individual_digits", false, at));
    steps->push_back(Split{Pattern::OfClass(Pattern::CharClass::kNumeric),
                           individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                           false});
  } else if (type == "WhitespaceSplit") {
    steps->push_back(
        Split{Pattern::OfClass(Pattern::CharClass::kWhitespace), SplitBehavior::kRemoved, false});
  } else {
    return at.Child("type").Unsupported("pre-tokenizer type \"" + type + "\" is not supported");
  }
  return absl::OkStatus();
}

void PreTokenizer::ApplyStep(const Step& step, std::vector<PreTokenPiece>& pieces,
                             std::vector<PreTokenPiece>* out) {
  if (const auto* split = std::get_if<Split>(&step)) {
    SplitPieces(pieces, split->pattern, split->behavior, split->invert, out);
  } else if (const auto* byte_level = std::get_if<ByteLevel>(&step)) {
    if (byte_level->add_prefix_space) {
      for (PreTokenPiece& piece : pieces) {
        if (piece.text.empty() || piece.text[0] != ' ') piece.text.insert(0, 1, ' ');
      }
    }
    const size_t first = out->size();
    if (byte_level->use_regex) {
      SplitPieces(pieces, Gpt2Pattern(), SplitBehavior::kIsolated, false, out);
    } else {
      for (PreTokenPiece& piece : pieces) out->push_back(std::move(piece));
    }
    for (size_t i = first; i < out->size(); ++i) {
      std::string encoded;
      byte_level::AppendEncoded((*out)[i].text, &encoded);
      (*out)[i].text = std::move(encoded);
    }
  } else if (const auto* metaspace = std::get_if<Metaspace>(&step)) {
    std::vector<PreTokenPiece> replaced;
    replaced.reserve(pieces.size());
    for (PreTokenPiece& piece : pieces) {
      std::string text = ReplaceAll(piece.text, Pattern::Literal(" "), metaspace->replacement);
      const bool prepend =
          metaspace->prepend_scheme == PrependScheme::kAlways ||
          (metaspace->prepend_scheme == PrependScheme::kFirst && piece.at_origin);
      if (prepend && !text.starts_with(metaspace->replacement)) {
        text.insert(0, metaspace->replacement);
      }
      replaced.push_back({std::move(text), piece.at_origin});
    }
    if (metaspace->split) {
      size_t pos = 0;
      const char32_t replacement_char = utf8::DecodeAt(metaspace->replacement, &pos);
      SplitPieces(replaced, Pattern::SingleChar(replacement_char), SplitBehavior::kMergedWithNext,
                  false, out);
    } else {
      for (PreTokenPiece& piece : replaced) out->push_back(std::move(piece));
    }
  }
}

void PreTokenizer::Apply(std::string_view text, bool at_origin,
                         std::vector<std::string>* words) const {
  std::vector<PreTokenPiece> pieces;
  pieces.push_back({std::string(text), at_origin});
  std::vector<PreTokenPiece> next;
  for (const Step& step : steps_) {
    next.clear();
    ApplyStep(step, pieces, &next);
    pieces.swap(next);
  }
  for (PreTokenPiece& piece : pieces) {
    if (!piece.text.empty()) words->push_back(std::move(piece.text));
  }
}

}  // namespace baton::runtime
