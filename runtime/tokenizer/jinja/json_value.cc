#include "runtime/tokenizer/jinja/json_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime::jinja {
namespace {

template <typename Json>
absl::StatusOr<Value> Convert(const Json& json, int depth) {
  if (depth > kMaxValueDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON nested deeper than ", kMaxValueDepth, " levels"));
  }
  switch (json.type()) {
    case nlohmann::json::value_t::null:
      return Value::None();
    case nlohmann::json::value_t::boolean:
      return Value::Bool(json.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::Int(json.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = json.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::Float(static_cast<double>(u));
      return Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::Float(json.template get<double>());
    case nlohmann::json::value_t::string:
      return Value::String(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      items.reserve(json.size());
      for (const auto& item : json) {
        ASSIGN_OR_RETURN(Value v, Convert(item, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      ValueDict items;
      items.reserve(json.size());
      for (auto it = json.begin(); it != json.end(); ++it) {
        ASSIGN_OR_RETURN(Value v, Convert(it.value(), depth + 1));
        items.emplace_back(Value::String(it.key()), std::move(v));
      }
      return Value::Dict(std::move(items));
    }
    default:
      return absl::InvalidArgumentError("unsupported JSON value (binary or discarded)");
  }
}

void AppendEscaped(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  auto hex4 = [out](uint32_t code) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(code & 0xFFFF));
    out->append(buf);
  };
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    switch (c) {
      case '"': out->append("\\\""); ++i; continue;
      case '\\': out->append("\\\\"); ++i; continue;
      case '\n': out->append("\\n"); ++i; continue;
      case '\r': out->append("\\r"); ++i; continue;
      case '\t': out->append("\\t"); ++i; continue;
      case '\b': out->append("\\b"); ++i; continue;
      case '\f': out->append("\\f"); ++i; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      hex4(c);
      ++i;
      continue;
    }
    if (c < 0x80 || !ensure_ascii) {
      out->push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    utf8::Sequence seq = utf8::ScanSequence(s, i);
    char32_t code = 0xFFFD;
    if (seq.kind == utf8::SequenceKind::kValid) {
      size_t p = i;
      code = utf8::DecodeAt(s, &p);
    }
    i += seq.num_bytes;
    if (code >= 0x10000) {
      code -= 0x10000;
      hex4(0xD800 + (code >> 10));
      hex4(0xDC00 + (code & 0x3FF));
    } else {
      hex4(code);
    }
  }
  out->push_back('"');
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& options) : options_(options) {}

  absl::Status Dump(const Value& v, int level, std::string* out) {
    switch (v.kind()) {
      case Value::Kind::kNone: out->append("null"); return absl::OkStatus();
      case Value::Kind::kBool: out->append(v.as_bool() ? "true" : "false"); return absl::OkStatus();
      case Value::Kind::kInt: out->append(std::to_string(v.as_int())); return absl::OkStatus();
      case Value::Kind::kFloat: {
        double f = v.as_float();
        if (std::isnan(f)) {
          out->append("NaN");
        } else if (std::isinf(f)) {
          out->append(f > 0 ? "Infinity" : "-Infinity");
        } else {
          out->append(FormatPythonFloat(f));
        }
        return absl::OkStatus();
      }
      case Value::Kind::kString:
        AppendEscaped(v.as_string(), options_.ensure_ascii, out);
        return absl::OkStatus();
      case Value::Kind::kList:
        if (!v.is_generator()) return DumpList(v.as_list(), level, out);
        break;
      case Value::Kind::kDict:
        if (!v.is_namespace()) return DumpDict(v.as_dict(), level, out);
        break;
      default:
        break;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("Object of type ", v.TypeName(), " is not JSON serializable"));
  }

 private:
  void NewLine(int level, std::string* out) {
    out->push_back('\n');
    for (int i = 0; i < level; ++i) out->append(*options_.indent);
  }

  absl::Status DumpList(const ValueList& items, int level, std::string* out) {
    if (items.empty()) {
      out->append("[]");
      return absl::OkStatus();
    }
    out->push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out->append(options_.item_separator);
      if (options_.indent) NewLine(level + 1, out);
      RETURN_IF_ERROR(Dump(items[i], level + 1, out));
    }
    if (options_.indent) NewLine(level, out);
    out->push_back(']');
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> KeyString(const Value& key) {
    switch (key.kind()) {
      case Value::Kind::kString: return key.as_string();
      case Value::Kind::kNone: return std::string("null");
      case Value::Kind::kBool: return std::string(key.as_bool() ? "true" : "false");
      case Value::Kind::kInt: return std::to_string(key.as_int());
      case Value::Kind::kFloat: return FormatPythonFloat(key.as_float());
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("keys must be str, int, float, bool or None, not ", key.TypeName()));
    }
  }

  absl::Status DumpDict(const ValueDict& items, int level, std::string* out) {
    if (items.empty()) {
      out->append("{}");
      return absl::OkStatus();
    }
    std::vector<const std::pair<Value, Value>*> order;
    for (const auto& item : items) order.push_back(&item);
    if (options_.sort_keys) {
      for (const auto* item : order) {
        if (!item->first.is_string()) {
          return absl::InvalidArgumentError("sort_keys needs string keys");
        }
      }
      std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
        return a->first.as_string() < b->first.as_string();
      });
    }
    out->push_back('{');
    bool first = true;
    for (const auto* item : order) {
      if (!first) out->append(options_.item_separator);
      first = false;
      if (options_.indent) NewLine(level + 1, out);
      ASSIGN_OR_RETURN(std::string key, KeyString(item->first));
      AppendEscaped(key, options_.ensure_ascii, out);
      out->append(options_.key_separator);
      RETURN_IF_ERROR(Dump(item->second, level + 1, out));
    }
    if (options_.indent) NewLine(level, out);
    out->push_back('}');
    return absl::OkStatus();
  }

  const JsonDumpOptions& options_;
};

}  // namespace

absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json) { return Convert(json, 0); }
absl::StatusOr<Value> FromJson(const nlohmann::json& json) { return Convert(json, 0); }

absl::StatusOr<std::string> DumpJson(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  RETURN_IF_ERROR(Dumper(options).Dump(value, 0, &out));
  return out;
}

}  // namespace baton::runtime::jinja
