// ONNX recurrent layers RNN, GRU and LSTM, unrolled over their static sequence length into
// MatMul and elementwise graph ops (forward, reverse and bidirectional; layout 0 and 1;
// GRU's linear_before_reset; LSTM peepholes; clip).
#include "onnx_internal.h"

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

Status map_recurrent(Importer& m, Cell cell) {
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId w, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId rw, m.in(2));
  const int gates = cell == Cell::rnn ? 1 : cell == Cell::gru ? 3 : 4;
  const int64_t layout = m.ai("layout", 0);
  if (layout == 1) x = o.transpose(x, {1, 0, 2});
  if (!o.ok()) return o.status().with_context(m.where());
  auto xs = static_sizes(o.shape(x));
  auto ws = static_sizes(o.shape(w));
  if (!xs || !ws || xs->size() != 3 || ws->size() != 3) return m.fail(ErrorCode::unsupported, "needs static 3-D X and W");
  const int64_t S = (*xs)[0], B = (*xs)[1];
  const int64_t H = m.ai("hidden_size", (*ws)[1] / gates);
  if (H < 1 || H > (int64_t{1} << 20) || B > (int64_t{1} << 30)) return m.fail(ErrorCode::out_of_range, "hidden_size ", H, " or batch out of range");
  if (S > 4096) return m.fail(ErrorCode::unsupported, "sequence longer than 4096 steps");
  std::string dir = m.as("direction", "forward");
  const int dirs = dir == "bidirectional" ? 2 : 1;
  if ((*ws)[0] != dirs || (*ws)[1] != gates * H) return m.fail(ErrorCode::shape_error, "W has shape ", sizes_to_string(*ws));
  if (m.has(4)) {
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
    if (m.has(5)) {
      RLX_ASSIGN_OR_RETURN(ValueId h0, m.in(5));
      if (layout == 1) h0 = o.transpose(h0, {1, 0, 2});
      h = o.reshape(o.slice(h0, {d}, {d + 1}, {0}), {B, H});
    } else {
      h = o.full(0, o.dtype(x), {B, H});
    }
    ValueId pi = kNoValue, po = kNoValue, pf = kNoValue;
    if (cell == Cell::lstm) {
      if (m.has(6)) {
        RLX_ASSIGN_OR_RETURN(ValueId c0, m.in(6));
        if (layout == 1) c0 = o.transpose(c0, {1, 0, 2});
        c = o.reshape(o.slice(c0, {d}, {d + 1}, {0}), {B, H});
      } else {
        c = o.full(0, o.dtype(x), {B, H});
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
