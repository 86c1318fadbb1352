// ONNX recurrent layers RNN, GRU and LSTM, unrolled over their static sequence length into
// MatMul and elementwise graph ops (forward, reverse and bidirectional; layout 0 and 1;
// GRU's linear_before_reset; LSTM peepholes; clip); over a length known only at run time (or
// past 4096 steps), each direction is a loop run by the host with one step as its body.
#include <cmath>

#include "onnx_internal.h"
#include "rlx/ir_text.h"

namespace rlx::onnx_import {
namespace {

enum class Cell { rnn, gru, lstm };

struct Act {
  std::string name;
  double alpha, beta;
};

Expected<ValueId> apply(Importer& m, OpBuilder& o, const Act& a, ValueId x) {
  if (a.name == "Tanh") return o.tanh(x);
  if (a.name == "Sigmoid") return o.sigmoid(x);
  if (a.name == "Relu") return o.relu(x);
  if (a.name == "HardSigmoid") {
    ValueId y = o.add(o.mul(x, o.scalar_like(a.alpha, x)), o.scalar_like(a.beta, x));
    return o.min(o.max(y, o.scalar_like(0, x)), o.scalar_like(1, x));
  }
  if (a.name == "LeakyRelu")
    return o.where(o.binary(Op::Less, x, o.scalar_like(0, x)), o.mul(x, o.scalar_like(a.alpha, x)), x);
  return m.fail(ErrorCode::unsupported, "activation '", a.name, "' is not supported");
}

// What one time step of a direction reads besides x_t, h and c (values of the graph the step
// is built in).
struct StepParams {
  Cell cell;
  int64_t H;
  ValueId rt, rb, pi, po, pf;  // R^T [H, G*H]; R's bias, LSTM peepholes (or kNoValue)
  const Act *f, *g, *hh;
  double clip;
  bool lbr;  // GRU's linear_before_reset
};

// One step: xt = x_t W^T (+ Wb) [B, G*H] -> h (and c for LSTM), built with `o` (the model's
// graph when unrolled, a loop body's otherwise).
Status cell_step(Importer& m, OpBuilder& o, const StepParams& p, ValueId xt, ValueId& h, ValueId& c) {
  const int64_t H = p.H;
  auto clipped = [&](ValueId v) {
    return p.clip > 0 ? o.min(o.max(v, o.scalar_like(-p.clip, v)), o.scalar_like(p.clip, v)) : v;
  };
  auto gate = [&](ValueId v, int k) { return o.slice(v, {k * H}, {(k + 1) * H}, {1}); };
  if (p.cell == Cell::rnn) {
    ValueId pre = o.add(xt, o.matmul(h, p.rt));
    if (p.rb != kNoValue) pre = o.add(pre, p.rb);
    RLX_ASSIGN_OR_RETURN(h, apply(m, o, *p.f, clipped(pre)));
  } else if (p.cell == Cell::gru) {
    ValueId hr = o.matmul(h, p.rt);
    if (p.rb != kNoValue) hr = o.add(hr, p.rb);
    RLX_ASSIGN_OR_RETURN(ValueId z, apply(m, o, *p.f, clipped(o.add(gate(xt, 0), gate(hr, 0)))));
    RLX_ASSIGN_OR_RETURN(ValueId r, apply(m, o, *p.f, clipped(o.add(gate(xt, 1), gate(hr, 1)))));
    ValueId hpart;
    if (p.lbr) {
      hpart = o.mul(r, gate(hr, 2));
    } else {
      ValueId rh = o.matmul(o.mul(r, h), o.slice(p.rt, {2 * H}, {3 * H}, {1}));
      hpart = p.rb != kNoValue ? o.add(rh, o.slice(p.rb, {2 * H}, {3 * H}, {0})) : rh;
    }
    RLX_ASSIGN_OR_RETURN(ValueId ht, apply(m, o, *p.g, clipped(o.add(gate(xt, 2), hpart))));
    h = o.add(o.mul(o.sub(o.scalar_like(1, z), z), ht), o.mul(z, h));
  } else {
    ValueId pre = o.add(xt, o.matmul(h, p.rt));
    if (p.rb != kNoValue) pre = o.add(pre, p.rb);
    ValueId ig = gate(pre, 0), og = gate(pre, 1), fg = gate(pre, 2), cg = gate(pre, 3);
    if (p.pi != kNoValue) ig = o.add(ig, o.mul(p.pi, c));
    if (p.pf != kNoValue) fg = o.add(fg, o.mul(p.pf, c));
    RLX_ASSIGN_OR_RETURN(ValueId i_, apply(m, o, *p.f, clipped(ig)));
    RLX_ASSIGN_OR_RETURN(ValueId f_, apply(m, o, *p.f, clipped(fg)));
    RLX_ASSIGN_OR_RETURN(ValueId c_, apply(m, o, *p.g, clipped(cg)));
    c = o.add(o.mul(f_, c), o.mul(i_, c_));
    if (p.po != kNoValue) og = o.add(og, o.mul(p.po, c));
    RLX_ASSIGN_OR_RETURN(ValueId o_, apply(m, o, *p.f, clipped(og)));
    RLX_ASSIGN_OR_RETURN(ValueId hc, apply(m, o, *p.hh, c));
    h = o.mul(o_, hc);
  }
  return Status::ok();
}

// One direction as a loop run by the host (the IR's loop op): for a sequence length known only
// at run time or longer than the unrolled form takes. The body computes step t (i, or S - 1 - i
// in reverse) from x_t W^T, gathered at t, and writes h into row t of the carried Y [S, B, H].
struct DirectionResult {
  ValueId y, h, c;
};
Expected<DirectionResult> recurrent_loop(Importer& m, const StepParams& p, bool reverse, ValueId xw, ValueId h0,
                                         ValueId c0, int d) {
  OpBuilder& o = m.o();
  const int64_t H = p.H;
  const bool lstm = p.cell == Cell::lstm;
  // Y starts as zeros [S, B, H]; the trip count is S, counted from the same columns
  ValueId cols = o.slice(xw, {0}, {H}, {2});
  ValueId y0 = o.cast(o.binary(Op::Less, cols, o.scalar_like(-INFINITY, cols)), o.dtype(xw));
  ValueId first = o.slice(cols, {0, 0}, {1, 1}, {1, 2});  // [S, 1, 1]
  ValueId ones = o.cast(o.unary(Op::Not, o.binary(Op::Less, first, o.scalar_like(-INFINITY, first))), DType::i64);
  ValueId steps = o.reduce_sum(ones, {0, 1, 2}, false);
  RLX_TRY(m.ok().with_context(m.where()));

  Graph body;
  body.name = "recurrence";
  ValueId bi = body.add_input("i", TensorType{DType::i64, {}});
  ValueId bcond = body.add_input("cond", TensorType{DType::boolean, {}});
  ValueId bh = body.add_input("h", o.type(h0));
  ValueId bc = lstm ? body.add_input("c", o.type(c0)) : kNoValue;
  ValueId by = body.add_input("y", o.type(y0));
  // the values the step reads from the enclosing graph
  std::vector<ValueId> outside{xw, p.rt};
  ValueId bxw = body.add_input("xw", o.type(xw));
  ValueId brt = body.add_input("rt", o.type(p.rt));
  auto pass = [&](ValueId v, const char* name) {
    if (v == kNoValue) return kNoValue;
    outside.push_back(v);
    return body.add_input(name, o.type(v));
  };
  StepParams bp = p;
  bp.rt = brt;
  bp.rb = pass(p.rb, "rb");
  bp.pi = pass(p.pi, "pi");
  bp.po = pass(p.po, "po");
  bp.pf = pass(p.pf, "pf");
  ValueId bsteps = pass(steps, "steps");
  {
    GraphBuilder gb(body);
    OpBuilder b(gb);
    ValueId t = reverse ? b.sub(b.sub(bsteps, b.scalar(1, DType::i64)), bi) : bi;
    ValueId t1 = b.reshape(t, {1});
    ValueId xt = b.op(Op::Squeeze, {b.gather(bxw, t1, 0)}, Attrs{{"axes", std::vector<int64_t>{0}}});
    ValueId h = bh, c = bc;
    RLX_TRY(cell_step(m, b, bp, xt, h, c));
    ValueId row = b.op(Op::Unsqueeze, {h}, Attrs{{"axes", std::vector<int64_t>{0}}});
    ValueId y = b.op(Op::Scatter, {by, t1, row}, Attrs{{"axis", int64_t{0}}});
    ValueId go = b.reshape(bcond, std::vector<int64_t>{});
    if (!b.ok()) return b.status().with_context(cat(m.where(), ": recurrence body"));
    body.outputs = {go, h};
    if (lstm) body.outputs.push_back(c);
    body.outputs.push_back(y);
  }
  std::vector<ValueId> ins{steps, o.scalar(1, DType::boolean), h0};
  if (lstm) ins.push_back(c0);
  ins.push_back(y0);
  ins.insert(ins.end(), outside.begin(), outside.end());
  const std::string count = cat(m.node->output_size() > 0 && !m.node->output(0).empty() ? m.node->output(0) : "rnn",
                                ".dir", d, ".count");
  std::vector<ValueId> outs = o.op_multi(Op::Loop, ins,
                                         Attrs{{"count", count}, {"body", print_graph(body)},
                                               {"num_state", int64_t{lstm ? 3 : 2}}, {"bounded", int64_t{1}}});
  RLX_TRY(m.ok().with_context(m.where()));
  return DirectionResult{lstm ? outs[2] : outs[1], outs[0], lstm ? outs[1] : kNoValue};
}

Status map_recurrent(Importer& m, Cell cell) {
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId w, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId rw, m.in(2));
  const int gates = cell == Cell::rnn ? 1 : cell == Cell::gru ? 3 : 4;
  const int64_t layout = m.ai("layout", 0);
  if (layout == 1) x = o.transpose(x, {1, 0, 2});
  if (!o.ok()) return o.status().with_context(m.where());
  const Shape xsh = o.shape(x);
  auto ws = static_sizes(o.shape(w));
  if (xsh.size() != 3 || !xsh[2].is_static() || !ws || ws->size() != 3)
    return m.fail(ErrorCode::unsupported, "needs a 3-D X with a static input size and a static 3-D W");
  // unrolled over a static length up to 4096 steps; otherwise a loop run by the host (the
  // sequence length, and the batch, may then be symbolic)
  const bool unroll = xsh[0].is_static() && xsh[1].is_static() && xsh[0].size() <= 4096;
  const int64_t S = xsh[0].is_static() ? xsh[0].size() : -1, B = xsh[1].is_static() ? xsh[1].size() : -1;
  const int64_t H = m.ai("hidden_size", (*ws)[1] / gates);
  if (H < 1 || H > (int64_t{1} << 20) || B > (int64_t{1} << 30)) return m.fail(ErrorCode::out_of_range, "hidden_size ", H, " or batch out of range");
  std::string dir = m.as("direction", "forward");
  const int dirs = dir == "bidirectional" ? 2 : 1;
  if ((*ws)[0] != dirs || (*ws)[1] != gates * H) return m.fail(ErrorCode::shape_error, "W has shape ", sizes_to_string(*ws));
  if (m.has(4)) {
    if (S < 0) return m.fail(ErrorCode::unsupported, "sequence_lens with a sequence length known only at run time");
    RLX_ASSIGN_OR_RETURN(Tensor lens, m.konst(4));
    for (int64_t i = 0; i < lens.numel(); ++i)
      if (static_cast<int64_t>(lens.get_f64(i)) != S)
        return m.fail(ErrorCode::unsupported, "sequence_lens shorter than the sequence are not supported");
  }
  if (cell == Cell::lstm && m.ai("input_forget", 0) != 0) return m.fail(ErrorCode::unsupported, "input_forget");
  // activations: per direction, f/g/h
  std::vector<std::string> names;
  if (const auto* a = m.attr("activations"))
    for (const std::string& n : a->strings()) names.push_back(n);
  std::vector<double> alphas = m.afloats("activation_alpha"), betas = m.afloats("activation_beta");
  const int per_dir = cell == Cell::rnn ? 1 : cell == Cell::gru ? 2 : 3;
  std::vector<Act> acts;
  for (int d = 0; d < dirs; ++d)
    for (int k = 0; k < per_dir; ++k) {
      size_t i = static_cast<size_t>(d * per_dir + k);
      std::string def = (cell != Cell::rnn && k == 0) ? "Sigmoid" : "Tanh";
      std::string n = i < names.size() ? names[i] : def;
      double al = i < alphas.size() ? alphas[i] : (n == "LeakyRelu" ? 0.01 : 0.2);
      double be = i < betas.size() ? betas[i] : 0.5;
      acts.push_back({n, al, be});
    }
  const double clip = m.af("clip", 0.0);
  const bool lbr = m.ai("linear_before_reset", 0) != 0;

  std::vector<ValueId> ys_dirs, hs, cs;
  for (int d = 0; d < dirs; ++d) {
    const bool reverse = dir == "reverse" || d == 1;
    ValueId wd = o.reshape(o.slice(w, {d}, {d + 1}, {0}), {gates * H, -1});
    ValueId rd = o.reshape(o.slice(rw, {d}, {d + 1}, {0}), {gates * H, H});
    ValueId wb = kNoValue, rb = kNoValue;
    if (m.has(3)) {
      RLX_ASSIGN_OR_RETURN(ValueId b, m.in(3));
      ValueId bd = o.reshape(o.slice(b, {d}, {d + 1}, {0}), {2 * gates * H});
      wb = o.slice(bd, {0}, {gates * H}, {0});
      rb = o.slice(bd, {gates * H}, {2 * gates * H}, {0});
    }
    // X W^T (+ Wb) for all steps at once: [S, B, G*H]
    ValueId xw = o.matmul(x, o.transpose(wd, {1, 0}));
    if (wb != kNoValue) xw = o.add(xw, wb);
    ValueId rt = o.transpose(rd, {1, 0});  // [H, G*H]
    ValueId h = kNoValue, c = kNoValue;
    auto squeeze0 = [&](ValueId v) { return o.op(Op::Squeeze, {v}, Attrs{{"axes", std::vector<int64_t>{0}}}); };
    // zeros of [B, H] (B may be symbolic): x_0 W^T's first H columns compared with -inf (false
    // for every value, NaN included)
    auto zeros_bh = [&]() {
      if (B >= 0) return o.full(0, o.dtype(x), {B, H});
      ValueId first = squeeze0(o.slice(xw, {0, 0}, {1, H}, {0, 2}));
      return o.cast(o.binary(Op::Less, first, o.scalar_like(-INFINITY, first)), o.dtype(x));
    };
    if (m.has(5)) {
      RLX_ASSIGN_OR_RETURN(ValueId h0, m.in(5));
      if (layout == 1) h0 = o.transpose(h0, {1, 0, 2});
      h = squeeze0(o.slice(h0, {d}, {d + 1}, {0}));
    } else {
      h = zeros_bh();
    }
    ValueId pi = kNoValue, po = kNoValue, pf = kNoValue;
    if (cell == Cell::lstm) {
      if (m.has(6)) {
        RLX_ASSIGN_OR_RETURN(ValueId c0, m.in(6));
        if (layout == 1) c0 = o.transpose(c0, {1, 0, 2});
        c = squeeze0(o.slice(c0, {d}, {d + 1}, {0}));
      } else {
        c = zeros_bh();
      }
      if (m.has(7)) {
        RLX_ASSIGN_OR_RETURN(ValueId p, m.in(7));
        ValueId pd = o.reshape(o.slice(p, {d}, {d + 1}, {0}), {3 * H});
        pi = o.slice(pd, {0}, {H}, {0});
        po = o.slice(pd, {H}, {2 * H}, {0});
        pf = o.slice(pd, {2 * H}, {3 * H}, {0});
      }
    }
    const Act* f = &acts[d * per_dir];
    const Act* g = per_dir > 1 ? &acts[d * per_dir + 1] : nullptr;
    const Act* hh = per_dir > 2 ? &acts[d * per_dir + 2] : nullptr;
    const StepParams params{cell, H, rt, rb, pi, po, pf, f, g, hh, clip, lbr};
    if (!unroll) {
      RLX_ASSIGN_OR_RETURN(auto r, recurrent_loop(m, params, reverse, xw, h, c, d));
      ys_dirs.push_back(o.op(Op::Unsqueeze, {r.y}, Attrs{{"axes", std::vector<int64_t>{1}}}));
      hs.push_back(o.op(Op::Unsqueeze, {r.h}, Attrs{{"axes", std::vector<int64_t>{0}}}));
      if (r.c != kNoValue) cs.push_back(o.op(Op::Unsqueeze, {r.c}, Attrs{{"axes", std::vector<int64_t>{0}}}));
      continue;
    }
    std::vector<ValueId> ys(S);
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = reverse ? S - 1 - step : step;
      ValueId xt = o.reshape(o.slice(xw, {t}, {t + 1}, {0}), {B, gates * H});
      RLX_TRY(cell_step(m, o, params, xt, h, c));
      ys[t] = o.reshape(h, {1, 1, B, H});
    }
    ys_dirs.push_back(S > 0 ? o.concat(ys, 0) : kNoValue);
    hs.push_back(o.reshape(h, {1, B, H}));
    if (c != kNoValue) cs.push_back(o.reshape(c, {1, B, H}));
  }
  RLX_TRY(m.ok().with_context(m.where()));
  ValueId y = dirs == 1 ? ys_dirs[0] : o.concat(ys_dirs, 1);      // [S, dirs, B, H]
  ValueId yh = dirs == 1 ? hs[0] : o.concat(hs, 0);                // [dirs, B, H]
  ValueId yc = cs.empty() ? kNoValue : dirs == 1 ? cs[0] : o.concat(cs, 0);
  if (layout == 1) {
    y = o.transpose(y, {2, 0, 1, 3});
    yh = o.transpose(yh, {1, 0, 2});
    if (yc != kNoValue) yc = o.transpose(yc, {1, 0, 2});
  }
  if (m.wants(0)) RLX_TRY(m.out(0, y));
  if (m.wants(1)) RLX_TRY(m.out(1, yh));
  if (m.wants(2) && yc != kNoValue) RLX_TRY(m.out(2, yc));
  return Status::ok();
}

}  // namespace

void register_rnn_ops(OpTable& t) {
  t["RNN"] = {[](Importer& m) { return map_recurrent(m, Cell::rnn); }};
  t["GRU"] = {[](Importer& m) { return map_recurrent(m, Cell::gru); }};
  t["LSTM"] = {[](Importer& m) { return map_recurrent(m, Cell::lstm); }};
}

}  // namespace rlx::onnx_import
