// Shape arithmetic over symbolic dims, as exporters write it for dynamic axes:
// Shape -> Gather -> (Cast) -> Unsqueeze -> Concat -> Reshape/Expand, and Range over a dynamic
// length. The values are lists of Dims known at import time; nothing is emitted except for
// Range, which becomes an iota over a graph value that has the symbolic dim.
#include "onnx_internal.h"

namespace rlx::onnx_import {
namespace {

Status sym_gather(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto data, m.dims_in(0));
  RLX_ASSIGN_OR_RETURN(Tensor idx, m.konst(1));
  if (m.type(0).rank() != 1 || m.ai("axis", 0) != 0) return m.fail(ErrorCode::unsupported, "Gather of a shape value needs a 1-D value and axis 0");
  RLX_ASSIGN_OR_RETURN(auto ids, tensor_ints(idx, m.where() + ": indices"));
  std::vector<Dim> out;
  const int64_t n = static_cast<int64_t>(data.size());
  for (int64_t i : ids) {
    if (i < -n || i >= n) return m.fail(ErrorCode::out_of_range, "index ", i, " outside a shape of ", n, " dims");
    out.push_back(data[i < 0 ? i + n : i]);
  }
  return m.out_dims(0, out, idx.rank() == 0);
}

Status sym_cast(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto d, m.dims_in(0));
  auto to = dtype_from_onnx(static_cast<int32_t>(m.ai("to", 0)));
  if (!to || !is_int(*to)) return m.fail(ErrorCode::unsupported, "a shape value with symbolic dims cast to a non-integer type");
  return m.out_dims(0, d, m.type(0).rank() == 0);
}

Status sym_unsqueeze(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto d, m.dims_in(0));
  std::vector<int64_t> axes = m.aints("axes");
  if (m.has(1)) { RLX_ASSIGN_OR_RETURN(axes, m.ints(1)); }
  if (m.type(0).rank() != 0 || axes.size() != 1 || (axes[0] != 0 && axes[0] != -1))
    return m.fail(ErrorCode::unsupported, "Unsqueeze of a symbolic shape value must make a scalar 1-D");
  return m.out_dims(0, d, false);
}

Status sym_squeeze(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto d, m.dims_in(0));
  if (d.size() != 1 || m.type(0).rank() != 1) return m.fail(ErrorCode::unsupported, "Squeeze of a symbolic shape value");
  return m.out_dims(0, d, true);
}

Status sym_concat(Importer& m) {
  const int64_t axis = m.ai("axis", 0);
  if (axis != 0 && axis != -1) return m.fail(ErrorCode::unsupported, "Concat of shape values needs axis 0, got ", axis);
  std::vector<Dim> out;
  for (int i = 0; i < m.num_inputs(); ++i) {
    if (!m.has(i)) continue;
    if (m.type(i).rank() != 1) return m.fail(ErrorCode::unsupported, "Concat of shape values needs 1-D inputs");
    RLX_ASSIGN_OR_RETURN(auto d, m.dims_in(i));
    out.insert(out.end(), d.begin(), d.end());
  }
  return m.out_dims(0, out, false);
}

Status sym_slice(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto d, m.dims_in(0));
  RLX_ASSIGN_OR_RETURN(auto starts, m.ints(1));
  RLX_ASSIGN_OR_RETURN(auto ends, m.ints(2));
  std::vector<int64_t> steps{1};
  if (m.has(4)) { RLX_ASSIGN_OR_RETURN(steps, m.ints(4)); }
  if (m.has(3)) {
    RLX_ASSIGN_OR_RETURN(auto axes, m.ints(3));
    if (axes.size() != 1 || (axes[0] != 0 && axes[0] != -1))
      return m.fail(ErrorCode::out_of_range, "Slice of a 1-D shape value takes axis 0");
  }
  if (starts.size() != 1 || ends.size() != 1 || steps.size() != 1)
    return m.fail(ErrorCode::unsupported, "Slice of a shape value must be 1-D");
  SliceRange r = resolve_slice_range(starts[0], ends[0], steps[0], static_cast<int64_t>(d.size()));
  std::vector<Dim> out;
  for (int64_t i = 0; i < r.size; ++i) out.push_back(d[r.start + i * steps[0]]);
  return m.out_dims(0, out, false);
}

// Slice of a data tensor (not a shape value) up to a symbolic dim: x[:, :seq], as exporters
// write position ids sliced from a buffer. It is a gather of positions 0..D-1 along the axis,
// D taken from a graph input that has it, so the result keeps the symbolic dim. Only a start
// of 0, a step of 1 and one axis are taken this way; the end must be at most the axis's size
// at run time, as it is for such buffers (a longer sequence would read the last position
// again, where ONNX would make the output shorter).
Status sym_slice_data(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  if (!m.is_konst(1) || !m.is_sym(2) || (m.has(3) && !m.is_konst(3)) || (m.has(4) && !m.is_konst(4)))
    return m.fail(ErrorCode::unsupported, "Slice with symbolic bounds: only the end may be symbolic");
  RLX_ASSIGN_OR_RETURN(auto starts, m.ints(1));
  RLX_ASSIGN_OR_RETURN(auto ends, m.dims_in(2));
  std::vector<int64_t> axes{0}, steps{1};
  if (m.has(3)) { RLX_ASSIGN_OR_RETURN(axes, m.ints(3)); }
  if (m.has(4)) { RLX_ASSIGN_OR_RETURN(steps, m.ints(4)); }
  if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 || steps.size() != 1)
    return m.fail(ErrorCode::unsupported, "Slice with a symbolic end: one axis only");
  if (starts[0] != 0 || steps[0] != 1 || ends[0].is_static())
    return m.fail(ErrorCode::unsupported, "Slice with a symbolic end needs start 0 and step 1, got start ", starts[0], " and step ",
                  steps[0]);
  const int rank = m.o().rank(x);
  RLX_ASSIGN_OR_RETURN(int axis, axis_of(m, axes[0], rank));
  RLX_ASSIGN_OR_RETURN(ValueId like, m.value_with_dim(ends[0]));
  ValueId positions = m.o().op(Op::Iota, {like}, Attrs{{"dtype", DType::i64}, {"axis", int64_t{0}}});
  return m.out(0, m.o().gather(x, positions, axis));
}

Status sym_identity(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto d, m.dims_in(0));
  return m.out_dims(0, d, m.type(0).rank() == 0);
}

// Range(start, limit, delta) with a symbolic limit: start + iota * delta over [limit], which
// needs start == 0 and delta == 1 for the length to be the symbolic dim itself.
Status sym_range(Importer& m) {
  RLX_ASSIGN_OR_RETURN(Tensor st, m.konst(0));
  RLX_ASSIGN_OR_RETURN(auto lim, m.dims_in(1));
  RLX_ASSIGN_OR_RETURN(Tensor de, m.konst(2));
  if (lim.size() != 1 || st.numel() != 1 || de.numel() != 1 || st.get_f64(0) != 0 || de.get_f64(0) != 1)
    return m.fail(ErrorCode::unsupported, "Range over a symbolic length needs start 0 and delta 1");
  RLX_ASSIGN_OR_RETURN(ValueId like, m.value_with_dim(lim[0]));
  ValueId r = m.o().op(Op::Iota, {like}, Attrs{{"dtype", st.dtype()}, {"axis", int64_t{0}}});
  return m.out(0, r);
}

}  // namespace

bool is_symbolic_op(const std::string& op) {
  return op == "Gather" || op == "Cast" || op == "Unsqueeze" || op == "Squeeze" || op == "Concat" || op == "Slice" ||
         op == "Identity" || op == "Range";
}

Status map_symbolic(Importer& m) {
  const std::string& op = m.node->op_type();
  // only the shape-value operand may be symbolic; Gather of data by symbolic indices is not this
  if (op == "Gather") {
    if (!m.is_sym(0)) return m.fail(ErrorCode::unsupported, "Gather with symbolic-shape indices");
    return sym_gather(m);
  }
  if (op == "Cast") return sym_cast(m);
  if (op == "Unsqueeze") return sym_unsqueeze(m);
  if (op == "Squeeze") return sym_squeeze(m);
  if (op == "Concat") return sym_concat(m);
  if (op == "Slice") return m.is_sym(0) ? sym_slice(m) : sym_slice_data(m);
  if (op == "Identity") return sym_identity(m);
  if (op == "Range") return sym_range(m);
  return m.fail(ErrorCode::internal, "not a symbolic shape op");
}

}  // namespace rlx::onnx_import
