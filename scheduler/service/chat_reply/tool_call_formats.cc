#include "scheduler/service/chat_reply/tool_call_formats.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "runtime/tokenizer/absl_compat.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/service/chat_reply/json_scan.h"

namespace baton::scheduler {
namespace {

constexpr size_t kNpos = std::string_view::npos;
using Keys = std::vector<std::string_view>;

// `tail` as content, less what may still start `marker` while the reply goes on.
void AppendContent(std::string_view tail, std::string_view marker, bool finished, ParsedReply& out) {
  out.content += tail.substr(0, tail.size() - (finished ? 0 : HeldMarkerPrefix(tail, marker)));
}

enum class CallRead {
  kDone,      // a whole call object; *end is one past it
  kPending,   // still arriving: nothing after it can be told yet
  kNotACall,  // no name: the text is not a call
  kBroken,    // went wrong after its name: the call stands with what it had; *end is where
};

// Reads the call object at text[begin] == '{' into out.calls (once its name is known).
CallRead ReadCall(std::string_view text, size_t begin, const Keys& argument_keys, bool finished,
                  ParsedReply& out, size_t* end) {
  const CallObjectScan scan = ScanCallObject(text, begin, argument_keys);
  *end = scan.end;
  if (!scan.name) {
    return scan.state == ScanState::kIncomplete && !finished ? CallRead::kPending : CallRead::kNotACall;
  }
  std::string arguments = scan.arguments ? std::string(*scan.arguments) : "";
  // A call that names no arguments takes none.
  if (scan.state == ScanState::kComplete && !scan.arguments) arguments = "{}";
  out.calls.push_back({*scan.name, std::move(arguments)});
  switch (scan.state) {
    case ScanState::kComplete: return CallRead::kDone;
    case ScanState::kIncomplete: return CallRead::kPending;
    case ScanState::kInvalid: break;
  }
  return CallRead::kBroken;
}

// A JSON list of call objects at text[begin] == '['. Anything in it that is not a call ends the
// list and, once the reply is finished, is content.
void ReadCallList(std::string_view text, size_t begin, const Keys& argument_keys, bool finished,
                  ParsedReply& out) {
  for (size_t i = begin + 1;;) {
    i = SkipJsonSpace(text, i);
    if (i >= text.size() || text[i] == ']') return;
    if (text[i] == ',') {
      ++i;
      continue;
    }
    size_t end = i;
    const CallRead read = text[i] == '{' ? ReadCall(text, i, argument_keys, finished, out, &end)
                                         : CallRead::kNotACall;
    if (read == CallRead::kNotACall && finished) out.content += text.substr(i);
    if (read != CallRead::kDone) return;
    i = end;
  }
}

ParsedReply Hermes(std::string_view text, bool finished) {
  constexpr std::string_view kOpen = "<tool_call>";
  constexpr std::string_view kClose = "</tool_call>";
  ParsedReply out;
  for (size_t pos = 0;;) {
    const size_t open = text.find(kOpen, pos);
    if (open == kNpos) {
      AppendContent(text.substr(pos), kOpen, finished, out);
      return out;
    }
    out.content += text.substr(pos, open - pos);
    const size_t p = SkipJsonSpace(text, open + kOpen.size());
    if (p >= text.size()) {
      if (finished) out.content += text.substr(open);
      return out;
    }
    size_t end = p;
    const CallRead read =
        text[p] == '{' ? ReadCall(text, p, {"arguments", "parameters"}, finished, out, &end) : CallRead::kNotACall;
    if (read == CallRead::kPending) return out;
    const size_t close = text.find(kClose, end);
    if (read == CallRead::kNotACall) {  // literal text, up to its closing tag
      if (close == kNpos) {
        if (finished) out.content += text.substr(open);
        return out;
      }
      out.content += text.substr(open, close + kClose.size() - open);
      pos = close + kClose.size();
      continue;
    }
    if (read == CallRead::kBroken) {  // what broke is dropped, up to its closing tag
      if (close == kNpos) return out;
      pos = close + kClose.size();
      continue;
    }
    const size_t q = SkipJsonSpace(text, end);
    if (text.substr(q).starts_with(kClose)) {
      pos = q + kClose.size();
    } else if (q >= text.size() || (!finished && kClose.starts_with(text.substr(q)))) {
      return out;  // the closing tag is still to come
    } else {
      pos = q;  // no closing tag: read on
    }
  }
}

ParsedReply Llama3Json(std::string_view text, bool finished) {
  constexpr std::string_view kTag = "<|python_tag|>";
  ParsedReply out;
  size_t p = SkipJsonSpace(text, 0);
  if (p >= text.size()) {
    if (finished) out.content = text;
    return out;
  }
  const std::string_view start = text.substr(p);
  if (start.starts_with(kTag)) {
    p = SkipJsonSpace(text, p + kTag.size());
  } else if (kTag.starts_with(start) && !finished) {
    return out;
  } else if (text[p] != '{') {
    out.content = text;
    return out;
  }
  for (;;) {
    if (p >= text.size()) return out;
    size_t end = p;
    const CallRead read =
        text[p] == '{' ? ReadCall(text, p, {"parameters", "arguments"}, finished, out, &end) : CallRead::kNotACall;
    if (read == CallRead::kPending || read == CallRead::kBroken) return out;
    if (read == CallRead::kNotACall) {
      out.content += out.calls.empty() ? text : text.substr(p);  // the first: the reply was no call
      return out;
    }
    const size_t q = SkipJsonSpace(text, end);
    if (q >= text.size()) return out;
    if (text[q] != ';') {
      out.content += text.substr(q);
      return out;
    }
    p = SkipJsonSpace(text, q + 1);
  }
}

ParsedReply Mistral(std::string_view text, bool finished) {
  constexpr std::string_view kCalls = "[TOOL_CALLS]";
  constexpr std::string_view kArgs = "[ARGS]";
  ParsedReply out;
  const size_t open = text.find(kCalls);
  if (open == kNpos) {
    AppendContent(text, kCalls, finished, out);
    return out;
  }
  out.content = text.substr(0, open);
  size_t p = SkipJsonSpace(text, open + kCalls.size());
  if (p >= text.size()) return out;
  if (text[p] == '[') {
    ReadCallList(text, p, {"arguments", "parameters"}, finished, out);
    return out;
  }
  // Tokenizers v11+: name[ARGS]{...} (or name{...}), each call after a [TOOL_CALLS] of its own.
  for (;;) {
    const size_t args_tag = text.find(kArgs, p);
    const size_t brace = text.find('{', p);
    const size_t name_end = std::min(args_tag, brace);
    if (name_end == kNpos) return out;
    const std::string name(absl::StripAsciiWhitespace(runtime::ToAbsl(text.substr(p, name_end - p))));
    const size_t a = name_end == args_tag ? SkipJsonSpace(text, args_tag + kArgs.size()) : brace;
    const ValueScan value = ScanJsonValue(text, a);
    if (value.state == ScanState::kInvalid) {
      if (finished) out.content += text.substr(p);
      return out;
    }
    const size_t value_end = value.state == ScanState::kComplete ? value.end : text.size();
    out.calls.push_back({name, std::string(text.substr(a, value_end - a))});
    if (value.state != ScanState::kComplete) return out;
    const size_t q = SkipJsonSpace(text, value.end);
    if (text.substr(q).starts_with(kCalls)) {
      p = SkipJsonSpace(text, q + kCalls.size());
      continue;
    }
    if (q >= text.size() || (!finished && kCalls.starts_with(text.substr(q)))) return out;
    out.content += text.substr(q);
    return out;
  }
}

ParsedReply RequiredCalls(std::string_view text, bool finished) {
  ParsedReply out;
  const size_t p = SkipJsonSpace(text, 0);
  if (p >= text.size()) {
    if (finished) out.content = text;
    return out;
  }
  if (text[p] != '[') {
    out.content = text;
    return out;
  }
  ReadCallList(text, p, {"parameters", "arguments"}, finished, out);
  return out;
}

}  // namespace

const std::vector<std::string>& ToolCallFormatNames() {
  static const std::vector<std::string> names = {"hermes", "llama3_json", "mistral"};
  return names;
}

absl::StatusOr<ToolCallFormat> FindToolCallFormat(std::string_view name) {
  if (name == "hermes") return ToolCallFormat{.name = "hermes", .parse = Hermes};
  if (name == "llama3_json") return ToolCallFormat{.name = "llama3_json", .parse = Llama3Json};
  if (name == "mistral") return ToolCallFormat{.name = "mistral", .parse = Mistral, .call_id_length = 9};
  return absl::InvalidArgumentError(absl::StrCat("'", runtime::ToAbsl(name), "' is not a tool-call parser (expected one of ",
                                                 absl::StrJoin(ToolCallFormatNames(), ", "), ")"));
}

ToolCallFormat RequiredCallsFormat() { return {.name = "required", .parse = RequiredCalls}; }

ToolCallFormat NamedCallFormat(std::string function) {
  return {.name = "named", .parse = [function = std::move(function)](std::string_view text, bool) {
            ParsedReply out;
            out.calls.push_back({function, std::string(text.substr(SkipJsonSpace(text, 0)))});
            return out;
          }};
}

}  // namespace baton::scheduler
