// Test tool for the parity tests (tests/python/test_chat_template_parity.py): renders a template
// file over a JSON context file and prints the result to stdout, byte for byte. An error goes to
// stderr as "<StatusCode>: <message>" with exit status 2; bad usage exits 1.
//
//   render_chat_template TEMPLATE CONTEXT.json
//     CONTEXT = {"messages": [...], "tools": [...]?, "documents": [...]?,
//                "add_generation_prompt": bool?, "bos_token": str?, "eos_token": str?,
//                "template_kwargs": {...}?, "now": unix_seconds?}   (ChatTemplate::Render)
//   render_chat_template --vars TEMPLATE CONTEXT.json
//     every member of CONTEXT becomes a template variable (jinja::Template::Render)
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/jinja/json_value.h"

namespace {

using baton::runtime::ChatRenderOptions;
using baton::runtime::ChatTemplate;
namespace jinja = baton::runtime::jinja;

bool ReadFile(const char* path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

absl::StatusOr<std::string> RenderChat(const std::string& source, const nlohmann::ordered_json& ctx) {
  auto token = [&](const char* key) -> std::optional<std::string> {
    if (!ctx.contains(key) || !ctx[key].is_string()) return std::nullopt;
    return ctx[key].get<std::string>();
  };
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(source, token("bos_token"),
                                                            token("eos_token"));
  if (!t.ok()) return t.status();
  ChatRenderOptions options;
  options.add_generation_prompt = ctx.value("add_generation_prompt", false);
  if (ctx.contains("tools") && !ctx["tools"].is_null()) options.tools = ctx["tools"];
  if (ctx.contains("documents") && !ctx["documents"].is_null()) options.documents = ctx["documents"];
  if (ctx.contains("template_kwargs")) options.template_kwargs = ctx["template_kwargs"];
  if (ctx.contains("now")) options.render.now = ctx["now"].get<std::time_t>();
  return t->Render(ctx.value("messages", nlohmann::ordered_json::array()), options);
}

absl::StatusOr<std::string> RenderVars(const std::string& source, const nlohmann::ordered_json& ctx) {
  absl::StatusOr<jinja::Template> t = jinja::Template::Parse(source);
  if (!t.ok()) return t.status();
  std::vector<std::pair<std::string, jinja::Value>> vars;
  for (auto it = ctx.begin(); it != ctx.end(); ++it) {
    absl::StatusOr<jinja::Value> v = jinja::FromJson(it.value());
    if (!v.ok()) return v.status();
    vars.emplace_back(it.key(), *v);
  }
  return t->Render(vars);
}

}  // namespace

int main(int argc, char** argv) {
  bool vars_mode = argc == 4 && std::string(argv[1]) == "--vars";
  if (argc != 3 && !vars_mode) {
    std::cerr << "usage: render_chat_template [--vars] TEMPLATE CONTEXT.json\n";
    return 1;
  }
  std::string source, context_text;
  if (!ReadFile(argv[argc - 2], &source) || !ReadFile(argv[argc - 1], &context_text)) {
    std::cerr << "cannot read the template or the context file\n";
    return 1;
  }
  nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(context_text, nullptr, false);
  if (ctx.is_discarded() || !ctx.is_object()) {
    std::cerr << "the context must be a JSON object\n";
    return 1;
  }
  absl::StatusOr<std::string> out = vars_mode ? RenderVars(source, ctx) : RenderChat(source, ctx);
  if (!out.ok()) {
    std::cerr << absl::StatusCodeToString(out.status().code()) << ": " << out.status().message()
              << "\n";
    return 2;
  }
  std::fwrite(out->data(), 1, out->size(), stdout);
  return 0;
}
