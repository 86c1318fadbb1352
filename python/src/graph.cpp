// The lazy tensor API: rlx.Graph (inputs, params, outputs) and rlx.Tensor (a value of a graph
// with operators). Every op goes through rlx::OpBuilder over a GraphBuilder, so Python graphs
// get the same type inference and checks as C++ ones; nothing here computes.
#include <pybind11/stl.h>

#include <deque>

#include "bindings.h"
#include "rlx/ir_text.h"
#include "rlx/op_builder.h"
#include "rlx/verify.h"
#include "train/autodiff.h"
#include "rlx/unary_math.h"

namespace rlx::py_bind {

namespace {

// Runs `f(OpBuilder&)` on g's graph; the first error becomes rlx.Error.
template <class F>
LazyTensor emit(const GraphPtr& g, F&& f) {
  GraphBuilder gb(g->graph);
  OpBuilder o(gb);
  ValueId v = f(o);
  check(o.status());
  return LazyTensor{g, v};
}

const GraphPtr& same_graph(const LazyTensor& a, const LazyTensor& b) {
  if (a.g != b.g) raise(error(ErrorCode::invalid_argument, "the tensors belong to different graphs"));
  return a.g;
}

// A Python number next to a tensor becomes a rank-0 constant of the tensor's dtype.
LazyTensor operand(const LazyTensor& like, const py::handle& other) {
  if (py::isinstance<LazyTensor>(other)) return other.cast<LazyTensor>();
  if (py::isinstance<py::bool_>(other) || py::isinstance<py::int_>(other) || py::isinstance<py::float_>(other)) {
    double v = other.cast<double>();
    return emit(like.g, [&](OpBuilder& o) { return o.scalar_like(v, like.id); });
  }
  if (py::hasattr(other, "__array__") || py::isinstance<py::array>(other)) {
    py::array a = py::module_::import("numpy").attr("asarray")(other);
    if (a.ndim() == 0) {  // a NumPy scalar: like a Python number, in the tensor's dtype
      double v = a.attr("item")().cast<double>();
      return emit(like.g, [&](OpBuilder& o) { return o.scalar_like(v, like.id); });
    }
    Tensor t = tensor_copy_from_array(a, "constant");
    return emit(like.g, [&](OpBuilder& o) { return o.constant(t); });
  }
  throw py::type_error("rlx.Tensor: cannot combine with " + std::string(py::str(other.get_type())));
}

LazyTensor binary(Op op, const LazyTensor& a, const py::handle& b, bool reflected = false) {
  LazyTensor rhs = operand(a, b);
  const GraphPtr& g = same_graph(a, rhs);
  return emit(g, [&](OpBuilder& o) { return reflected ? o.binary(op, rhs.id, a.id) : o.binary(op, a.id, rhs.id); });
}

LazyTensor unary(Op op, const LazyTensor& x) {
  return emit(x.g, [&](OpBuilder& o) { return o.unary(op, x.id); });
}

std::vector<int64_t> axes_of(const py::object& axis) {
  if (axis.is_none()) return {};
  if (py::isinstance<py::int_>(axis)) return {axis.cast<int64_t>()};
  return axis.cast<std::vector<int64_t>>();
}

LazyTensor reduce(Op op, const LazyTensor& x, const py::object& axis, bool keepdims) {
  std::vector<int64_t> axes = axes_of(axis);
  return emit(x.g, [&](OpBuilder& o) { return o.reduce(op, x.id, axes, keepdims); });
}

Shape shape_from_py(const py::iterable& s) {
  Shape out;
  for (py::handle d : s) {
    if (py::isinstance<py::str>(d)) {
      out.push_back(Dim::symbol(d.cast<std::string>()));
    } else if (d.is_none()) {
      out.push_back(Dim::unknown());
    } else {
      int64_t v = d.cast<int64_t>();
      if (v < 0) raise(error(ErrorCode::invalid_argument, "shape: dimension ", v, " is negative"));
      out.push_back(Dim(v));
    }
  }
  return out;
}

py::tuple shape_to_py(const Shape& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].is_static()) {
      t[i] = py::int_(s[i].size());
    } else if (s[i].is_symbol()) {
      t[i] = py::str(s[i].symbol_name());
    } else {
      t[i] = py::none();
    }
  }
  return t;
}

// Attribute values from Python, converted to the kind the ops table declares for each name.
Attrs attrs_from_py(Op op, const py::kwargs& kw) {
  Attrs attrs;
  const OpInfo& info = op_info(op);
  for (auto [k, v] : kw) {
    const std::string name = k.cast<std::string>();
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& a : info.attrs)
      if (a.name == name) spec = &a;
    if (!spec)
      raise(error(ErrorCode::invalid_argument, "op ", op_name(op), " has no attribute '", name, "'"));
    switch (spec->kind) {
      case AttrKind::i64: attrs.set(name, v.cast<int64_t>()); break;
      case AttrKind::f64: attrs.set(name, v.cast<double>()); break;
      case AttrKind::str: attrs.set(name, v.cast<std::string>()); break;
      case AttrKind::i64s: attrs.set(name, v.cast<std::vector<int64_t>>()); break;
      case AttrKind::f64s: attrs.set(name, v.cast<std::vector<double>>()); break;
      case AttrKind::dtype: attrs.set(name, dtype_from_py(v)); break;
      case AttrKind::tensor: attrs.set(name, tensor_copy_from_array(v, name)); break;
    }
  }
  return attrs;
}

std::string tensor_repr(const LazyTensor& t) {
  const Value& v = t.g->graph.values[static_cast<size_t>(t.id)];
  return "rlx.Tensor(" + t.g->graph.value_label(t.id) + ": " + v.type.to_string() + ")";
}

// Docstrings made at import live as long as the module (pybind11 keeps the pointer).
const char* keep_doc(std::string doc) {
  static std::deque<std::string> docs;
  return docs.emplace_back(std::move(doc)).c_str();
}

// n-1, ..., 0: the permutation of x.T
std::vector<int64_t> reversed_axes(const LazyTensor& x) {
  std::vector<int64_t> p;
  for (int i = x.g->graph.type(x.id).rank() - 1; i >= 0; --i) p.push_back(i);
  return p;
}

GraphPtr graph_of(const std::vector<LazyTensor>& ts) {
  if (ts.empty()) raise(error(ErrorCode::invalid_argument, "no tensors given"));
  for (const LazyTensor& t : ts) same_graph(ts[0], t);
  return ts[0].g;
}

}  // namespace

void bind_graph(py::module_& m) {
  py::class_<GraphState, GraphPtr> graph(m, "Graph",
                                         "A graph under construction (or loaded from a model file). Tensors made "
                                         "by input(), param() and ops on them are lazy: nothing runs until the "
                                         "graph is compiled.");
  py::class_<LazyTensor> tensor(m, "Tensor",
                                "A lazy tensor: one value of a Graph, with a shape (ints, or str for symbolic "
                                "dims) and a dtype. Operators + - * / @ ** and unary - build new nodes.");

  graph
      .def(py::init([](const std::string& name) {
             auto g = std::make_shared<GraphState>();
             g->graph.name = name;
             return g;
           }),
           py::arg("name") = "main")
      .def_property_readonly("name", [](const GraphState& g) { return g.graph.name; })
      .def(
          "input",
          [](const GraphPtr& g, const std::string& name, const py::iterable& shape, const py::object& dtype) {
            for (ValueId v : g->graph.inputs)
              if (g->graph.values[v].name == name)
                raise(error(ErrorCode::invalid_argument, "the graph already has an input named '", name, "'"));
            return LazyTensor{g, g->graph.add_input(name, TensorType{dtype_from_py(dtype), shape_from_py(shape)})};
          },
          py::arg("name"), py::arg("shape"), py::arg("dtype") = "f32",
          "Adds a graph input. shape: ints, or str for a symbolic dim bound when the graph runs.")
      .def(
          "param",
          [](const GraphPtr& g, const std::string& name, const py::object& value, const py::object& shape,
             const py::object& dtype) {
            if (value.is_none()) {
              if (shape.is_none()) raise(error(ErrorCode::invalid_argument, "param '", name, "': give a value or a shape"));
              TensorType t{dtype.is_none() ? DType::f32 : dtype_from_py(dtype), shape_from_py(shape)};
              return LazyTensor{g, g->graph.add_param(name, t)};
            }
            Tensor data = tensor_copy_from_array(value, "param '" + name + "'");
            if (!dtype.is_none() && dtype_from_py(dtype) != data.dtype())
              raise(error(ErrorCode::dtype_error, "param '", name, "': the value's dtype is ", dtype_name(data.dtype())));
            return LazyTensor{g, g->graph.add_param(name, data.type(), data)};
          },
          py::arg("name"), py::arg("value") = py::none(), py::kw_only(), py::arg("shape") = py::none(),
          py::arg("dtype") = py::none(),
          "Adds a named weight. value: a NumPy array (copied into the graph); or shape/dtype alone for a weight "
          "whose data is set later through weights.")
      .def(
          "constant",
          [](const GraphPtr& g, const py::object& value) {
            Tensor t = tensor_copy_from_array(value, "constant");
            return emit(g, [&](OpBuilder& o) { return o.constant(t); });
          },
          py::arg("value"), "A constant node holding a copy of the array.")
      .def(
          "output",
          [](const GraphPtr& g, py::args ts) {
            for (py::handle h : ts) {
              LazyTensor t = h.cast<LazyTensor>();
              if (t.g != g) raise(error(ErrorCode::invalid_argument, "output: the tensor belongs to another graph"));
              g->graph.outputs.push_back(t.id);
            }
          },
          "Appends tensors to the graph's outputs.")
      .def_property(
          "outputs",
          [](const GraphPtr& g) {
            std::vector<LazyTensor> v;
            for (ValueId id : g->graph.outputs) v.push_back({g, id});
            return v;
          },
          [](const GraphPtr& g, const std::vector<LazyTensor>& ts) {
            std::vector<ValueId> ids;
            for (const LazyTensor& t : ts) {
              if (t.g != g) raise(error(ErrorCode::invalid_argument, "outputs: a tensor belongs to another graph"));
              ids.push_back(t.id);
            }
            g->graph.outputs = ids;
          },
          "The graph's outputs, in order.")
      .def_property_readonly(
          "inputs",
          [](const GraphPtr& g) {
            std::vector<LazyTensor> v;
            for (ValueId id : g->graph.inputs) v.push_back({g, id});
            return v;
          },
          "The graph's inputs, in order.")
      .def_property_readonly("format", [](const GraphState& g) { return g.format.empty() ? "python" : g.format; },
                             "Where the graph came from: 'python', 'onnx', 'rlx text IR', ...")
      .def_property_readonly("metadata", [](const GraphState& g) { return g.metadata; },
                             "The model file's metadata (str -> str).")
      .def_property_readonly(
          "weights",
          [](const GraphState& g) {
            py::dict d;
            for (const auto& [name, t] : g.graph.weights)
              if (t.defined()) d[py::str(name)] = array_from_tensor(t);
            return d;
          },
          "The weights with data, by name, as NumPy arrays viewing the graph's memory.")
      .def(
          "set_weight",
          [](GraphState& g, const std::string& name, const py::object& value) {
            g.graph.weights[name] = tensor_copy_from_array(value, "weight '" + name + "'");
          },
          py::arg("name"), py::arg("value"), "Sets (a copy of) the data of weight `name`.")
      .def("verify", [](const GraphState& g) { check(verify_graph(g.graph)); },
           "Runs the IR verifier; raises rlx.Error naming the node at fault.")
      .def("text", [](const GraphState& g) { return print_graph(g.graph); }, "The graph as text IR (docs/ir.md).")
      .def("__repr__", [](const GraphState& g) {
        return "rlx.Graph(@" + g.graph.name + ", " + std::to_string(g.graph.inputs.size()) + " inputs, " +
               std::to_string(g.graph.nodes.size()) + " nodes, " + std::to_string(g.graph.outputs.size()) + " outputs)";
      });
  m.def(
      "parse",
      [](const std::string& text) {
        auto g = std::make_shared<GraphState>();
        g->graph = unwrap(parse_graph(text, "<python>"));
        g->format = "rlx text IR";
        return g;
      },
      py::arg("text"), "A Graph from text IR (docs/ir.md).");

  tensor.def_property_readonly("shape", [](const LazyTensor& t) { return shape_to_py(t.g->graph.type(t.id).shape); })
      .def_property_readonly("dtype", [](const LazyTensor& t) { return std::string(dtype_name(t.g->graph.type(t.id).dtype)); })
      .def_property_readonly("ndim", [](const LazyTensor& t) { return t.g->graph.type(t.id).rank(); })
      .def_property_readonly("name", [](const LazyTensor& t) { return t.g->graph.values[t.id].name; })
      .def_property_readonly("graph", [](const LazyTensor& t) { return t.g; })
      .def("__repr__", &tensor_repr)
      .def("__add__", [](const LazyTensor& a, const py::object& b) { return binary(Op::Add, a, b); })
      .def("__radd__", [](const LazyTensor& a, const py::object& b) { return binary(Op::Add, a, b, true); })
      .def("__sub__", [](const LazyTensor& a, const py::object& b) { return binary(Op::Sub, a, b); })
      .def("__rsub__", [](const LazyTensor& a, const py::object& b) { return binary(Op::Sub, a, b, true); })
      .def("__mul__", [](const LazyTensor& a, const py::object& b) { return binary(Op::Mul, a, b); })
      .def("__rmul__", [](const LazyTensor& a, const py::object& b) { return binary(Op::Mul, a, b, true); })
      .def("__truediv__", [](const LazyTensor& a, const py::object& b) { return binary(Op::Div, a, b); })
      .def("__rtruediv__", [](const LazyTensor& a, const py::object& b) { return binary(Op::Div, a, b, true); })
      .def("__pow__", [](const LazyTensor& a, const py::object& b) { return binary(Op::Pow, a, b); })
      .def("__matmul__", [](const LazyTensor& a, const py::object& b) { return binary(Op::MatMul, a, b); })
      .def("__rmatmul__", [](const LazyTensor& a, const py::object& b) { return binary(Op::MatMul, a, b, true); })
      .def("__neg__", [](const LazyTensor& a) { return unary(Op::Neg, a); })
      .def(
          "reshape", [](const LazyTensor& x, const std::vector<int64_t>& shape) {
            return emit(x.g, [&](OpBuilder& o) { return o.reshape(x.id, shape); });
          },
          py::arg("shape"), "Same elements, new shape (-1 infers one dim).")
      .def(
          "transpose",
          [](const LazyTensor& x, const py::object& perm) {
            std::vector<int64_t> p = perm.is_none() ? reversed_axes(x) : perm.cast<std::vector<int64_t>>();
            return emit(x.g, [&](OpBuilder& o) { return o.transpose(x.id, p); });
          },
          py::arg("perm") = py::none(), "Permutes the dims (reverses them when perm is None).")
      .def_property_readonly("T", [](const LazyTensor& x) {
        std::vector<int64_t> p = reversed_axes(x);
        return emit(x.g, [&](OpBuilder& o) { return o.transpose(x.id, p); });
      });

  // ops as functions (also reachable as methods through python/rlx/__init__.py)
  m.def(
      "op",
      [](const std::string& name, const std::vector<LazyTensor>& inputs, const py::kwargs& kw) {
        auto op = op_from_name(name);
        if (!op) raise(error(ErrorCode::unknown_op, "unknown op '", name, "'"));
        GraphPtr g = graph_of(inputs);
        Attrs attrs = attrs_from_py(*op, kw);
        std::vector<ValueId> ids;
        for (const LazyTensor& t : inputs) ids.push_back(t.id);
        GraphBuilder gb(g->graph);
        OpBuilder o(gb);
        std::vector<ValueId> outs = o.op_multi(*op, ids, attrs);
        check(o.status());
        py::list r;
        for (ValueId v : outs) r.append(LazyTensor{g, v});
        return outs.size() == 1 ? py::object(r[0]) : py::object(py::tuple(r));
      },
      py::arg("name"), py::arg("inputs"),
      "Any op of the ops table by name (docs/ir.md), attributes as keywords: op('softmax', [x], axis=1).");
  // every math function of rlx/unary_math.h, and these
  std::vector<Op> unary_ops = {Op::Neg, Op::Abs, Op::Relu, Op::Silu};
  for (const UnaryMathOp& row : unary_math_ops()) unary_ops.push_back(row.op);
  for (Op op : unary_ops) {
    const std::string name(op_name(op));
    m.def(keep_doc(name), [op](const LazyTensor& x) { return unary(op, x); }, py::arg("x"),
          keep_doc(cat("Elementwise ", name, " (the ", name, " op): a new lazy tensor.")));
  }
  for (auto [name, op] : std::initializer_list<std::pair<const char*, Op>>{{"add", Op::Add},
                                                                          {"sub", Op::Sub},
                                                                          {"mul", Op::Mul},
                                                                          {"div", Op::Div},
                                                                          {"pow", Op::Pow},
                                                                          {"maximum", Op::Max},
                                                                          {"minimum", Op::Min},
                                                                          {"matmul", Op::MatMul}}) {
    const Op o = op;
    m.def(name, [o](const LazyTensor& a, const py::object& b) { return binary(o, a, b); }, py::arg("a"), py::arg("b"),
          keep_doc(cat("The ", op_name(op), " op on a and b (NumPy broadcasting; b may be a tensor, a number or an "
                       "array): a new lazy tensor.")));
  }
  m.def(
      "gelu", [](const LazyTensor& x, const std::string& approximate) {
        return emit(x.g, [&](OpBuilder& o) { return o.gelu(x.id, approximate); });
      },
      py::arg("x"), py::arg("approximate") = "none", "GELU; approximate='tanh' for the tanh form.");
  m.def(
      "softmax", [](const LazyTensor& x, int64_t axis) { return emit(x.g, [&](OpBuilder& o) { return o.softmax(x.id, axis); }); },
      py::arg("x"), py::arg("axis") = -1, "Softmax along axis.");
  m.def(
      "log_softmax",
      [](const LazyTensor& x, int64_t axis) { return emit(x.g, [&](OpBuilder& o) { return o.log_softmax(x.id, axis); }); },
      py::arg("x"), py::arg("axis") = -1, "log(softmax(x)) along axis, computed stably.");
  m.def(
      "sum", [](const LazyTensor& x, const py::object& axis, bool keepdims) { return reduce(Op::ReduceSum, x, axis, keepdims); },
      py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdims") = false, "Sum over axis (an int, a list, or None: all).");
  m.def(
      "mean", [](const LazyTensor& x, const py::object& axis, bool keepdims) { return reduce(Op::ReduceMean, x, axis, keepdims); },
      py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdims") = false, "Mean over axis (an int, a list, or None: all).");
  m.def(
      "max", [](const LazyTensor& x, const py::object& axis, bool keepdims) { return reduce(Op::ReduceMax, x, axis, keepdims); },
      py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdims") = false, "Maximum over axis (an int, a list, or None: all).");
  m.def(
      "argmax",
      [](const LazyTensor& x, int64_t axis, bool keepdims) {
        return emit(x.g, [&](OpBuilder& o) { return o.argmax(x.id, axis, keepdims); });
      },
      py::arg("x"), py::arg("axis") = -1, py::arg("keepdims") = false, "Index of the maximum along axis (i64).");
  m.def(
      "cast", [](const LazyTensor& x, const py::object& dtype) {
        DType t = dtype_from_py(dtype);
        return emit(x.g, [&](OpBuilder& o) { return o.cast(x.id, t); });
      },
      py::arg("x"), py::arg("dtype"), "x converted to dtype ('f16', 'i32', np.float64, ...).");
  m.def(
      "where",
      [](const LazyTensor& c, const LazyTensor& a, const py::object& b) {
        LazyTensor bt = operand(a, b);
        same_graph(c, a);
        same_graph(a, bt);
        return emit(a.g, [&](OpBuilder& o) { return o.where(c.id, a.id, bt.id); });
      },
      py::arg("cond"), py::arg("a"), py::arg("b"), "Elementwise cond ? a : b (cond bool).");
  m.def(
      "concat",
      [](const std::vector<LazyTensor>& xs, int64_t axis) {
        GraphPtr g = graph_of(xs);
        std::vector<ValueId> ids;
        for (const LazyTensor& t : xs) ids.push_back(t.id);
        return emit(g, [&](OpBuilder& o) { return o.concat(ids, axis); });
      },
      py::arg("xs"), py::arg("axis") = 0, "Tensors joined along axis.");
  m.def(
      "layer_norm",
      [](const LazyTensor& x, const LazyTensor& scale, const LazyTensor& bias, int64_t axis, double eps) {
        same_graph(x, scale);
        same_graph(x, bias);
        return emit(x.g, [&](OpBuilder& o) { return o.layer_norm(x.id, scale.id, bias.id, axis, eps); });
      },
      py::arg("x"), py::arg("scale"), py::arg("bias"), py::arg("axis") = -1, py::arg("eps") = 1e-5,
      "Layer normalization over the dims from axis on, then * scale + bias.");
  m.def(
      "rms_norm",
      [](const LazyTensor& x, const LazyTensor& scale, int64_t axis, double eps) {
        same_graph(x, scale);
        return emit(x.g, [&](OpBuilder& o) { return o.rms_norm(x.id, scale.id, axis, eps); });
      },
      py::arg("x"), py::arg("scale"), py::arg("axis") = -1, py::arg("eps") = 1e-6,
      "RMS normalization over the dims from axis on, then * scale.");
  m.def(
      "reshape",
      [](const LazyTensor& x, const std::vector<int64_t>& shape) {
        return emit(x.g, [&](OpBuilder& o) { return o.reshape(x.id, shape); });
      },
      py::arg("x"), py::arg("shape"), "Same elements, new shape (-1 infers one dim).");
  m.def(
      "transpose",
      [](const LazyTensor& x, const std::vector<int64_t>& perm) {
        return emit(x.g, [&](OpBuilder& o) { return o.transpose(x.id, perm); });
      },
      py::arg("x"), py::arg("perm"), "Dims permuted: output dim i is input dim perm[i].");

  m.def(
      "gradients",
      [](const LazyTensor& loss, const std::vector<LazyTensor>& wrt) {
        std::vector<ValueId> ids;
        for (const LazyTensor& t : wrt) {
          same_graph(loss, t);
          ids.push_back(t.id);
        }
        std::vector<ValueId> gs = unwrap(train::gradients(loss.g->graph, loss.id, ids));
        std::vector<LazyTensor> out;
        for (ValueId v : gs) out.push_back({loss.g, v});
        return out;
      },
      py::arg("loss"), py::arg("wrt"),
      "Appends the backward nodes (src/train autodiff) to the loss's graph and returns d loss / d wrt[i], "
      "each shaped like wrt[i]. The loss must hold one float element; shapes must be static.");
}

}  // namespace rlx::py_bind
