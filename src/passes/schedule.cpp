// Scheduling: materialization decisions, fusion of primitives into generated kernels through
// index-expression inlining, and the order of steps.
#include "schedule.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include "kernel_builder.h"
#include "rlx/unary_math.h"

namespace rlx::sched {
namespace {

using kir::Buffer;
using kir::BufferKind;
using kir::GeneratedKernel;

bool is_reduce_like(Op op) {
  const OpFamily f = op_info(op).family;
  return f == OpFamily::reduce || f == OpFamily::argreduce || op == Op::Dot;
}

class Scheduler;

// An inlined value whose expression is longer than this is materialized when more than one
// kernel inlines it, rather than recomputed by each. Without the bound, a chain of
// elementwise producers that is never forced (MiniLM's residual stream under --precision,
// where rounding casts rather than GEMMs read each layer norm's output) was recomputed from
// the first layer in every later kernel: the mean-pooling kernel read 82 buffers. Cheap
// expressions (a bias add, softmax's exp) stay fused.
constexpr int kMaxRecomputeExprs = 32;
// See Lowering::costly_broadcast.
constexpr int64_t kMaxBroadcastRecompute = 4;
// The longest chain of nodes one generated kernel inlines. Lowering inlines a value's
// producers recursively, so without a bound a valid chain of 100,000 elementwise nodes was one
// kernel whose lowering recursed once per node and overflowed the stack (and whose source no
// compiler wants); every kMaxFusionDepth-th link of a longer chain is materialized instead.
constexpr int kMaxFusionDepth = 128;

// Builds one generated kernel by inlining the expression of a value at loop indices.
class Lowering {
 public:
  Lowering(Scheduler& s, GeneratedKernel& k, ValueId sink) : S(s), kb(k), k_(k), sinks_{sink} {}
  int elem(ValueId v, const std::vector<Ix>& idx);
  // Another value this kernel stores (a sibling: Scheduler::sibling_candidates): computed here
  // like the first, never loaded from its buffer.
  void add_sink(ValueId v) { sinks_.push_back(v); }
  // Set when a stored value was computed at a second index: a sibling read it at another
  // element than the one this iteration stores (it cannot share the kernel).
  bool sink_recomputed = false;
  int arg(int buffer);
  int typed_const(double v, DType dt);
  int scalar_const(const Tensor& t, DType dt);
  ValueId needs_materialization = kNoValue;  // set when a value must get its own buffer
  std::set<ValueId> inlined_reductions;
  // Values computed inline (not loaded, not the sink) and the most expressions one of them
  // added to this kernel: the scheduler materializes an expensive value that several kernels
  // would otherwise each recompute.
  std::map<ValueId, int> inlined_cost;

  Scheduler& S;
  KernelBuilder kb;

 private:
  int compute(ValueId v, const std::vector<Ix>& idx);
  int reduce_value(const Node& n, ValueId v, const std::vector<Ix>& idx);
  int dot_value(const Node& n, const std::vector<Ix>& idx);
  bool costly_broadcast(ValueId v) const;
  bool moved_into_store(ValueId v) const;
  bool view_of_buffer(ValueId v) const;
  bool depends_on_active(const std::vector<Ix>& idx);
  bool is_sink(ValueId v) const { return std::find(sinks_.begin(), sinks_.end(), v) != sinks_.end(); }

  GeneratedKernel& k_;
  std::vector<ValueId> sinks_;
  std::set<ValueId> computed_sinks_;
  // While a pad reads its input at indices outside it (ix_assume), its bounds test: the loads
  // made meanwhile are guarded by it (-1: none)
  int load_guard_ = -1;
  std::unordered_map<std::string, int> memo_;
  std::map<int, int> args_;
  std::vector<int> active_loops_;
};

class Scheduler {
 public:
  Scheduler(const Graph& g, const ScheduleOptions& o) : g(g), opts(o) {}
  Expected<kir::KernelProgram> run();

  const Graph& g;
  const ScheduleOptions& opts;
  kir::KernelProgram prog;
  std::vector<int> buffer_of;        // value -> buffer, or -1 when inlined
  std::vector<char> forced;          // value must be materialized
  // the nodes reading each value
  const std::vector<int>& consumers(ValueId v) const { return consumers_[static_cast<size_t>(v)]; }
  // The least and greatest element of v when a constant node computes it (computed once
  // per value), else nullopt.
  std::optional<std::pair<int64_t, int64_t>> constant_range(ValueId v);

 private:
  std::map<ValueId, std::optional<std::pair<int64_t, int64_t>>> constant_ranges_;
  void init_forced();
  int new_buffer(ValueId v, BufferKind kind);
  Status assign_buffers();
  // Builds the kernel that materializes v (and the siblings it can store too), or defers v
  // (deferred_) when allowed; returns false if it asked for more materialization.
  Expected<bool> build_kernel(ValueId v, int out_buffer, bool may_defer = true);
  // Multi-output fusion: the values a kernel storing v may store as well, nearest first. Each is
  // materialized, has v's shape, is computed by an elementwise node from v through values that
  // are inlined (a rounding copy of v, an optimizer's new parameter from its new moment), and
  // would otherwise get a kernel of its own that reads v again. build_kernel keeps those whose
  // expression reads v only at the element being stored and reads nothing the program has not
  // written yet.
  std::vector<ValueId> sibling_candidates(ValueId v) const;
  // Whether buffer b holds its values at the current end of the program (an input, weight or
  // constant, or written by a step already added).
  bool available(int b) const;
  int root(int b) const {
    while (prog.buffers[b].alias_of >= 0) b = prog.buffers[b].alias_of;
    return b;
  }
  void mark_written(int b) {
    b = root(b);
    if (static_cast<size_t>(b) >= written_.size()) written_.resize(b + 1, 0);
    written_[b] = 1;
  }
  std::vector<char> written_;    // per buffer: a step added so far writes it
  std::vector<char> stored_;     // per value: its kernel (its own or a sibling's) is built or being built
  // Deferred values: a value whose only sibling candidate also needs a value computed after it
  // (Adam's new moments, read by the new parameter with the bias corrections computed
  // between) is not built where its node is; the kernel of that sibling (the value here)
  // stores it, or, when a step reads it first, a kernel of its own built right before that step.
  std::map<ValueId, ValueId> deferred_;
  // Builds the deferred values whose buffers `buffers` hold (before a step that reads them).
  Expected<bool> flush_deferred(const std::vector<int>& buffers);
  // The reduce_users map of the current attempt (see run()).
  std::map<ValueId, std::set<int>>* reduce_users_ = nullptr;
  // What to materialize for a reduction that several kernels inline (see its use in run()).
  ValueId shared_reduction_target(ValueId reduction, const std::set<int>& kernels) const;
  // the generated kernels inlining each value (this round)
  std::map<ValueId, std::set<int>> inline_users;
  // expensive inlined values (kMaxRecomputeExprs): the kernels inlining each, its largest cost
  std::map<ValueId, std::pair<std::set<int>, int>> expensive_users;
  Status add_native(int node_index);
  // The native kernel node ni runs, before buffers: op, attributes, the graph's types.
  kir::NativeKernel describe_native(int node_index) const;
  // u when v is an f32 value u cast to f16, or u rounded through f16 and widened back to f32;
  // else kNoValue.
  ValueId f16_cast_source(ValueId v) const;
  // Per native node: the values it reads (an input, or the f32 source of an f16 cast or round
  // trip that the native rounds as it reads: ScheduleOptions::native_reads_f32_as_f16) and
  // whether it reads each as f16.
  std::vector<std::vector<ValueId>> native_reads_;
  std::vector<std::vector<char>> native_reads_f16_;
  Status add_scatter(int node_index);
  // a kernel copying src_buffer into dst_buffer, its index in prog.generated; -1 (no kernel) when empty
  int add_copy_kernel(int src_buffer, int dst_buffer);

  std::vector<std::vector<int>> consumers_;
  std::vector<int> output_count_;
};

// ---------------- Lowering ----------------

int Lowering::arg(int buffer) {
  auto it = args_.find(buffer);
  if (it != args_.end()) return it->second;
  int a = static_cast<int>(k_.args.size());
  k_.args.push_back(buffer);
  args_[buffer] = a;
  return a;
}

int Lowering::typed_const(double v, DType dt) {
  if (is_float(dt) || is_complex(dt)) return kb.fconst(v, dt);  // c64: (v, 0)
  if (dt == DType::boolean) return kb.iconst(v != 0 ? 1 : 0, dt);  // NaN != 0: true, as in ref
  return kb.iconst(static_cast<int64_t>(float_to_int_bits(v, dt)), dt);  // saturating, as cast
}

// A scalar Constant's element: integers by their exact bits (a double loses i64/u64 values
// beyond 2^53 and cannot hold u64 values >= 2^63).
int Lowering::scalar_const(const Tensor& t, DType dt) {
  if (is_complex(dt) && is_complex(t.dtype())) return kb.fconst(t.get_f64(0), dt, t.get_imag(0));
  if (t.dtype() != dt || !is_int(dt) || is_packed(dt)) return typed_const(t.get_f64(0), dt);
  const int bytes = dtype_bits(dt) / 8;
  uint64_t bits = 0;
  std::memcpy(&bits, t.bytes(), bytes);
  if (is_signed_int(dt) && bytes < 8 && (bits >> (8 * bytes - 1)) & 1) bits |= ~uint64_t{0} << (8 * bytes);
  return kb.iconst(static_cast<int64_t>(bits), dt);
}

bool Lowering::depends_on_active(const std::vector<Ix>& idx) {
  if (active_loops_.empty()) return false;
  for (const Ix& x : idx) {
    const std::vector<int>& ls = kb.loops_of(kb.ix_expr(x));
    for (int l : ls)
      if (std::find(active_loops_.begin(), active_loops_.end(), l) != active_loops_.end()) return true;
  }
  return false;
}

int Lowering::elem(ValueId v, const std::vector<Ix>& idx) {
  std::string key = std::to_string(v) + "/" + std::to_string(load_guard_);
  for (const Ix& x : idx) {
    key += "|" + std::to_string(x.constant);
    for (auto [a, c] : x.terms) key += "," + std::to_string(a) + "*" + std::to_string(c);
  }
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  int r;
  const int b = S.buffer_of[v];
  const bool sink = is_sink(v);
  if (sink && !computed_sinks_.insert(v).second) sink_recomputed = true;
  if (b >= 0 && !sink) {
    const Buffer& buf = S.prog.buffers[b];
    Ix flat = buf.sizes.empty() || numel(buf.sizes) == 1 ? kb.ix_const(0)
                                                         : kb.linearize(idx, contiguous_strides(buf.sizes));
    r = kb.load(arg(b), buf.dtype, kb.ix_expr(flat), load_guard_);
  } else {
    if (!sink && costly_broadcast(v)) needs_materialization = v;
    const size_t before = k_.exprs.size();
    r = compute(v, idx);
    if (!sink) {
      int& c = inlined_cost[v];
      c = std::max(c, static_cast<int>(k_.exprs.size() - before));
    }
  }
  memo_.emplace(std::move(key), r);
  return r;
}

// A transcendental function (sin, exp, erf, ...), a rounding to bf16, or a round trip of f32
// through f16 or bf16, of a value this kernel reads broadcast or gathered, at least
// kMaxBroadcastRecompute times per element of the value: materializing it computes each
// element once (RoPE's cos and sin of [seq, d/2] angles were otherwise computed for every head
// and both halves of every row: 24% of Qwen3's prefill; a convolution's im2col gather rounded
// each input element once per tap under --precision, which doubled the gather's time in MNIST's
// tinyconv training). A round trip is stored as its f32 result, not as 16-bit values: an f16
// buffer cost more in conversions than the rounding it saved (tinyconv's f16 step went from
// 7.5 to 10.5 ms with one).
bool Lowering::costly_broadcast(ValueId v) const {
  const Value& val = S.g.values[v];
  if (val.producer < 0) return false;
  const Node& n = S.g.nodes[val.producer];
  const Op op = n.op;
  const UnaryMathOp* row = unary_math(op);
  // (a bf16 rounding that is only widened back is left to the round trip below)
  bool widened_only = !S.consumers(v).empty();
  for (int c : S.consumers(v))
    widened_only = widened_only && S.g.nodes[c].op == Op::Cast && S.g.values[S.g.nodes[c].outputs[0]].type.dtype == DType::f32;
  const bool rounding = op == Op::Cast && val.type.dtype == DType::bf16 &&
                        S.g.type(n.inputs[0]).dtype == DType::f32 && !widened_only;
  // An f32 value rounded through f16 or bf16 (autocast's widened form) is materialized as the
  // f32 round trip, so the gather reads floats and converts nothing: the f16 rounding inlined
  // into tinyconv's im2col gather, a loop GCC does not vectorize (its 64-bit indices), was 2.5
  // of the f16 step's 9.3 ms against the f32 gather's 0.6; a bf16 buffer there still cost the
  // gather a scalar widening per tap (0.73 against 0.36 ms under load).
  bool round_trip = false;
  if (op == Op::Cast && val.type.dtype == DType::f32) {
    const Value& narrow = S.g.values[n.inputs[0]];
    round_trip = (narrow.type.dtype == DType::f16 || narrow.type.dtype == DType::bf16) && narrow.producer >= 0 &&
                 S.g.nodes[narrow.producer].op == Op::Cast && S.g.type(S.g.nodes[narrow.producer].inputs[0]).dtype == DType::f32;
  }
  if (op != Op::Pow && !(row && row->transcendental) && !rounding && !round_trip) return false;
  // a rounding this kernel only moves into a store of its type (a narrow convolution's im2col
  // gather) is rounded by the store's conversion, once per element stored: materializing it
  // made the gather widen 16-bit values one at a time (tinyconv's conv2 im2col 0.78 ms against
  // f32's 0.49)
  if (rounding && moved_into_store(v)) return false;
  // Inside a reduction the count depends on which domain loops the reduction is hoisted out
  // of (decided later); softmax's exp in its sum, for one, runs once per element.
  if (!active_loops_.empty()) return false;
  int64_t iterations = 1;
  for (int l = 0; l < k_.domain_rank; ++l) iterations *= k_.loops[l].extent;
  return iterations >= kMaxBroadcastRecompute * numel(*static_sizes(val.type.shape));
}

// Whether v is a buffer this kernel loads, or a view of one (reshaped, sliced, transposed or
// broadcast): reading v is one load, whatever its index.
bool Lowering::view_of_buffer(ValueId v) const {
  for (int steps = 0; steps < 16; ++steps) {
    if (S.buffer_of[v] >= 0) return !is_sink(v);
    const int p = S.g.values[v].producer;
    if (p < 0) return false;
    const Op op = S.g.nodes[p].op;
    if (op != Op::Reshape && op != Op::StridedSlice && op != Op::Transpose && op != Op::Expand) return false;
    v = S.g.nodes[p].inputs[0];
  }
  return false;
}

// Whether a value this kernel stores is v moved without arithmetic (gathered, reshaped,
// sliced, transposed or broadcast), in v's type.
bool Lowering::moved_into_store(ValueId v) const {
  const DType dt = S.g.values[v].type.dtype;
  for (ValueId x : sinks_) {
    while (x != v && S.g.values[x].producer >= 0 && S.g.values[x].type.dtype == dt) {
      const Op op = S.g.nodes[S.g.values[x].producer].op;
      if (op != Op::Gather && op != Op::Reshape && op != Op::StridedSlice && op != Op::Transpose && op != Op::Expand)
        break;
      x = S.g.nodes[S.g.values[x].producer].inputs[0];
    }
    if (x == v) return true;
  }
  return false;
}

int Lowering::reduce_value(const Node& n, ValueId v, const std::vector<Ix>& idx) {
  const Sizes in = *static_sizes(S.g.type(n.inputs[0]).shape);
  const DType out_dt = S.g.type(v).dtype;
  std::vector<int64_t> axes;
  bool keep = n.attrs.i("keepdims", 1) != 0;
  if (op_info(n.op).family == OpFamily::argreduce) {
    axes = {n.attrs.i("axis", 0)};
  } else {
    axes = n.attrs.ints("axes");
  }
  for (int64_t& a : axes)
    if (a < 0) a += static_cast<int64_t>(in.size());
  std::vector<Ix> in_idx(in.size());
  std::vector<int> loops;
  size_t j = 0;
  for (size_t d = 0; d < in.size(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    if (reduced) {
      if (in[d] == 1) {
        in_idx[d] = kb.ix_const(0);
      } else {
        int l = kb.add_loop(in[d]);
        loops.push_back(l);
        in_idx[d] = kb.ix_loop(l);
      }
      if (keep) ++j;
    } else {
      in_idx[d] = idx[j++];
    }
  }
  if (loops.empty()) {
    if (op_info(n.op).family == OpFamily::argreduce) return kb.iconst(0, DType::i64);
    return kb.cast(elem(n.inputs[0], in_idx), out_dt);
  }
  active_loops_.insert(active_loops_.end(), loops.begin(), loops.end());
  int body = elem(n.inputs[0], in_idx);
  active_loops_.resize(active_loops_.size() - loops.size());
  const int64_t select_last = op_info(n.op).family == OpFamily::argreduce ? n.attrs.i("select_last_index", 0) : 0;
  return kb.reduce(n.op, body, loops, out_dt, select_last);
}

int Lowering::dot_value(const Node& n, const std::vector<Ix>& idx) {
  const Sizes ls = *static_sizes(S.g.type(n.inputs[0]).shape);
  const Sizes rs = *static_sizes(S.g.type(n.inputs[1]).shape);
  auto lb = n.attrs.ints("lhs_batch"), rb = n.attrs.ints("rhs_batch");
  auto lc = n.attrs.ints("lhs_contract"), rc = n.attrs.ints("rhs_contract");
  std::vector<Ix> li(ls.size()), ri(rs.size());
  size_t j = 0;
  for (size_t i = 0; i < lb.size(); ++i) {
    li[lb[i]] = idx[j];
    ri[rb[i]] = idx[j];
    ++j;
  }
  std::vector<int> loops;
  for (size_t i = 0; i < lc.size(); ++i) {
    if (ls[lc[i]] == 1) {
      li[lc[i]] = ri[rc[i]] = kb.ix_const(0);
      continue;
    }
    int l = kb.add_loop(ls[lc[i]]);
    loops.push_back(l);
    li[lc[i]] = ri[rc[i]] = kb.ix_loop(l);
  }
  auto in = [](const std::vector<int64_t>& v, size_t d) { return std::find(v.begin(), v.end(), static_cast<int64_t>(d)) != v.end(); };
  for (size_t d = 0; d < ls.size(); ++d)
    if (!in(lb, d) && !in(lc, d)) li[d] = idx[j++];
  for (size_t d = 0; d < rs.size(); ++d)
    if (!in(rb, d) && !in(rc, d)) ri[d] = idx[j++];
  const DType dt = S.g.type(n.outputs[0]).dtype;
  const DType acc = (dt == DType::f16 || dt == DType::bf16) ? DType::f32 : dt;
  active_loops_.insert(active_loops_.end(), loops.begin(), loops.end());
  int a = kb.cast(elem(n.inputs[0], li), acc);
  int b = kb.cast(elem(n.inputs[1], ri), acc);
  active_loops_.resize(active_loops_.size() - loops.size());
  int prod = kb.binary(Op::Mul, a, b, acc);
  if (loops.empty()) return kb.cast(prod, dt);
  return kb.cast(kb.reduce(Op::ReduceSum, prod, loops, acc), dt);
}

int Lowering::compute(ValueId v, const std::vector<Ix>& idx) {
  const Value& val = S.g.values[v];
  const Node& n = S.g.nodes[val.producer];
  if (n.origin >= 0 && std::find(k_.origins.begin(), k_.origins.end(), n.origin) == k_.origins.end())
    k_.origins.push_back(n.origin);
  const DType dt = val.type.dtype;
  auto in_sizes = [&](int i) { return *static_sizes(S.g.type(n.inputs[i]).shape); };
  const Sizes out = *static_sizes(val.type.shape);
  if (is_reduce_like(n.op) && !is_sink(v)) {
    if (depends_on_active(idx)) {
      needs_materialization = v;  // a reduction recomputed inside another reduction's loop
      return kb.iconst(0);
    }
    inlined_reductions.insert(v);
  }
  switch (op_info(n.op).family) {
    case OpFamily::source: {
      if (n.op == Op::Constant) return scalar_const(*n.attrs.tensor("value"), dt);
      if (n.op == Op::Iota) {
        int64_t axis = n.attrs.i("axis");
        if (axis < 0) axis += static_cast<int64_t>(idx.size());
        return kb.cast(kb.ix_expr(idx[axis]), dt);
      }
      if (n.op == Op::Random) {
        kir::Expr e{kir::ExprKind::random, dt};
        e.op = n.attrs.s("dist") == "normal" ? Op::Mul : Op::Add;
        e.a = kb.ix_expr(kb.linearize(idx, contiguous_strides(out)));
        e.ival = n.attrs.i("seed", 0);
        e.fval = n.attrs.f("a", 0.0);
        e.fval2 = n.attrs.f("b", 1.0);
        return kb.add(e);
      }
      break;
    }
    case OpFamily::unary:
      if (n.op == Op::IsInf)  // which infinities count travel in ival (positive) and ival2 (negative)
        return kb.unary(n.op, elem(n.inputs[0], idx), dt, n.attrs.i("detect_positive", 1),
                        n.attrs.i("detect_negative", 1));
      return kb.unary(n.op, elem(n.inputs[0], idx), dt);
    case OpFamily::binary:
    case OpFamily::compare:
    case OpFamily::logical: {
      int a = elem(n.inputs[0], idx), b = elem(n.inputs[1], idx);
      if (n.op == Op::Mod && n.attrs.i("fmod", 0)) return kb.binary(Op::Mod, a, b, dt);
      if (n.op == Op::Mod) {
        // fmod=0 (Python %): encoded as a remainder followed by a sign fix in the renderer
        kir::Expr e{kir::ExprKind::binary, dt};
        e.op = Op::Mod;
        e.a = a;
        e.b = b;
        e.ival = 1;  // floored
        return kb.add(e);
      }
      return kb.binary(n.op, a, b, dt);
    }
    case OpFamily::ternary:
      return kb.select(elem(n.inputs[0], idx), elem(n.inputs[1], idx), elem(n.inputs[2], idx));
    case OpFamily::cast:
      return kb.cast(elem(n.inputs[0], idx), dt);
    case OpFamily::reduce:
    case OpFamily::argreduce:
      return reduce_value(n, v, idx);
    case OpFamily::contraction:
      return dot_value(n, idx);
    default: break;
  }
  switch (n.op) {
    case Op::Reshape: {
      Sizes in = in_sizes(0);
      Ix flat = kb.linearize(idx, contiguous_strides(out));
      return elem(n.inputs[0], kb.unravel(flat, in));
    }
    case Op::Transpose: {
      auto perm = n.attrs.ints("perm");
      std::vector<Ix> in(idx.size());
      for (size_t i = 0; i < perm.size(); ++i) in[perm[i] < 0 ? perm[i] + perm.size() : perm[i]] = idx[i];
      return elem(n.inputs[0], in);
    }
    case Op::Expand: {
      Sizes in = in_sizes(0);
      std::vector<Ix> ii(in.size());
      for (size_t i = 0; i < in.size(); ++i) ii[i] = in[i] == 1 ? kb.ix_const(0) : idx[i];
      return elem(n.inputs[0], ii);
    }
    case Op::StridedSlice: {
      auto starts = n.attrs.ints("starts"), steps = n.attrs.ints("steps");
      std::vector<Ix> ii(idx.size());
      for (size_t i = 0; i < idx.size(); ++i) ii[i] = kb.ix_add(kb.ix_const(starts[i]), kb.ix_scale(idx[i], steps[i]));
      return elem(n.inputs[0], ii);
    }
    case Op::Pad: {
      Sizes in = in_sizes(0);
      auto pads = n.attrs.ints("pads");
      const size_t r = in.size();
      std::vector<Ix> ii(r);
      int cond = -1;
      // a view of a buffer is read at the shifted indices themselves by loads guarded by the
      // bounds test (a masked load once vectorized; col2im's nine shifted taps over rows of 13
      // went from 0.85 to 0.25 ms); anything computed is read at clamped indices, in bounds
      const bool guarded = view_of_buffer(n.inputs[0]);
      for (size_t i = 0; i < r; ++i) {
        Ix j = kb.ix_add(idx[i], kb.ix_const(-pads[i]));
        auto [lo, hi] = kb.ix_range(j);
        if (lo < 0 || hi >= in[i]) {
          int je = kb.ix_expr(j);
          int c = -1;
          if (lo < 0) c = kb.binary(Op::GreaterEqual, je, kb.iconst(0), DType::boolean);
          if (hi >= in[i]) {
            int c2 = kb.binary(Op::Less, je, kb.iconst(in[i]), DType::boolean);
            c = c < 0 ? c2 : kb.binary(Op::And, c, c2, DType::boolean);
          }
          cond = cond < 0 ? c : kb.binary(Op::And, cond, c, DType::boolean);
          j = guarded ? kb.ix_assume(j, 0, in[i] - 1) : kb.ix_clamp(j, 0, in[i] - 1);
        }
        ii[i] = j;
      }
      if (cond < 0) return elem(n.inputs[0], ii);
      const int outer_guard = load_guard_;
      if (guarded) load_guard_ = outer_guard < 0 ? cond : kb.binary(Op::And, outer_guard, cond, DType::boolean);
      const int x = elem(n.inputs[0], ii);
      load_guard_ = outer_guard;
      return kb.select(cond, x, typed_const(n.attrs.f("value", 0.0), dt));
    }
    case Op::Concat: {
      const int64_t ax = n.attrs.i("axis");
      auto [lo, hi] = kb.ix_range(idx[ax]);
      int64_t offset = 0;
      struct Part { int64_t begin, end; int input; };
      std::vector<Part> parts;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        int64_t len = in_sizes(static_cast<int>(k))[ax];
        if (len > 0 && offset + len > lo && offset <= hi) parts.push_back({offset, offset + len, static_cast<int>(k)});
        offset += len;
      }
      int result = -1;
      int je = parts.size() > 1 ? kb.ix_expr(idx[ax]) : -1;
      for (size_t p = parts.size(); p-- > 0;) {
        std::vector<Ix> ii = idx;
        ii[ax] = kb.ix_clamp(kb.ix_add(idx[ax], kb.ix_const(-parts[p].begin)), 0, parts[p].end - parts[p].begin - 1);
        int val = elem(n.inputs[parts[p].input], ii);
        if (result < 0) {
          result = val;
        } else {
          int c = kb.binary(Op::Less, je, kb.iconst(parts[p].end), DType::boolean);
          result = kb.select(c, val, result);
        }
      }
      return result;
    }
    case Op::Gather: {
      const int64_t ax = n.attrs.i("axis");
      Sizes data = in_sizes(0);
      const int64_t ri = S.g.type(n.inputs[1]).rank();
      std::vector<Ix> ind(idx.begin() + ax, idx.begin() + ax + ri);
      int iv = kb.cast(elem(n.inputs[1], ind), DType::i64);
      const int64_t len = data[ax];
      std::vector<Ix> di(idx.begin(), idx.begin() + ax);
      if (auto r = S.constant_range(n.inputs[1]); r && r->first >= 0 && r->second < len) {
        // a constant table inside the axis (im2col, pooling taps): nothing to wrap or clamp,
        // which spares the gather loop a third of its work
        di.push_back(kb.ix_opaque(iv, r->first, r->second));
        di.insert(di.end(), idx.begin() + ax + ri, idx.end());
        return elem(n.inputs[0], di);
      }
      int neg = kb.binary(Op::Less, iv, kb.iconst(0), DType::boolean);
      int wrapped = kb.select(neg, kb.binary(Op::Add, iv, kb.iconst(len), DType::i64), iv);
      kir::Expr cl{kir::ExprKind::clamp, DType::i64};
      cl.a = wrapped;
      cl.ival = 0;
      cl.ival2 = len - 1;
      int clamped = kb.add(cl);
      di.push_back(kb.ix_opaque(clamped, 0, len - 1));
      di.insert(di.end(), idx.begin() + ax + ri, idx.end());
      return elem(n.inputs[0], di);
    }
    default: break;
  }
  needs_materialization = v;
  return kb.iconst(0);
}

// ---------------- Scheduler ----------------

std::optional<std::pair<int64_t, int64_t>> Scheduler::constant_range(ValueId v) {
  auto it = constant_ranges_.find(v);
  if (it != constant_ranges_.end()) return it->second;
  std::optional<std::pair<int64_t, int64_t>> r;
  const int32_t p = g.values[static_cast<size_t>(v)].producer;
  const Tensor* t = p >= 0 && g.nodes[static_cast<size_t>(p)].op == Op::Constant ? g.nodes[static_cast<size_t>(p)].attrs.tensor("value") : nullptr;
  if (t && is_int(t->dtype()) && t->numel() > 0) {
    double lo = t->get_f64(0), hi = lo;
    for (int64_t i = 1; i < t->numel(); ++i) {
      const double x = t->get_f64(i);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    constexpr double kExact = 9007199254740992.0;  // 2^53: every integer up to it is a double
    if (lo > -kExact && hi < kExact) r = std::pair{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  }
  constant_ranges_.emplace(v, r);
  return r;
}

ValueId Scheduler::f16_cast_source(ValueId v) const {
  auto cast_input = [&](ValueId x, DType to) {
    const int p = g.values[x].producer;
    if (p < 0 || g.type(x).dtype != to) return kNoValue;
    const Node& n = g.nodes[p];
    return n.op == Op::Cast && n.inputs.size() == 1 ? n.inputs[0] : kNoValue;
  };
  const ValueId narrow = g.type(v).dtype == DType::f32 ? cast_input(v, DType::f32) : v;
  if (narrow == kNoValue) return kNoValue;
  const ValueId u = cast_input(narrow, DType::f16);
  return u != kNoValue && g.type(u).dtype == DType::f32 ? u : kNoValue;
}

kir::NativeKernel Scheduler::describe_native(int ni) const {
  const Node& n = g.nodes[ni];
  kir::NativeKernel k;
  k.op = n.op;
  k.attrs = n.attrs;
  for (ValueId v : n.inputs) k.input_types.push_back(g.type(v));
  for (ValueId v : n.outputs) k.output_types.push_back(g.type(v));
  if (n.origin >= 0) k.origins.push_back(n.origin);
  return k;
}

void Scheduler::init_forced() {
  const size_t nv = g.values.size();
  forced.assign(nv, 0);
  consumers_.assign(nv, {});
  output_count_.assign(nv, 0);
  native_reads_.assign(g.nodes.size(), {});
  native_reads_f16_.assign(g.nodes.size(), {});
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!n.native) continue;
    native_reads_[i] = n.inputs;
    native_reads_f16_[i].assign(n.inputs.size(), 0);
    if (!opts.native_reads_f32_as_f16) continue;
    const kir::NativeKernel k = describe_native(static_cast<int>(i));
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      const ValueId u = f16_cast_source(n.inputs[j]);
      if (u == kNoValue) continue;
      // A round trip (the widened form) only of a value the program does not compute (an
      // input, a parameter): a computed value's rounding is nearly free in the kernel that
      // computes it, where each product reading it would convert it again as it packs
      // (MiniLM under --precision f16: a layer norm's output read by the query, key and value
      // products cost 2% of the model's time that way).
      const int producer = g.values[u].producer;
      const bool round_trip = g.type(n.inputs[j]).dtype == DType::f32;
      if (round_trip && producer >= 0 && g.nodes[producer].op != Op::Param) continue;
      if (!opts.native_reads_f32_as_f16(k, static_cast<int>(j))) continue;
      native_reads_[i][j] = u;
      native_reads_f16_[i][j] = 1;
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].native ? native_reads_[i] : g.nodes[i].inputs) consumers_[v].push_back(static_cast<int>(i));
  for (ValueId v : g.inputs) forced[v] = 1;
  for (ValueId v : g.outputs) {
    forced[v] = 1;
    ++output_count_[v];
  }
  for (const Node& n : g.nodes) {
    if (n.op == Op::Param) forced[n.outputs[0]] = 1;
    if (n.op == Op::Constant && n.attrs.tensor("value")->numel() > 1) forced[n.outputs[0]] = 1;
    if (n.native || n.op == Op::ScatterAdd || n.op == Op::Scatter) {
      for (ValueId v : n.native ? native_reads_[&n - g.nodes.data()] : n.inputs) forced[v] = 1;
      for (ValueId v : n.outputs) forced[v] = 1;
    }
  }
  // Bounded fusion depth (kMaxFusionDepth): the longest chain of values not yet materialized
  // that ends at each value, nodes in topological order; a value at the bound is materialized
  // and starts the count again. Values materialized later only shorten the chains.
  std::vector<int> depth(nv, 0);
  for (const Node& n : g.nodes) {
    int d = 0;
    for (ValueId v : n.inputs)
      if (!forced[v]) d = std::max(d, depth[v]);
    for (ValueId v : n.outputs) {
      depth[v] = forced[v] ? 0 : d + 1;
      if (depth[v] >= kMaxFusionDepth) {
        forced[v] = 1;
        depth[v] = 0;
      }
    }
  }
}

int Scheduler::new_buffer(ValueId v, BufferKind kind) {
  Buffer b;
  b.dtype = g.type(v).dtype;
  b.sizes = *static_sizes(g.type(v).shape);
  b.kind = kind;
  b.name = g.values[v].name;
  prog.buffers.push_back(std::move(b));
  return static_cast<int>(prog.buffers.size()) - 1;
}

Status Scheduler::assign_buffers() {
  prog = kir::KernelProgram{};
  buffer_of.assign(g.values.size(), -1);
  written_.clear();
  stored_.assign(g.values.size(), 0);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    ValueId v = g.inputs[i];
    if (buffer_of[v] >= 0) return error(ErrorCode::invalid_argument, "graph input listed twice");
    buffer_of[v] = new_buffer(v, BufferKind::input);
    prog.buffers.back().io_index = static_cast<int>(i);
    prog.inputs.push_back(buffer_of[v]);
  }
  for (const Node& n : g.nodes) {
    for (ValueId v : n.outputs) {
      if (!forced[v]) continue;
      if (n.op == Op::Param) {
        buffer_of[v] = new_buffer(v, BufferKind::weight);
        prog.buffers.back().name = n.attrs.s("name");
      } else if (n.op == Op::Constant) {
        buffer_of[v] = new_buffer(v, BufferKind::constant);
        prog.buffers.back().data = *n.attrs.tensor("value");
      } else if (n.op == Op::Reshape && buffer_of[n.inputs[0]] >= 0 && output_count_[v] == 0) {
        // a reshape of a materialized value is the same bytes
        buffer_of[v] = new_buffer(v, BufferKind::intermediate);
        prog.buffers.back().alias_of = buffer_of[n.inputs[0]];
      } else {
        buffer_of[v] = new_buffer(v, BufferKind::intermediate);
      }
    }
  }
  return Status::ok();
}

int Scheduler::add_copy_kernel(int src, int dst) {
  const Buffer& b = prog.buffers[dst];
  // an empty tensor has nothing to copy (a kernel of one element would read and write past both
  // buffers: the WGSL and HLSL range checks caught it reading an i64 that was never there)
  const int64_t n = numel(b.sizes);
  if (n == 0) return -1;
  GeneratedKernel k;
  k.name = cat("k", prog.generated.size());
  KernelBuilder kb(k);
  int loop = kb.add_loop(n);
  k.domain_rank = 1;
  k.args = {src, dst};
  int idx = kb.ix_expr(kb.ix_loop(loop));
  int val = kb.load(0, b.dtype, idx);
  k.stores.push_back({1, idx, val});
  mark_written(dst);
  prog.generated.push_back(std::move(k));
  prog.steps.push_back({false, static_cast<int>(prog.generated.size()) - 1});
  return static_cast<int>(prog.generated.size()) - 1;
}

Expected<bool> Scheduler::build_kernel(ValueId v, int out_buffer, bool may_defer) {
  std::map<ValueId, std::set<int>>& reduce_users = *reduce_users_;
  const Sizes out = *static_sizes(g.type(v).shape);
  if (numel(out) == 0) return true;  // nothing to write
  stored_[v] = 1;  // no other kernel may take it as a sibling now
  // Domain: the output's dims, size-1 dims dropped, adjacent dims merged when that keeps
  // every index free of divisions (so the innermost loop is long and contiguous).
  std::vector<std::vector<int>> groups;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != 1) groups.push_back({static_cast<int>(i)});
  // Each trial owns its kernel and the lowering that built it.
  struct Trial {
    GeneratedKernel k;
    std::unique_ptr<Lowering> l;
    int divs = 0;
  };
  auto build = [&](const std::vector<std::vector<int>>& grp, const std::vector<ValueId>& siblings = {}) {
    auto t = std::make_unique<Trial>();
    t->l = std::make_unique<Lowering>(*this, t->k, v);
    for (ValueId s : siblings) t->l->add_sink(s);
    Lowering& L = *t->l;
    std::vector<Ix> idx(out.size(), L.kb.ix_const(0));
    for (const auto& gr : grp) {
      Sizes sub;
      for (int d : gr) sub.push_back(out[d]);
      int loop = L.kb.add_loop(numel(sub));
      std::vector<Ix> parts = L.kb.unravel(L.kb.ix_loop(loop), sub);
      for (size_t j = 0; j < gr.size(); ++j) idx[gr[j]] = parts[j];
    }
    if (grp.empty()) L.kb.add_loop(1);
    t->k.domain_rank = static_cast<int>(t->k.loops.size());
    int val = L.elem(v, idx);
    Ix flat = L.kb.linearize(idx, contiguous_strides(out));
    int a = L.arg(out_buffer);
    const int at = L.kb.ix_expr(flat);
    t->k.stores.push_back({a, at, val});
    for (ValueId s : siblings) {
      const int sv = L.elem(s, idx);
      t->k.stores.push_back({L.arg(buffer_of[s]), at, sv});
    }
    for (const auto& e : t->k.exprs) t->divs += e.kind == kir::ExprKind::idiv || e.kind == kir::ExprKind::imod;
    if (L.needs_materialization != kNoValue) t->divs = 1 << 30;
    return t;
  };
  std::unique_ptr<Trial> best = build(groups);
  if (best->l->needs_materialization != kNoValue) {
    forced[best->l->needs_materialization] = 1;
    return false;
  }
  for (int i = static_cast<int>(groups.size()) - 2; i >= 0; --i) {
    auto trial = groups;
    trial[i].insert(trial[i].end(), trial[i + 1].begin(), trial[i + 1].end());
    trial.erase(trial.begin() + i + 1);
    if (opts.max_loop_merge > 0 && static_cast<int>(trial[i].size()) > opts.max_loop_merge) continue;
    std::unique_ptr<Trial> t = build(trial);
    if (t->divs <= best->divs) {
      groups = trial;
      best = std::move(t);
    }
  }
  // Multi-output fusion: each sibling whose expression the kernel can compute at the element
  // it stores, from buffers already written (the kernel's own stores are not yet): the values
  // deferred to this one first (computed on the way to v, or after it), then v's candidates.
  enum class Fit { ok, unwritten, other };
  auto fits = [&](const Trial& t) {
    if (t.l->needs_materialization != kNoValue || t.l->sink_recomputed) return Fit::other;
    std::vector<int> stored_roots;
    for (const kir::Store& st : t.k.stores) stored_roots.push_back(root(t.k.args[st.buffer]));
    Fit f = Fit::ok;
    for (const kir::Expr& e : t.k.exprs) {
      if (e.kind != kir::ExprKind::load) continue;
      const int b = root(t.k.args[e.buffer]);
      if (std::find(stored_roots.begin(), stored_roots.end(), b) != stored_roots.end()) return Fit::other;
      if (!available(b)) f = Fit::unwritten;
    }
    return f;
  };
  std::vector<ValueId> siblings, early;
  for (const auto& [d, partner] : deferred_)
    if (partner == v) early.push_back(d);
  for (ValueId d : early) deferred_.erase(d);
  // together first (v may read several of them), else one by one; one that does not fit gets
  // its own kernel, before this one
  if (std::unique_ptr<Trial> t = early.empty() ? nullptr : build(groups, early); t && fits(*t) == Fit::ok) {
    best = std::move(t);
    siblings = early;
  } else {
    for (ValueId d : early) {
      siblings.push_back(d);
      std::unique_ptr<Trial> t1 = build(groups, siblings);
      if (fits(*t1) == Fit::ok) {
        best = std::move(t1);
      } else {
        siblings.pop_back();
        RLX_ASSIGN_OR_RETURN(bool built, build_kernel(d, buffer_of[d], false));
        if (!built) return false;
      }
    }
  }
  const size_t merged_early = siblings.size();
  for (ValueId s : sibling_candidates(v)) {
    siblings.push_back(s);
    std::unique_ptr<Trial> t = build(groups, siblings);
    const Fit f = fits(*t);
    if (f == Fit::ok) {
      best = std::move(t);
      continue;
    }
    siblings.pop_back();
    // s needs a value not computed yet: leave v (and what was deferred to it) to s's kernel
    if (f == Fit::unwritten && may_defer && siblings.size() == merged_early && deferred_.size() < 64) {
      for (ValueId d : siblings) deferred_[d] = s;
      deferred_[v] = s;
      return true;
    }
  }
  // claimed before the kernels of deferred values it reads are built (they must not store
  // what this kernel stores), and those are built first
  for (ValueId s : siblings) stored_[s] = 1;
  std::vector<int> reads;
  for (const kir::Expr& e : best->k.exprs)
    if (e.kind == kir::ExprKind::load) reads.push_back(best->k.args[e.buffer]);
  RLX_ASSIGN_OR_RETURN(bool flushed, flush_deferred(reads));
  if (!flushed) return false;
  for (const kir::Store& st : best->k.stores) mark_written(best->k.args[st.buffer]);
  // Hoisting: domain loops that reductions depend on go outermost, so each reduction is
  // computed once per row and not once per element.
  GeneratedKernel& k = best->k;
  std::vector<char> reduce_dep(k.domain_rank, 0);
  for (size_t e = 0; e < k.exprs.size(); ++e) {
    if (k.exprs[e].kind != kir::ExprKind::reduce) continue;
    for (int l : best->l->kb.loops_of(static_cast<int>(e)))
      if (l < k.domain_rank) reduce_dep[l] = 1;
  }
  std::vector<int> order;
  for (int l = 0; l < k.domain_rank; ++l)
    if (reduce_dep[l]) order.push_back(l);
  for (int l = 0; l < k.domain_rank; ++l)
    if (!reduce_dep[l]) order.push_back(l);
  std::vector<int> new_pos(k.loops.size());
  for (size_t i = 0; i < k.loops.size(); ++i) new_pos[i] = static_cast<int>(i);
  std::vector<kir::Loop> loops = k.loops;
  for (int p = 0; p < k.domain_rank; ++p) {
    new_pos[order[p]] = p;
    loops[p] = k.loops[order[p]];
  }
  k.loops = loops;
  for (auto& e : k.exprs) {
    if (e.kind == kir::ExprKind::loop_var) e.loop = new_pos[e.loop];
  }
  for (ValueId r : best->l->inlined_reductions) reduce_users[r].insert(static_cast<int>(prog.generated.size()));
  for (auto [iv, cost] : best->l->inlined_cost) {
    inline_users[iv].insert(static_cast<int>(prog.generated.size()));
    if (cost > kMaxRecomputeExprs) {
      auto& [users, most] = expensive_users[iv];
      users.insert(static_cast<int>(prog.generated.size()));
      most = std::max(most, cost);
    }
  }
  k.name = cat("k", prog.generated.size());
  prog.generated.push_back(std::move(k));
  prog.steps.push_back({false, static_cast<int>(prog.generated.size()) - 1});
  return true;
}

Expected<bool> Scheduler::flush_deferred(const std::vector<int>& buffers) {
  for (;;) {
    ValueId next = kNoValue;
    for (const auto& [d, partner] : deferred_)
      for (int b : buffers)
        if (root(b) == root(buffer_of[d])) next = d;
    if (next == kNoValue) return true;
    deferred_.erase(next);
    RLX_ASSIGN_OR_RETURN(bool built, build_kernel(next, buffer_of[next], false));
    if (!built) return false;
  }
}

bool Scheduler::available(int b) const {
  b = root(b);
  const BufferKind kind = prog.buffers[b].kind;
  if (kind == BufferKind::input || kind == BufferKind::weight || kind == BufferKind::constant) return true;
  return static_cast<size_t>(b) < written_.size() && written_[b];
}

std::vector<ValueId> Scheduler::sibling_candidates(ValueId v) const {
  // A bounded walk: a sibling is a few inlined steps from v (a round trip is two casts).
  constexpr size_t kMaxVisited = 64;
  std::vector<ValueId> found;
  const auto shape = static_sizes(g.type(v).shape);
  if (!shape) return found;
  auto same_shape = [&](ValueId w) {
    const auto sw = static_sizes(g.type(w).shape);
    return sw && *sw == *shape;
  };
  std::vector<ValueId> queue{v};
  std::set<ValueId> seen{v};
  for (size_t qi = 0; qi < queue.size() && seen.size() < kMaxVisited; ++qi) {
    for (int ni : consumers(queue[qi])) {
      const Node& n = g.nodes[ni];
      if (n.native || n.op == Op::ScatterAdd || n.op == Op::Scatter) continue;
      for (ValueId w : n.outputs) {
        if (!seen.insert(w).second) continue;
        const int b = buffer_of[w];
        if (b < 0) {
          queue.push_back(w);
          continue;
        }
        const OpFamily f = op_info(n.op).family;
        const bool elementwise = f == OpFamily::unary || f == OpFamily::binary || f == OpFamily::compare ||
                                 f == OpFamily::logical || f == OpFamily::ternary || f == OpFamily::cast;
        if (elementwise && !stored_[w] && prog.buffers[b].alias_of < 0 && prog.buffers[b].kind == BufferKind::intermediate &&
            same_shape(w))
          found.push_back(w);
      }
    }
  }
  return found;
}

// A reduction that several kernels inline is computed once: either the reduction itself is
// materialized, or the last value computed from it that all those kernels inline, when that
// value is no larger than the reduction's input. The second keeps a layer norm one kernel:
// when its output is read by two generated kernels (a rounding cast for the next products and
// the residual add, under --precision), materializing its mean split it into five kernels
// (sum, centre, sum of squares, scale, and the cast), each a pass over the activations.
ValueId Scheduler::shared_reduction_target(ValueId r, const std::set<int>& kernels) const {
  auto in_all = [&](ValueId w) {
    auto it = inline_users.find(w);
    return it != inline_users.end() && std::includes(it->second.begin(), it->second.end(), kernels.begin(), kernels.end());
  };
  const Node& rn = g.nodes[g.values[r].producer];
  const auto in_sizes = static_sizes(g.type(rn.inputs[0]).shape);
  if (!in_sizes) return r;
  const int64_t bound = numel(*in_sizes);
  // the values computed from r that every such kernel inlines (a path from r to one passes only
  // through values those kernels inline, so the walk stays inside them)
  ValueId best = r;
  int best_node = -1;
  std::vector<ValueId> stack{r};
  std::set<ValueId> seen{r};
  while (!stack.empty()) {
    ValueId u = stack.back();
    stack.pop_back();
    for (int ni : consumers(u))
      for (ValueId w : g.nodes[ni].outputs) {
        if (forced[w] || !in_all(w) || !seen.insert(w).second) continue;
        stack.push_back(w);
        const auto sz = static_sizes(g.type(w).shape);
        if (sz && numel(*sz) <= bound && ni > best_node) {
          best = w;
          best_node = ni;
        }
      }
  }
  return best;
}

Status Scheduler::add_native(int ni) {
  const Node& n = g.nodes[ni];
  kir::NativeKernel k = describe_native(ni);
  k.name = cat("n", prog.natives.size());
  for (size_t j = 0; j < n.inputs.size(); ++j) {
    k.inputs.push_back(buffer_of[native_reads_[ni][j]]);
    // an f16 cast or round trip it rounds as it reads: its f32 source, as f16
    if (native_reads_f16_[ni][j]) k.input_types[j].dtype = DType::f16;
  }
  for (ValueId v : n.outputs) {
    k.outputs.push_back(buffer_of[v]);
    mark_written(buffer_of[v]);
  }
  prog.natives.push_back(std::move(k));
  prog.steps.push_back({true, static_cast<int>(prog.natives.size()) - 1});
  return Status::ok();
}

Status Scheduler::add_scatter(int ni) {
  const Node& n = g.nodes[ni];
  const int out = buffer_of[n.outputs[0]];
  if (const int copy = add_copy_kernel(buffer_of[n.inputs[0]], out); copy >= 0) {
    prog.generated[copy].origins.push_back(n.origin);
    // when the output is donated to the base (a cache updated in place) the copy is a no-op
    prog.generated[copy].skip_if_aliased = true;
  }
  // out[..., clamp(indices[j]), ...] (+)= updates[..., j, ...] over the updates' shape, serially
  GeneratedKernel k;
  k.name = cat("k", prog.generated.size());
  k.serial = true;
  KernelBuilder kb(k);
  const Sizes upd = *static_sizes(g.type(n.inputs[2]).shape);
  const Sizes ind = *static_sizes(g.type(n.inputs[1]).shape);
  const Sizes dst = *static_sizes(g.type(n.outputs[0]).shape);
  int loop = kb.add_loop(std::max<int64_t>(1, numel(upd)));
  k.domain_rank = 1;
  k.args = {buffer_of[n.inputs[1]], buffer_of[n.inputs[2]], out};
  std::vector<Ix> ui = kb.unravel(kb.ix_loop(loop), upd);
  const int64_t ax = n.attrs.i("axis");
  // batch_dims: the leading dims of the indices follow the base's (per-batch indices)
  const int64_t nb = n.attrs.i("batch_dims", 0);
  const int64_t ri = static_cast<int64_t>(ind.size()) - nb;
  std::vector<Ix> ii(ui.begin(), ui.begin() + nb);
  ii.insert(ii.end(), ui.begin() + ax, ui.begin() + ax + ri);
  int iv = kb.cast(kb.load(0, g.type(n.inputs[1]).dtype,
                           kb.ix_expr(ind.empty() ? kb.ix_const(0) : kb.linearize(ii, contiguous_strides(ind)))),
                   DType::i64);
  const int64_t len = dst[ax];
  int neg = kb.binary(Op::Less, iv, kb.iconst(0), DType::boolean);
  int wrapped = kb.select(neg, kb.binary(Op::Add, iv, kb.iconst(len), DType::i64), iv);
  kir::Expr cl{kir::ExprKind::clamp, DType::i64};
  cl.a = wrapped;
  cl.ival = 0;
  cl.ival2 = len - 1;
  int clamped = kb.add(cl);
  std::vector<Ix> di(ui.begin(), ui.begin() + ax);
  di.push_back(kb.ix_opaque(clamped, 0, len - 1));
  di.insert(di.end(), ui.begin() + ax + ri, ui.end());
  int val = kb.load(1, g.type(n.inputs[2]).dtype, kb.ix_expr(kb.linearize(ui, contiguous_strides(upd))));
  k.stores.push_back({2, kb.ix_expr(kb.linearize(di, contiguous_strides(dst))), val, n.op == Op::ScatterAdd});
  mark_written(out);
  if (n.origin >= 0) k.origins.push_back(n.origin);
  prog.generated.push_back(std::move(k));
  prog.steps.push_back({false, static_cast<int>(prog.generated.size()) - 1});
  return Status::ok();
}

Expected<kir::KernelProgram> Scheduler::run() {
  init_forced();
  for (int attempt = 0; attempt < 4 * static_cast<int>(g.values.size()) + 8; ++attempt) {
    RLX_TRY(assign_buffers());
    std::map<ValueId, std::set<int>> reduce_users;
    reduce_users_ = &reduce_users;
    deferred_.clear();
    expensive_users.clear();
    inline_users.clear();
    bool restart = false;
    for (size_t ni = 0; ni < g.nodes.size() && !restart; ++ni) {
      const Node& n = g.nodes[ni];
      if (n.native || n.op == Op::ScatterAdd || n.op == Op::Scatter) {
        std::vector<int> reads;
        for (ValueId v : n.native ? native_reads_[ni] : n.inputs) reads.push_back(buffer_of[v]);
        RLX_ASSIGN_OR_RETURN(bool flushed, flush_deferred(reads));
        if (!flushed) {
          restart = true;
          break;
        }
        RLX_TRY(n.native ? add_native(static_cast<int>(ni)) : add_scatter(static_cast<int>(ni)));
        continue;
      }
      for (ValueId v : n.outputs) {
        int b = buffer_of[v];
        if (b < 0 || n.op == Op::Param || (n.op == Op::Constant && forced[v])) continue;
        if (prog.buffers[b].alias_of >= 0 || stored_[v] || deferred_.count(v)) continue;
        RLX_ASSIGN_OR_RETURN(bool ok, build_kernel(v, b));
        if (!ok) {
          restart = true;
          break;
        }
      }
    }
    // what is still deferred (its sibling was stored by another kernel, or never built) gets
    // its own kernel
    while (!restart && !deferred_.empty()) {
      const ValueId d = deferred_.begin()->first;
      deferred_.erase(deferred_.begin());
      RLX_ASSIGN_OR_RETURN(bool ok, build_kernel(d, buffer_of[d], false));
      restart = !ok;
    }
    if (restart) continue;
    // A reduction inlined into several kernels is computed once instead.
    std::vector<ValueId> shared;
    for (const auto& [v, users] : reduce_users)
      if (users.size() > 1) shared.push_back(shared_reduction_target(v, users));
    for (ValueId v : shared) {
      forced[v] = 1;
      restart = true;
    }
    if (restart) continue;
    // So is the most expensive expression (over kMaxRecomputeExprs expressions) that several
    // kernels inline; one a round, since materializing it makes the values it is computed
    // from (a chain's earlier links, expensive too) read by its kernel alone.
    ValueId worst = kNoValue;
    int worst_cost = 0;
    for (const auto& [v, uc] : expensive_users)
      if (uc.first.size() > 1 && uc.second > worst_cost) {
        worst = v;
        worst_cost = uc.second;
      }
    if (worst != kNoValue) {
      forced[worst] = 1;
      continue;
    }
    // Graph outputs: each gets its own output buffer, written by the kernel that computes it
    // or copied when it is an input, a weight, a view, or listed twice.
    std::vector<char> claimed(prog.buffers.size(), 0);
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      ValueId v = g.outputs[i];
      int b = buffer_of[v];
      Buffer& buf = prog.buffers[b];
      if (buf.kind == BufferKind::intermediate && buf.alias_of < 0 && !claimed[b]) {
        buf.kind = BufferKind::output;
        buf.io_index = static_cast<int>(i);
        claimed[b] = 1;
        prog.outputs.push_back(b);
      } else {
        int ob = new_buffer(v, BufferKind::output);
        prog.buffers[ob].io_index = static_cast<int>(i);
        add_copy_kernel(b, ob);
        prog.outputs.push_back(ob);
      }
    }
    plan_memory(prog);
    return std::move(prog);
  }
  return error(ErrorCode::internal, "scheduling did not converge");
}

}  // namespace

Expected<kir::KernelProgram> schedule(const Graph& g, const ScheduleOptions& options) {
  for (const Value& v : g.values)
    if (!is_static(v.type.shape))
      return error(ErrorCode::shape_error, "scheduling needs static shapes, got ", v.type.to_string());
  Scheduler s(g, options);
  return s.run();
}

}  // namespace rlx::sched
