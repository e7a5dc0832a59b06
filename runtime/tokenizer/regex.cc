#include "runtime/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime {
namespace {

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

// Runs one search from `start`; returns PCRE2's result code. Falls back to the interpreter when the
// JIT stack is too small for a pathological input.
int MatchFrom(const pcre2_code* code, std::string_view text, size_t start,
              pcre2_match_data* data) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, data,
                     nullptr);
  }
  return rc;
}

}  // namespace

absl::StatusOr<Regex> Regex::Compile(std::string_view pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat("regex \"", ToAbsl(pattern), "\" does not compile at offset ",
                                                   error_offset, ": ",
                                                   reinterpret_cast<const char*>(message)));
  }
  // JIT is an optimisation: if it is unavailable the interpreter runs the same pattern.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return Regex(std::string(pattern), std::shared_ptr<pcre2_code>(code, pcre2_code_free));
}

void Regex::FindAll(std::string_view text, std::vector<RegexMatch>* matches) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(
      pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  BATON_CHECK(data != nullptr);
  size_t search_from = 0;
  bool has_previous = false;
  size_t previous_end = 0;
  while (search_from <= text.size()) {
    const int rc = MatchFrom(code_.get(), text, search_from, data.get());
    if (rc == PCRE2_ERROR_NOMATCH) return;
    // Other failures (match or heap limits) end the search: the rest of the text stays unmatched.
    if (rc < 0) return;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (begin == end && has_previous && end == previous_end) {
      if (search_from >= text.size()) return;
      search_from += utf8::CharLength(static_cast<uint8_t>(text[search_from]));
      continue;
    }
    matches->push_back({begin, end});
    has_previous = true;
    previous_end = end;
    search_from = end;
  }
}

}  // namespace baton::runtime
