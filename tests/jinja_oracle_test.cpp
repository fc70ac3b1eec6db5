// The chat-template engine against @huggingface/jinja, run by node.
//
// Templates written in the style of real model templates (NemotronH, Qwen3,
// Qwen3.5, Llama 3, Mistral, plus one of edge cases; tests/data/
// chat_templates) are rendered over several conversations (system prompt,
// multi-turn, tool calls and responses, reasoning history, empty and
// non-ASCII content, structured content), with and without the generation
// prompt, and must come out byte-identical from both engines. All cases go
// to one node process (tests/node/render.mjs), so the test stays fast.
//
// Where Python's jinja2 (what transformers runs) and @huggingface/jinja
// disagree, jinja2 is the reference: those cases are listed below with the
// reason, checked against jinja2's result instead, and their node output
// is only required to differ from it (so a newer package that agrees shows
// up here). node and the package are set up by scripts/setup_test_tools.sh;
// without them this test fails rather than skips.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "chat/template.h"
#include "test_util.h"

namespace replayssm::chat {
namespace {

using ordered_json = nlohmann::ordered_json;
namespace fs = std::filesystem;

const char* const kSetupHint = "run scripts/setup_test_tools.sh to install node and @huggingface/jinja";

struct OracleCase {
  std::string label;
  std::string source;
  ordered_json context;
};

// What jinja2 does where @huggingface/jinja does something else: the C++
// output must contain `python_has` (or, with `python_fails`, the render
// must fail with it in the message).
struct Difference {
  std::string label;  // a case label of the sweep, or a template of its own
  std::string source;
  ordered_json context;
  std::string python_has;
  bool python_fails = false;
  const char* reason;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string templates_dir() { return test::data_dir("chat_templates"); }

// The sweep: every template over every conversation, with and without the
// generation prompt, plus each template with tools and thinking turned off.
std::vector<OracleCase> sweep_cases() {
  std::vector<OracleCase> cases;
  const ordered_json conversations = ordered_json::parse(slurp(templates_dir() + "/conversations.json"));
  const ordered_json tools = ordered_json::parse(slurp(templates_dir() + "/tools.json"));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(templates_dir()))
    if (e.path().extension() == ".jinja") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    const std::string source = slurp(file.string());
    const std::string name = file.filename().string();
    for (const auto& [conversation, messages] : conversations.items()) {
      for (bool generation_prompt : {false, true}) {
        ordered_json ctx = {{"messages", messages},
                            {"add_generation_prompt", generation_prompt},
                            {"bos_token", "<s>"},
                            {"eos_token", "</s>"}};
        if (conversation == "tool_flow") ctx["tools"] = tools;
        cases.push_back({name + "/" + conversation + (generation_prompt ? "/generation_prompt" : ""), source, ctx});
      }
    }
    ordered_json ctx = {{"messages", conversations["simple"]}, {"add_generation_prompt", true},
                        {"bos_token", "<s>"},                  {"eos_token", "</s>"},
                        {"tools", tools},                      {"enable_thinking", false}};
    cases.push_back({name + "/simple/tools/no_thinking", source, ctx});
  }
  return cases;
}

// Sweep cases where the two engines disagree, and small templates that pin
// down each disagreement.
std::vector<Difference> differences() {
  const ordered_json none = ordered_json::object();
  std::vector<Difference> d;
  const char* repr_reason =
      "a list printed by {{ }} is Python's repr in jinja2 ([{'type': ...}]) and JSON-like in "
      "@huggingface/jinja ([{\"type\": ...}])";
  for (const char* t : {"llama3_style.jinja", "nemotron_h_style.jinja"}) {
    for (const char* suffix : {"", "/generation_prompt"}) {
      d.push_back({std::string(t) + "/structured_content" + suffix, "", none,
                   "[{'type': 'text', 'text': 'Describe'}, {'type': 'text', 'text': 'this picture.'}]", false,
                   repr_reason});
    }
  }
  for (const char* suffix : {"", "/generation_prompt"}) {
    d.push_back({std::string("mistral_style.jinja/structured_content") + suffix, "", none,
                 "unsupported operand type(s) for +: 'str' and 'list'", true,
                 "str + list is a TypeError in Python; @huggingface/jinja concatenates"});
    d.push_back({std::string("edge_cases.jinja/empty_and_unicode") + suffix, "", none, "len=54 words=11", false,
                 "|length counts code points in Python and UTF-16 units in JavaScript (the emoji is 2)"});
  }
  auto small = [&](const char* source, const char* context, const char* python_has, bool fails, const char* why) {
    d.push_back({std::string("small: ") + source, source, *context ? ordered_json::parse(context) : none, python_has,
                 fails, why});
  };
  small("{{ true }}|{{ none }}|{{ false }}", "", "True|None|False",
        false, "jinja2 prints str(): True, None, False; @huggingface/jinja prints true, '', false");
  small("{{ x }}|{{ y | tojson }}|{{ y }}", R"({"x": 2.0, "y": {"a": 1.0}})", "2.0|{\"a\": 1.0}|{'a': 1.0}", false,
        "a JSON 2.0 stays a float in Python (printed 2.0); JavaScript numbers have no such distinction (2)");
  small("{{ [1, 'a', none] }}|{{ {'k': (1, 2)} }}", "", "[1, 'a', None]|{'k': (1, 2)}", false,
        "containers print as Python's repr; @huggingface/jinja prints JSON and refuses tuples");
  small("{{ foo.bar }}", "", "'foo' is undefined", true,
        "an attribute of an undefined variable is an UndefinedError in jinja2, '' in @huggingface/jinja");
  small("{{ 'a\\d' }}", "", "a\\d", false,
        "an unknown escape keeps its backslash in Python; @huggingface/jinja rejects it");
  small("{{ '\xF0\x9F\x98\x80x' | length }}|{{ '\xF0\x9F\x98\x80x'[1] }}", "", "2|x", false,
        "strings index by code point in Python, by UTF-16 unit in JavaScript");
  small("{{ 'ab' * 2 }}|{{ '%s-%d' | format('a', 1) }}", "", "abab|a-1", false,
        "str * int and the |format filter are missing from @huggingface/jinja");
  small("{% set ns = namespace(a=1) %}{{ ns }}", "", "<Namespace {'a': 1}>", false,
        "a namespace prints as its Python repr");
  small("{% if false %}{{ x | no_such_filter }}{% endif %}ok", "", "no filter named 'no_such_filter'", true,
        "jinja2 checks filter names when compiling; @huggingface/jinja only when the filter runs");
  return d;
}

// The exit status of a shell command (-1 if it did not exit).
int run_command(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Renders every case with @huggingface/jinja in one node process: per case
// {"output": ...} or {"error": ...}. `error` explains a failure to run.
std::vector<ordered_json> render_with_node(const std::vector<OracleCase>& cases, std::string* error) {
  const std::string node_dir = REPLAYSSM_NODE_DIR;
  if (run_command("node --version >/dev/null 2>&1") != 0) {
    *error = "node is not installed: " + std::string(kSetupHint);
    return {};
  }
  if (!fs::exists(node_dir + "/node_modules/@huggingface/jinja/package.json")) {
    *error = "@huggingface/jinja is not installed under " + node_dir + ": " + kSetupHint;
    return {};
  }
  test::TempDir tmp;
  ordered_json batch = ordered_json::array();
  for (const OracleCase& c : cases) batch.push_back({{"template", c.source}, {"context", c.context}});
  std::ofstream(tmp.file("in.json"), std::ios::binary) << batch.dump();
  const int rc = run_command("node '" + node_dir + "/render.mjs' <'" + tmp.file("in.json") + "' >'" +
                             tmp.file("out.json") + "' 2>'" + tmp.file("err.txt") + "'");
  if (rc != 0) {
    *error = "node tests/node/render.mjs failed (" + slurp(tmp.file("err.txt")) + "): " + kSetupHint;
    return {};
  }
  const ordered_json results = ordered_json::parse(slurp(tmp.file("out.json")), nullptr, false);
  if (!results.is_array() || results.size() != cases.size()) {
    *error = "node tests/node/render.mjs printed no result list";
    return {};
  }
  return std::vector<ordered_json>(results.begin(), results.end());
}

Result<std::string> render_cpp(const OracleCase& c) {
  auto t = Template::parse(c.source, c.label);
  if (!t.ok()) return t.status();
  return t->render(c.context);
}

// Everything rendered once, for both tests.
struct Oracle {
  std::vector<OracleCase> sweep;
  std::vector<Difference> diffs;
  std::vector<OracleCase> small;  // the differences with a template of their own
  std::map<std::string, ordered_json> node;  // by label
  std::string error;
};

const Oracle& oracle() {
  static const Oracle o = [] {
    Oracle o;
    o.sweep = sweep_cases();
    o.diffs = differences();
    for (const Difference& d : o.diffs)
      if (!d.source.empty()) o.small.push_back({d.label, d.source, d.context});
    std::vector<OracleCase> all = o.sweep;
    all.insert(all.end(), o.small.begin(), o.small.end());
    const std::vector<ordered_json> results = render_with_node(all, &o.error);
    for (size_t k = 0; k < results.size(); ++k) o.node[all[k].label] = results[k];
    return o;
  }();
  return o;
}

TEST(JinjaOracle, ChatTemplatesMatchHuggingFaceJinja) {
  const Oracle& o = oracle();
  ASSERT_TRUE(o.error.empty()) << o.error;
  ASSERT_GE(o.sweep.size(), 70u);
  size_t compared = 0;
  for (const OracleCase& c : o.sweep) {
    SCOPED_TRACE(c.label);
    const bool differs = std::any_of(o.diffs.begin(), o.diffs.end(), [&](const Difference& d) { return d.label == c.label; });
    if (differs) continue;  // checked against jinja2 in WherePythonAndHuggingFaceDiffer
    const ordered_json& node = o.node.at(c.label);
    const auto cpp = render_cpp(c);
    if (node.contains("error")) {
      // Both must refuse (raise_exception in the template, say).
      EXPECT_FALSE(cpp.ok()) << "node failed with: " << node["error"].get<std::string>();
    } else {
      ASSERT_TRUE(cpp.ok()) << cpp.status().message();
      EXPECT_EQ(*cpp, node["output"].get<std::string>());
    }
    ++compared;
  }
  EXPECT_GE(compared, 60u);
}

TEST(JinjaOracle, WherePythonAndHuggingFaceDiffer) {
  const Oracle& o = oracle();
  ASSERT_TRUE(o.error.empty()) << o.error;
  for (const Difference& d : o.diffs) {
    SCOPED_TRACE(d.label + " -- " + d.reason);
    const OracleCase* c = nullptr;
    for (const OracleCase& s : o.sweep)
      if (s.label == d.label) c = &s;
    for (const OracleCase& s : o.small)
      if (s.label == d.label) c = &s;
    ASSERT_NE(c, nullptr) << "no such case";
    const auto cpp = render_cpp(*c);
    std::string python_side;
    if (d.python_fails) {
      ASSERT_FALSE(cpp.ok()) << "rendered: " << *cpp;
      python_side = cpp.status().message();
    } else {
      ASSERT_TRUE(cpp.ok()) << cpp.status().message();
      python_side = *cpp;
    }
    EXPECT_NE(python_side.find(d.python_has), std::string::npos) << python_side;
    // The reason still holds for the pinned package.
    const ordered_json& node = o.node.at(d.label);
    if (!d.python_fails) {
      EXPECT_TRUE(node.contains("error") || node["output"].get<std::string>() != python_side)
          << "@huggingface/jinja now agrees with jinja2: compare this case with it again";
    } else {
      EXPECT_FALSE(node.contains("error") && node["error"].get<std::string>().find(d.python_has) != std::string::npos)
          << "@huggingface/jinja now agrees with jinja2: compare this case with it again";
    }
  }
}

}  // namespace
}  // namespace replayssm::chat
