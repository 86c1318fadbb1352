// Malformed text IR: every error has the right code, starts with `<source>:<line>:<col>: `
// at the offending token, and says what is wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rlx/ir_text.h"

namespace rlx {
namespace {

// Line 1 of most cases; their bodies start on line 2.
const std::string kHead = "graph @g(%x: f32[2], %m: f32[2, 3], %i: i32[2]) {\n";
const std::string kTail = "  return %x\n}\n";

struct BadCase {
  const char* name;
  std::string text;
  ErrorCode code;
  const char* where;   // "line:col"
  const char* phrase;  // must appear in the message
};

std::vector<BadCase> bad_cases() {
  const std::string deep = "  %c = constant dense<" + std::string(100, '[') + std::string(100, ']') + "> : f32[]\n";
  return {
      {"empty input", "", ErrorCode::parse_error, "1:1", "expected 'graph' or 'primitive' but found end of input"},
      {"only a comment", "# nothing here\n", ErrorCode::parse_error, "2:1", "expected 'graph' or 'primitive'"},
      {"garbage bytes", "\x01\xfe\xff", ErrorCode::parse_error, "1:1", "unexpected character '\\x01'"},
      {"garbage inside", "graph @g() {\n  %y = relu(%x) \x7f\n", ErrorCode::parse_error, "2:17",
       "unexpected character '\\x7f'"},
      {"nul byte", std::string("graph @g() {\0}", 14), ErrorCode::parse_error, "1:13", "unexpected character '\\x00'"},
      {"wrong keyword", "func @g() {\n", ErrorCode::parse_error, "1:1", "found 'func'"},
      {"missing graph name", "graph g() {\n", ErrorCode::parse_error, "1:7", "expected a graph name"},
      {"unknown op", kHead + "  %y = frobnicate(%x)\n" + kTail, ErrorCode::parse_error, "2:8",
       "unknown op 'frobnicate'"},
      {"undefined value", kHead + "  %y = relu(%z)\n" + kTail, ErrorCode::parse_error, "2:13",
       "use of undefined value %z"},
      {"redefined input", kHead + "  %x = relu(%x)\n" + kTail, ErrorCode::parse_error, "2:3", "redefinition of %x"},
      {"redefined value", kHead + "  %y = relu(%x)\n  %y = relu(%x)\n" + kTail, ErrorCode::parse_error, "3:3",
       "redefinition of %y (first defined at 2:3)"},
      {"duplicate input", "graph @g(%x: f32[2], %x: f32[3]) {\n" + kTail, ErrorCode::parse_error, "1:22",
       "redefinition of %x"},
      {"wrong arity", kHead + "  %y = add(%x)\n" + kTail, ErrorCode::parse_error, "2:8", "add takes 2 inputs, got 1"},
      {"type mismatch", kHead + "  %y = relu(%x) : f32[3]\n" + kTail, ErrorCode::parse_error, "2:17",
       "%y is declared f32[3] but relu gives f32[2]"},
      {"bad dtype in type", "graph @g(%x: f33[2]) {\n" + kTail, ErrorCode::parse_error, "1:14",
       "unknown dtype 'f33'"},
      {"bad dtype attribute", kHead + "  %y = cast(%x) {to = f99}\n" + kTail, ErrorCode::parse_error, "2:23",
       "unknown dtype 'f99'"},
      {"string as dtype", "graph @g(%x: \"f32\"[2]) {\n" + kTail, ErrorCode::parse_error, "1:14",
       "expected a dtype"},
      {"negative dim", "graph @g(%x: f32[-1]) {\n" + kTail, ErrorCode::parse_error, "1:18", "negative dimension -1"},
      {"unterminated string", kHead + "  %w = param \"abc\n" + kTail, ErrorCode::parse_error, "2:14",
       "unterminated string"},
      {"unknown escape", kHead + "  %y = relu(%x) loc(\"a\\qb\")\n" + kTail, ErrorCode::parse_error, "2:23",
       "unknown escape '\\q'"},
      {"missing open brace", "graph @g(%x: f32[2])\n" + kTail, ErrorCode::parse_error, "2:3",
       "expected '{' to open the graph body but found 'return'"},
      {"missing close brace", kHead + "  return %x\n", ErrorCode::parse_error, "3:1",
       "expected '}' after the return but found end of input"},
      {"missing return", kHead + "  %y = relu(%x)\n}\n", ErrorCode::parse_error, "3:1", "missing 'return'"},
      {"unclosed operands", kHead + "  %y = add(%x, %x\n" + kTail, ErrorCode::parse_error, "3:3",
       "expected ',' or ')' after an operand but found 'return'"},
      {"trailing text", kHead + kTail + "}\n", ErrorCode::parse_error, "4:1", "after the end of the graph"},
      {"bad number", kHead + "  %c = constant dense<1.2.3> : f32[]\n" + kTail, ErrorCode::parse_error, "2:23",
       "bad number '1.2.3'"},
      {"number glued to letters", kHead + "  %y = softmax(%x) {axis = 12abc}\n" + kTail, ErrorCode::parse_error,
       "2:28", "bad number '12abc'"},
      {"integer overflow", kHead + "  %y = softmax(%x) {axis = 99999999999999999999}\n" + kTail,
       ErrorCode::parse_error, "2:28", "out of range for i64"},
      {"lone percent", kHead + "  % = relu(%x)\n" + kTail, ErrorCode::parse_error, "2:3",
       "expected a name after '%'"},
      {"lone minus", kHead + "  %y = relu(%x) - \n" + kTail, ErrorCode::parse_error, "2:17",
       "unexpected character '-'"},
      {"deep nesting", kHead + deep + kTail, ErrorCode::parse_error, "2:87", "nest deeper than 64"},
      {"unknown attribute", kHead + "  %y = relu(%x) {alpha = 1.0}\n" + kTail, ErrorCode::parse_error, "2:18",
       "relu has no attribute 'alpha'"},
      {"wrong attribute kind", kHead + "  %y = gelu(%x) {approximate = 1}\n" + kTail, ErrorCode::parse_error,
       "2:32", "attribute 'approximate' of gelu must be string, got int"},
      {"float list for ints", kHead + "  %y = reduce_sum(%m) {axes = [1.0]}\n" + kTail, ErrorCode::parse_error,
       "2:31", "attribute 'axes' of reduce_sum must be ints, got floats"},
      {"nested attribute list", kHead + "  %y = reduce_sum(%m) {axes = [[1]]}\n" + kTail, ErrorCode::parse_error,
       "2:32", "attribute lists cannot nest"},
      {"duplicate attribute", kHead + "  %y = softmax(%x) {axis = 0, axis = 0}\n" + kTail, ErrorCode::parse_error,
       "2:31", "attribute 'axis' is given twice"},
      {"missing required attribute", kHead + "  %y = concat(%x)\n" + kTail, ErrorCode::parse_error, "2:8",
       "concat needs attribute 'axis'"},
      {"too many names", kHead + "  %a, %b = relu(%x)\n" + kTail, ErrorCode::parse_error, "2:3",
       "relu gives 1 value(s) but 2 name(s) are bound"},
      {"too few names", kHead + "  %a = split(%m) {axis = 1, sizes = [1, 2]}\n" + kTail, ErrorCode::parse_error,
       "2:3", "split gives 2 value(s) but 1 name(s) are bound"},
      {"shape inference fails", kHead + "  %y = matmul(%m, %m)\n" + kTail, ErrorCode::shape_error, "2:8",
       "cannot infer the type of %y (matmul): inner dimensions differ"},
      {"dtype inference fails", kHead + "  %y = add(%x, %i)\n" + kTail, ErrorCode::dtype_error, "2:8",
       "must have the same dtype"},
      {"return type vs signature", "graph @g(%x: f32[2]) -> (f32[3]) {\n" + kTail, ErrorCode::parse_error, "2:10",
       "returned value %x has type f32[2] but the signature declares f32[3]"},
      {"return count vs signature", "graph @g(%x: f32[2]) -> () {\n" + kTail, ErrorCode::parse_error, "2:3",
       "returns 1 values but its signature declares 0"},
      {"param without type", kHead + "  %w = param \"w\"\n" + kTail, ErrorCode::parse_error, "2:8",
       "needs its type"},
      {"constant without type", kHead + "  %c = constant dense<1.0>\n" + kTail, ErrorCode::parse_error, "2:8",
       "constant needs a type"},
      {"constant of symbolic type", kHead + "  %c = constant dense<1.0> : f32[n]\n" + kTail, ErrorCode::parse_error,
       "2:17", "not bound to a size"},
      {"dense shape mismatch", kHead + "  %c = constant dense<[1.0, 2.0, 3.0]> : f32[2]\n" + kTail,
       ErrorCode::parse_error, "2:17", "dense literal has shape [3] but its type is f32[2]"},
      {"ragged list", kHead + "  %c = constant dense<[[1.0, 2.0], [3.0]]> : f32[2, 2]\n" + kTail,
       ErrorCode::parse_error, "2:36", "ragged list"},
      {"i8 out of range", kHead + "  %c = constant dense<300> : i8[]\n" + kTail, ErrorCode::parse_error, "2:23",
       "integer 300 is out of range for i8"},
      {"u64 negative", kHead + "  %c = constant dense<-1> : u64[]\n" + kTail, ErrorCode::parse_error, "2:23",
       "out of range for u64"},
      {"f32 overflow", kHead + "  %c = constant dense<1e39> : f32[]\n" + kTail, ErrorCode::parse_error, "2:23",
       "out of range for f32"},
      {"f16 overflow", kHead + "  %c = constant dense<70000.0> : f16[]\n" + kTail, ErrorCode::parse_error, "2:23",
       "out of range for f16"},
      {"float for integer", kHead + "  %c = constant dense<1.5> : i32[]\n" + kTail, ErrorCode::parse_error, "2:23",
       "expected an integer for a i32 element"},
      {"bad bool", kHead + "  %c = constant dense<2> : bool[]\n" + kTail, ErrorCode::parse_error, "2:23",
       "expected true or false"},
      {"complex pair for f32", kHead + "  %c = constant dense<(1.0, 2.0)> : f32[]\n" + kTail,
       ErrorCode::parse_error, "2:24", "(re, im) pairs are only for c64"},
      {"huge splat", kHead + "  %c = constant dense<0.0> : f32[100000, 100000]\n" + kTail,
       ErrorCode::parse_error, "2:17", "exceeds the 1024 MiB limit"},
      {"not strict at primitive level",
       "primitive @p(%x: f32[2, 3], %y: f32[3]) {\n  %z = add(%x, %y)\n  return %z\n}\n", ErrorCode::verify_error,
       "2:8", "not in strict primitive form"},
      {"symbolic composite at primitive level", "primitive @p(%x: f32[n, 3]) {\n  %z = relu(%x)\n  return %z\n}\n",
       ErrorCode::verify_error, "2:8", "needs static shapes"},
  };
}

TEST(TextErrors, MalformedInputs) {
  auto cases = bad_cases();
  EXPECT_GE(cases.size(), 25u);
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto g = parse_graph(c.text, "bad.rlx");
    ASSERT_FALSE(g) << "parsed:\n" << c.text;
    const std::string& msg = g.status().message();
    EXPECT_EQ(g.status().code(), c.code) << error_code_name(g.status().code()) << ": " << msg;
    std::string prefix = std::string("bad.rlx:") + c.where + ": ";
    EXPECT_EQ(msg.rfind(prefix, 0), 0u) << "message: " << msg << "\nexpected prefix: " << prefix;
    EXPECT_NE(msg.find(c.phrase), std::string::npos) << "message: " << msg << "\nexpected phrase: " << c.phrase;
  }
}

TEST(TextErrors, DefaultSourceName) {
  auto g = parse_graph("graph @g() {\n  return %nope\n}\n");
  ASSERT_FALSE(g);
  EXPECT_EQ(g.status().message().rfind("<text>:2:10: ", 0), 0u) << g.status().message();
}

TEST(TextErrors, UnreadableFile) {
  auto g = parse_graph_file("/nonexistent/dir/model.rlx");
  ASSERT_FALSE(g);
  EXPECT_EQ(g.status().code(), ErrorCode::io_error);
  EXPECT_NE(g.status().message().find("/nonexistent/dir/model.rlx"), std::string::npos);
  auto d = parse_graph_file(RLX_SOURCE_DIR);  // a directory
  ASSERT_FALSE(d);
  EXPECT_EQ(d.status().code(), ErrorCode::io_error);
}

TEST(TextErrors, FileErrorsNameThePath) {
  const std::string path = std::string(RLX_BINARY_DIR) + "/text_errors_bad.rlx";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("graph @g() {\n  %y = relu(%x)\n  return %y\n}\n", f);
  std::fclose(f);
  auto g = parse_graph_file(path);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.status().message().rfind(path + ":2:13: ", 0), 0u) << g.status().message();
  std::remove(path.c_str());
}

// Very long and very deep inputs finish quickly and without exhausting the stack.
TEST(TextErrors, HostileSizes) {
  std::string deep_attr = kHead + "  %y = softmax(%x) {axis = " + std::string(100000, '[') + "\n" + kTail;
  auto a = parse_graph(deep_attr, "bad.rlx");
  ASSERT_FALSE(a);
  EXPECT_NE(a.status().message().find("cannot nest"), std::string::npos) << a.status().message();

  std::string deep_dense = kHead + "  %c = constant dense<" + std::string(100000, '[') + "\n" + kTail;
  auto b = parse_graph(deep_dense, "bad.rlx");
  ASSERT_FALSE(b);
  EXPECT_NE(b.status().message().find("nest deeper than 64"), std::string::npos) << b.status().message();

  std::string many_names = kHead + "  ";
  for (int i = 0; i < 20000; ++i) {
    many_names += "%v";
    many_names += std::to_string(i);
    many_names += ", ";
  }
  many_names += "%last = relu(%x)\n" + kTail;
  auto c = parse_graph(many_names, "bad.rlx");
  ASSERT_FALSE(c);
  EXPECT_NE(c.status().message().find("relu gives 1 value(s) but 20001 name(s)"), std::string::npos);

  std::string long_chain = kHead;
  std::string prev = "x";
  for (int i = 0; i < 5000; ++i) {
    std::string name = "t";
    name += std::to_string(i);
    long_chain += "  %";
    long_chain += name;
    long_chain += " = relu(%";
    long_chain += prev;
    long_chain += ")\n";
    prev = name;
  }
  long_chain += "  return %" + prev + "\n}\n";
  auto d = parse_graph(long_chain, "long.rlx");
  ASSERT_TRUE(d) << d.status().message();
  EXPECT_EQ(d->nodes.size(), 5000u);
}

}  // namespace
}  // namespace rlx
