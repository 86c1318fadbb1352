// verify_graph on graphs built and then broken by hand: each broken invariant is reported as a
// verify_error that names the node or value and the problem.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "rlx/graph.h"
#include "rlx/ir_text.h"
#include "rlx/op_builder.h"
#include "rlx/verify.h"

namespace rlx {
namespace {

// x[2, 3] -> relu (node 0) -> exp (node 1) -> add(exp, x) (node 2) -> output
struct Chain {
  Graph g;
  ValueId x = kNoValue, r = kNoValue, e = kNoValue, s = kNoValue;
  Chain() {
    x = g.add_input("x", TensorType{DType::f32, {2, 3}});
    r = (*g.add_node(Op::Relu, {x}, {}))[0];
    e = (*g.add_node(Op::Exp, {r}, {}, "/exp"))[0];
    s = (*g.add_node(Op::Add, {e, x}, {}))[0];
    g.outputs = {s};
  }
};

void expect_verify_error(const Graph& g, const std::string& phrase) {
  Status s = verify_graph(g);
  ASSERT_FALSE(s) << "expected a verify error containing: " << phrase;
  EXPECT_EQ(s.code(), ErrorCode::verify_error) << s.message();
  EXPECT_NE(s.message().find(phrase), std::string::npos) << "message: " << s.message() << "\nphrase: " << phrase;
}

TEST(Verify, ValidGraphsPass) {
  Chain c;
  EXPECT_TRUE(verify_graph(c.g)) << verify_graph(c.g).message();

  Graph g;
  GraphBuilder b(g);
  OpBuilder o(b);
  ValueId x = g.add_input("x", TensorType{DType::f32, {Dim::symbol("batch"), 8}});
  ValueId w = o.param("w", TensorType{DType::f32, {8, 4}});
  ValueId table = o.param("table", TensorType{DType::f32, {Dim::symbol("vocab"), 4}});  // symbolic param
  auto parts = o.split(o.matmul(x, w), 1, {1, 3});
  ValueId ids = g.add_input("ids", TensorType{DType::i64, {Dim::unknown()}});
  ValueId emb = o.embedding(table, ids);
  ASSERT_TRUE(o.ok()) << o.status().message();
  g.outputs = {parts[0], parts[1], emb, x};
  EXPECT_TRUE(verify_graph(g)) << verify_graph(g).message();

  Graph empty;
  EXPECT_TRUE(verify_graph(empty));
}

TEST(Verify, BadTopologicalOrder) {
  Chain c;
  // Move the exp node before the relu that feeds it, keeping the producer records true.
  std::swap(c.g.nodes[0], c.g.nodes[1]);
  c.g.values[c.e].producer = 0;
  c.g.values[c.r].producer = 1;
  expect_verify_error(c.g, "node '/exp' (exp): input 0 uses value %1 before its definition by node #1 (relu)");
  expect_verify_error(c.g, "not in topological order");
}

TEST(Verify, UndefinedAndOutOfRangeValues) {
  {
    Chain c;
    c.g.nodes[2].inputs[1] = 99;
    expect_verify_error(c.g, "node #2 (add): input 1 is value %99, out of range (4 values)");
  }
  {
    Chain c;
    c.g.nodes[0].inputs[0] = -1;
    expect_verify_error(c.g, "node #0 (relu): input 0 is value %-1, out of range");
  }
  {
    Chain c;
    c.g.outputs.push_back(42);
    expect_verify_error(c.g, "graph output 1 is value %42, out of range");
  }
  {
    Chain c;
    c.g.inputs.push_back(17);
    expect_verify_error(c.g, "graph input 1 is value %17, out of range");
  }
  {
    Chain c;
    c.g.nodes[1].outputs[0] = 123;
    expect_verify_error(c.g, "node '/exp' (exp): output 0 is value %123, out of range");
  }
  {
    // A value that nothing produces, used by a node.
    Chain c;
    c.g.values.push_back(Value{TensorType{DType::f32, {2, 3}}, -1, 0, "ghost"});
    c.g.nodes[2].inputs[1] = 4;
    expect_verify_error(c.g, "input 1 uses value 'ghost' (%4), which no node or graph input defines");
  }
}

TEST(Verify, EveryValueProducedExactlyOnce) {
  {
    // An orphan value that nothing produces.
    Chain c;
    c.g.values.push_back(Value{TensorType{DType::f32, {1}}, -1, 0, ""});
    expect_verify_error(c.g, "value %4 (f32[1]) is not produced by any node or graph input");
  }
  {
    // Two nodes claim the same output value.
    Chain c;
    c.g.nodes[1].outputs[0] = c.r;
    expect_verify_error(c.g, "node '/exp' (exp): output 0 redefines value %1, which is already produced by node #0 (relu)");
  }
  {
    // A graph input that a node also produces.
    Chain c;
    c.g.nodes[0].outputs[0] = c.x;
    expect_verify_error(c.g, "graph input 0: value 'x' (%0) is also produced by node #0 (relu)");
  }
  {
    Chain c;
    c.g.inputs.push_back(c.x);
    expect_verify_error(c.g, "is listed as a graph input more than once");
  }
}

TEST(Verify, ProducerRecordsMustAgree) {
  {
    Chain c;
    c.g.values[c.e].producer = 2;
    expect_verify_error(c.g, "node '/exp' (exp): output 0 is value %2, which records producer 2 output 0 instead of 1 output 0");
  }
  {
    Chain c;
    c.g.values[c.e].output_index = 1;
    expect_verify_error(c.g, "records producer 1 output 1 instead of 1 output 0");
  }
  {
    Chain c;
    c.g.values[c.x].producer = 0;
    expect_verify_error(c.g, "graph input 0: value 'x' (%0) records producer node #0 instead of -1");
  }
}

TEST(Verify, RecordedTypesMustMatchInference) {
  {
    Chain c;
    c.g.values[c.r].type = TensorType{DType::f16, {2, 3}};
    expect_verify_error(c.g, "node #0 (relu): output 0 (value %1) is recorded as f16[2, 3] but type inference gives f32[2, 3]");
  }
  {
    Chain c;
    c.g.values[c.s].type.shape = {2, Dim::symbol("n")};
    expect_verify_error(c.g, "node #2 (add): output 0 (value %3) is recorded as f32[2, n]");
  }
  {
    // Inference itself fails: the attributes no longer make sense.
    Chain c;
    c.g.nodes[0].attrs.set("alpha", 0.5);
    expect_verify_error(c.g, "node #0 (relu): type inference fails: unknown attribute 'alpha'");
  }
  {
    Chain c;
    c.g.nodes[2].inputs.pop_back();
    expect_verify_error(c.g, "node #2 (add): type inference fails: takes 2 inputs, got 1");
  }
  {
    // A split whose recorded outputs do not match its sizes.
    Graph g;
    ValueId x = g.add_input("x", TensorType{DType::f32, {4}});
    g.add_node_typed(Op::Split, {x}, Attrs{{"axis", int64_t{0}}, {"sizes", std::vector<int64_t>{1, 3}}},
                     {TensorType{DType::f32, {4}}});
    expect_verify_error(g, "node #0 (split): has 1 outputs, but its op and attributes give 2");
  }
  {
    // A param's static dims must match its shape attribute; symbolic ones are recorded as 0.
    Graph g;
    g.add_param("w", TensorType{DType::f32, {Dim::symbol("n"), 4}});
    EXPECT_TRUE(verify_graph(g)) << verify_graph(g).message();
    g.nodes[0].attrs.set("shape", std::vector<int64_t>{3, 4});
    expect_verify_error(g, "node #0 (param): output 0 (value %0) is recorded as f32[n, 4] but type inference gives f32[3, 4]");
  }
}

TEST(Verify, PrimitiveLevelNeedsStrictPrimitives) {
  {
    // Numpy broadcasting is fine at the graph level ...
    Graph g;
    ValueId a = g.add_input("a", TensorType{DType::f32, {2, 3}});
    ValueId b = g.add_input("b", TensorType{DType::f32, {3}});
    g.outputs = {(*g.add_node(Op::Add, {a, b}, {}, "/add"))[0]};
    EXPECT_TRUE(verify_graph(g));
    // ... but not at the primitive level.
    g.level = IrLevel::primitive;
    expect_verify_error(g, "node '/add' (add): not in strict primitive form: operands differ in shape");
    EXPECT_FALSE(verify_node_level(g, 0));
  }
  {
    // Reductions need explicit axes at the primitive level.
    Graph g;
    g.level = IrLevel::primitive;
    ValueId a = g.add_input("a", TensorType{DType::f32, {2, 3}});
    g.outputs = {(*g.add_node(Op::ReduceSum, {a}, {}))[0]};
    expect_verify_error(g, "node #0 (reduce_sum): not in strict primitive form: needs explicit axes");
  }
  {
    // Primitives need static shapes.
    Graph g;
    g.level = IrLevel::primitive;
    ValueId a = g.add_input("a", TensorType{DType::f32, {Dim::symbol("n")}});
    g.outputs = {(*g.add_node(Op::Exp, {a}, {}))[0]};
    expect_verify_error(g, "node #0 (exp): not in strict primitive form: input 0 has a shape that is not static");
  }
  {
    // A composite is allowed (the device runs it natively) when its shapes are static ...
    Graph g;
    g.level = IrLevel::primitive;
    ValueId a = g.add_input("a", TensorType{DType::f32, {2, 3}});
    ValueId w = g.add_input("w", TensorType{DType::f32, {3, 4}});
    g.outputs = {(*g.add_node(Op::MatMul, {a, w}, {}))[0]};
    EXPECT_TRUE(verify_graph(g)) << verify_graph(g).message();
    EXPECT_TRUE(verify_node_level(g, 0));
    // ... and not otherwise.
    ValueId s = g.add_input("s", TensorType{DType::f32, {Dim::symbol("batch"), 3}});
    ASSERT_TRUE(g.add_node(Op::MatMul, {s, w}, {}));
    expect_verify_error(g, "node #1 (matmul): composite op at the primitive level needs static shapes, input 0 is f32[batch, 3]");
  }
  {
    Graph g;
    g.level = IrLevel::primitive;
    ValueId a = g.add_input("a", TensorType{DType::f32, {2, 3}});
    (void)a;
    EXPECT_FALSE(verify_node_level(g, 0));  // no such node
    EXPECT_FALSE(verify_node_level(g, -1));
  }
}

TEST(Verify, ParsedGraphsVerify) {
  auto g = parse_graph(R"(graph @g(%x: f32[n, 4]) {
  %w = param "w" : f32[4, k]
  %y = matmul(%x, %w)
  %a, %b = split(%y) {axis = 0, sizes = [1, 1]}
  return %y
}
)");
  ASSERT_TRUE(g) << g.status().message();  // a symbolic axis takes any split sizes
  EXPECT_TRUE(verify_graph(*g)) << verify_graph(*g).message();
  auto h = parse_graph(R"(graph @g(%x: f32[2, 4]) {
  %w = param "w" : f32[4, k]
  %y = matmul(%x, %w)
  %a, %b = split(%y) {axis = 0, sizes = [1, 1]}
  return %a, %b
}
)");
  ASSERT_TRUE(h) << h.status().message();
  EXPECT_TRUE(verify_graph(*h)) << verify_graph(*h).message();
}

TEST(Verify, OutputTypesMatch) {
  TensorType a{DType::f32, {2, 3}};
  TensorType b{DType::f32, {2, Dim::symbol("n")}};
  TensorType zero{DType::f32, {2, 0}};
  std::vector<TensorType> va{a}, vb{b}, vz{zero};
  EXPECT_TRUE(output_types_match(Op::Relu, va, va));
  EXPECT_FALSE(output_types_match(Op::Relu, va, vb));
  EXPECT_TRUE(output_types_match(Op::Param, vz, vb));   // symbolic recorded, 0 in the attribute
  EXPECT_FALSE(output_types_match(Op::Param, va, vb));  // a static 3 is not a symbol
  EXPECT_FALSE(output_types_match(Op::Relu, vz, vb));   // only params record symbols as 0
  EXPECT_FALSE(output_types_match(Op::Relu, va, std::vector<TensorType>{}));
}

}  // namespace
}  // namespace rlx
