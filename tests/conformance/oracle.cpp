// Independent oracles for the composite ops. The reference interpreter only runs primitives:
// a composite (softmax, conv2d, attention, ...) reaches it through the same decomposition
// rule every device uses, so comparing a device with ref cannot catch a wrong rule. These are
// direct f64 implementations of the semantics the ops table documents, written without the
// rules; the suite checks ref against them on the f64 cases (in the ref column).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "conformance.h"

namespace rlx::conformance {
namespace {

struct A {
  Sizes s;
  std::vector<double> v;
  int64_t n() const { return numel(s); }
};

A of(const Tensor& t) { return A{t.sizes(), t.to_f64()}; }

Tensor to_tensor(const A& a, DType dt) { return Tensor::from_f64(dt, a.s, a.v); }

Sizes strides_of(const Sizes& s) { return contiguous_strides(s); }

std::vector<int64_t> unravel(int64_t i, const Sizes& s) {
  std::vector<int64_t> r(s.size());
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    r[d] = s[d] ? i % s[d] : 0;
    i = s[d] ? i / s[d] : 0;
  }
  return r;
}

// Element of `a` at the numpy-broadcast position of index `idx` of a shape with rank >= a's.
double bcast_at(const A& a, const std::vector<int64_t>& idx) {
  const size_t off = idx.size() - a.s.size();
  int64_t flat = 0;
  Sizes st = strides_of(a.s);
  for (size_t d = 0; d < a.s.size(); ++d) flat += (a.s[d] == 1 ? 0 : idx[off + d]) * st[d];
  return a.v[static_cast<size_t>(flat)];
}

int64_t norm_axis(int64_t ax, size_t rank) { return ax < 0 ? ax + static_cast<int64_t>(rank) : ax; }

using Fn = double (*)(double);

A map(const A& x, const std::function<double(double)>& f) {
  A r = x;
  for (double& e : r.v) e = f(e);
  return r;
}

// Reduce over [axis] giving f(row values) for every position of the other axes.
A along_axis(const A& x, int64_t axis, const std::function<void(std::vector<double>&)>& f) {
  A r = x;
  const int64_t len = x.s[axis];
  int64_t inner = 1;
  for (size_t d = axis + 1; d < x.s.size(); ++d) inner *= x.s[d];
  const int64_t outer = len ? x.n() / (len * inner) : 0;
  std::vector<double> row(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t k = 0; k < len; ++k) row[k] = x.v[(o * len + k) * inner + i];
      f(row);
      for (int64_t k = 0; k < len; ++k) r.v[(o * len + k) * inner + i] = row[k];
    }
  return r;
}

A matmul(A a, A b) {
  const bool a1 = a.s.size() == 1, b1 = b.s.size() == 1;
  if (a1) a.s.insert(a.s.begin(), 1);
  if (b1) b.s.push_back(1);
  const int64_t m = a.s[a.s.size() - 2], k = a.s.back(), n = b.s.back();
  Sizes ba(a.s.begin(), a.s.end() - 2), bb(b.s.begin(), b.s.end() - 2);
  Sizes batch(std::max(ba.size(), bb.size()), 1);
  for (size_t i = 0; i < batch.size(); ++i) {
    int64_t da = i + ba.size() >= batch.size() ? ba[i + ba.size() - batch.size()] : 1;
    int64_t db = i + bb.size() >= batch.size() ? bb[i + bb.size() - batch.size()] : 1;
    batch[i] = std::max(da, db);
  }
  Sizes os = batch;
  os.push_back(m);
  os.push_back(n);
  A r{os, std::vector<double>(static_cast<size_t>(numel(os)))};
  for (int64_t i = 0; i < r.n(); ++i) {
    std::vector<int64_t> idx = unravel(i, os);
    std::vector<int64_t> ia(idx.begin(), idx.end() - 2), ib = ia;
    double acc = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      std::vector<int64_t> pa = ia, pb = ib;
      pa.push_back(idx[idx.size() - 2]);
      pa.push_back(kk);
      pb.push_back(kk);
      pb.push_back(idx.back());
      acc += bcast_at(a, pa) * bcast_at(b, pb);
    }
    r.v[i] = acc;
  }
  Sizes final_s = batch;
  if (!a1) final_s.push_back(m);
  if (!b1) final_s.push_back(n);
  r.s = final_s;
  return r;
}

int64_t wrap_clamp(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return std::clamp<int64_t>(i, 0, n - 1);
}

// Swaps axes 1 and 2 of a rank-4 array ([B,S,H,D] <-> [B,H,S,D]).
A swap12(const A& a) {
  A r{{a.s[0], a.s[2], a.s[1], a.s[3]}, std::vector<double>(a.v.size())};
  for (int64_t b = 0; b < a.s[0]; ++b)
    for (int64_t i = 0; i < a.s[1]; ++i)
      for (int64_t j = 0; j < a.s[2]; ++j)
        for (int64_t d = 0; d < a.s[3]; ++d)
          r.v[((b * a.s[2] + j) * a.s[1] + i) * a.s[3] + d] = a.v[((b * a.s[1] + i) * a.s[2] + j) * a.s[3] + d];
  return r;
}

std::optional<std::vector<A>> compute(Op op, const Attrs& at, const std::vector<A>& in, const std::vector<Tensor>& raw);

// Attention and rope in layout bshd: the bhsd computation between axis swaps.
std::optional<std::vector<A>> compute_layout(Op op, const Attrs& at, const std::vector<A>& in,
                                             const std::vector<Tensor>& raw) {
  if ((op != Op::Attention && op != Op::Rope) || at.s("layout", "bhsd") != "bshd") return compute(op, at, in, raw);
  std::vector<A> t = in;
  const size_t n4 = op == Op::Attention ? 3 : 1;  // q, k, v (the mask stays [B,H,Sq,Sk]) / x
  for (size_t i = 0; i < n4; ++i) t[i] = swap12(in[i]);
  Attrs a = at;
  a.erase("layout");
  auto r = compute(op, a, t, raw);
  if (r) (*r)[0] = swap12((*r)[0]);
  return r;
}

std::optional<std::vector<A>> compute(Op op, const Attrs& at, const std::vector<A>& in, const std::vector<Tensor>& raw) {
  const A& x = in[0];
  switch (op) {
    case Op::Relu: return std::vector<A>{map(x, [](double v) { return std::isnan(v) ? v : std::max(v, 0.0); })};
    case Op::LeakyRelu: {
      const double alpha = at.f("alpha", 0.01);
      return std::vector<A>{map(x, [&](double v) { return v < 0 ? alpha * v : v; })};
    }
    case Op::Gelu: {
      if (at.s("approximate", "none") == "tanh")
        return std::vector<A>{map(x, [](double v) {
          return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        })};
      return std::vector<A>{map(x, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); })};
    }
    case Op::Silu: return std::vector<A>{map(x, [](double v) { return v / (1 + std::exp(-v)); })};
    case Op::Softplus:
      return std::vector<A>{map(x, [](double v) { return std::isinf(v) && v > 0 ? v : std::log1p(std::exp(-std::fabs(v))) + std::max(v, 0.0); })};
    case Op::ReduceMean: {
      std::vector<int64_t> axes = at.ints("axes");
      const bool keep = at.i("keepdims", 1) != 0;
      std::vector<bool> red(x.s.size(), axes.empty());
      for (int64_t a : axes) red[norm_axis(a, x.s.size())] = true;
      Sizes os, keep_s;
      int64_t count = 1;
      for (size_t d = 0; d < x.s.size(); ++d) {
        if (red[d]) count *= x.s[d];
        keep_s.push_back(red[d] ? 1 : x.s[d]);
        if (!red[d] || keep) os.push_back(red[d] ? 1 : x.s[d]);
      }
      A r{os, std::vector<double>(static_cast<size_t>(numel(keep_s)), 0.0)};
      Sizes ks = strides_of(keep_s);
      for (int64_t i = 0; i < x.n(); ++i) {
        auto idx = unravel(i, x.s);
        int64_t o = 0;
        for (size_t d = 0; d < idx.size(); ++d) o += (red[d] ? 0 : idx[d]) * ks[d];
        r.v[o] += x.v[i];
      }
      for (double& v : r.v) v /= static_cast<double>(count);
      return std::vector<A>{r};
    }
    case Op::Softmax:
    case Op::LogSoftmax: {
      const int64_t ax = norm_axis(at.i("axis", -1), x.s.size());
      const bool lg = op == Op::LogSoftmax;
      return std::vector<A>{along_axis(x, ax, [&](std::vector<double>& row) {
        double mx = -INFINITY, sum = 0;
        for (double v : row) mx = std::max(mx, v);
        for (double v : row) sum += std::exp(v - mx);
        for (double& v : row) v = lg ? v - mx - std::log(sum) : std::exp(v - mx) / sum;
      })};
    }
    case Op::LayerNorm:
    case Op::RmsNorm: {
      const int64_t ax = norm_axis(at.i("axis", -1), x.s.size());
      const double eps = at.f("epsilon", op == Op::LayerNorm ? 1e-5 : 1e-6);
      int64_t inner = 1;
      for (size_t d = ax; d < x.s.size(); ++d) inner *= x.s[d];
      Sizes ns(x.s.begin() + ax, x.s.end());
      A r = x;
      for (int64_t o = 0; inner && o < x.n() / inner; ++o) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < inner; ++i) mean += x.v[o * inner + i];
        mean /= static_cast<double>(inner);
        for (int64_t i = 0; i < inner; ++i) {
          double d = x.v[o * inner + i] - (op == Op::LayerNorm ? mean : 0.0);
          var += d * d;
        }
        var /= static_cast<double>(inner);
        for (int64_t i = 0; i < inner; ++i) {
          auto idx = unravel(i, ns);
          double y = (x.v[o * inner + i] - (op == Op::LayerNorm ? mean : 0.0)) / std::sqrt(var + eps);
          if (in.size() > 1) y *= bcast_at(in[1], idx);
          if (in.size() > 2) y += bcast_at(in[2], idx);
          r.v[o * inner + i] = y;
        }
      }
      return std::vector<A>{r};
    }
    case Op::MatMul: return std::vector<A>{matmul(in[0], in[1])};
    case Op::Gemm: {
      A a = in[0], b = in[1];
      const bool ta = at.i("trans_a", 0) != 0, tb = at.i("trans_b", 0) != 0;
      const int64_t m = ta ? a.s[1] : a.s[0], k = ta ? a.s[0] : a.s[1], n = tb ? b.s[0] : b.s[1];
      const double alpha = at.f("alpha", 1.0), beta = at.f("beta", 1.0);
      A r{{m, n}, std::vector<double>(static_cast<size_t>(m * n))};
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t kk = 0; kk < k; ++kk)
            acc += (ta ? a.v[kk * m + i] : a.v[i * k + kk]) * (tb ? b.v[j * k + kk] : b.v[kk * n + j]);
          double c = in.size() > 2 && beta != 0.0 ? beta * bcast_at(in[2], {i, j}) : 0.0;
          r.v[i * n + j] = alpha * acc + c;
        }
      return std::vector<A>{r};
    }
    case Op::Embedding: {
      const A& ids = in[1];
      const int64_t vocab = x.s[0], dim = x.s[1];
      Sizes os = ids.s;
      os.push_back(dim);
      A r{os, std::vector<double>(static_cast<size_t>(numel(os)))};
      for (int64_t i = 0; i < ids.n(); ++i) {
        int64_t row = wrap_clamp(static_cast<int64_t>(ids.v[i]), vocab);
        for (int64_t d = 0; d < dim; ++d) r.v[i * dim + d] = x.v[row * dim + d];
      }
      return std::vector<A>{r};
    }
    case Op::Slice: {
      auto st = at.ints("starts"), en = at.ints("ends"), axes = at.ints("axes"), sp = at.ints("steps");
      if (axes.empty())
        for (size_t i = 0; i < st.size(); ++i) axes.push_back(static_cast<int64_t>(i));
      if (sp.empty()) sp.assign(st.size(), 1);
      std::vector<int64_t> start(x.s.size(), 0), step(x.s.size(), 1);
      Sizes os = x.s;
      for (size_t k = 0; k < st.size(); ++k) {
        int64_t ax = norm_axis(axes[k], x.s.size()), dim = x.s[ax];
        int64_t s0 = st[k] < 0 ? st[k] + dim : st[k], e0 = en[k] < 0 ? en[k] + dim : en[k];
        int64_t cnt;
        if (sp[k] > 0) {
          s0 = std::clamp<int64_t>(s0, 0, dim);
          e0 = std::clamp<int64_t>(e0, 0, dim);
          cnt = e0 > s0 ? (e0 - s0 + sp[k] - 1) / sp[k] : 0;
        } else {
          s0 = std::clamp<int64_t>(s0, 0, dim - 1);
          e0 = std::clamp<int64_t>(e0, -1, dim - 1);
          cnt = s0 > e0 ? (s0 - e0 - sp[k] - 1) / (-sp[k]) : 0;
        }
        start[ax] = s0;
        step[ax] = sp[k];
        os[ax] = cnt;
      }
      A r{os, std::vector<double>(static_cast<size_t>(numel(os)))};
      Sizes xs = strides_of(x.s);
      for (int64_t i = 0; i < r.n(); ++i) {
        auto idx = unravel(i, os);
        int64_t src = 0;
        for (size_t d = 0; d < idx.size(); ++d) src += (start[d] + idx[d] * step[d]) * xs[d];
        r.v[i] = x.v[src];
      }
      return std::vector<A>{r};
    }
    case Op::Split: {
      const int64_t ax = norm_axis(at.i("axis", 0), x.s.size());
      std::vector<A> outs;
      int64_t off = 0;
      Sizes xs = strides_of(x.s);
      for (int64_t size : at.ints("sizes")) {
        Sizes os = x.s;
        os[ax] = size;
        A r{os, std::vector<double>(static_cast<size_t>(numel(os)))};
        for (int64_t i = 0; i < r.n(); ++i) {
          auto idx = unravel(i, os);
          idx[ax] += off;
          int64_t src = 0;
          for (size_t d = 0; d < idx.size(); ++d) src += idx[d] * xs[d];
          r.v[i] = x.v[src];
        }
        outs.push_back(r);
        off += size;
      }
      return outs;
    }
    case Op::Squeeze:
    case Op::Unsqueeze: return std::nullopt;  // shape-only: the element order is unchanged (checked bit for bit)
    case Op::Conv2d: {
      const A& w = in[1];
      auto st = at.ints("strides", {1, 1}), pd = at.ints("pads", {0, 0, 0, 0}), dl = at.ints("dilations", {1, 1});
      const int64_t g = at.i("group", 1);
      const int64_t N = x.s[0], C = x.s[1], H = x.s[2], W = x.s[3], M = w.s[0], CG = w.s[1], KH = w.s[2], KW = w.s[3];
      const int64_t HO = (H + pd[0] + pd[2] - dl[0] * (KH - 1) - 1) / st[0] + 1;
      const int64_t WO = (W + pd[1] + pd[3] - dl[1] * (KW - 1) - 1) / st[1] + 1;
      (void)C;
      A r{{N, M, HO, WO}, std::vector<double>(static_cast<size_t>(N * M * HO * WO))};
      for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t oy = 0; oy < HO; ++oy)
            for (int64_t ox = 0; ox < WO; ++ox) {
              double acc = in.size() > 2 ? in[2].v[m] : 0.0;
              const int64_t grp = m / (M / g);
              for (int64_t c = 0; c < CG; ++c)
                for (int64_t ky = 0; ky < KH; ++ky)
                  for (int64_t kx = 0; kx < KW; ++kx) {
                    int64_t yy = oy * st[0] + ky * dl[0] - pd[0], xx = ox * st[1] + kx * dl[1] - pd[1];
                    if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                    int64_t ci = grp * CG + c;
                    acc += x.v[((n * x.s[1] + ci) * H + yy) * W + xx] * w.v[((m * CG + c) * KH + ky) * KW + kx];
                  }
              r.v[((n * M + m) * HO + oy) * WO + ox] = acc;
            }
      return std::vector<A>{r};
    }
    case Op::MaxPool2d:
    case Op::AvgPool2d: {
      auto k = at.ints("kernel"), st = at.has("strides") ? at.ints("strides") : std::vector<int64_t>{1, 1};
      auto pd = at.ints("pads", {0, 0, 0, 0}), dl = at.ints("dilations", {1, 1});
      const bool ceil_mode = at.i("ceil_mode", 0) != 0, incl = at.i("count_include_pad", 0) != 0;
      const int64_t N = x.s[0], C = x.s[1], H = x.s[2], W = x.s[3];
      auto out_dim = [&](int64_t in_d, int64_t kk, int64_t s, int64_t lo, int64_t hi, int64_t dil) {
        int64_t avail = in_d + lo + hi - (dil * (kk - 1) + 1);
        int64_t nn = ceil_mode ? (avail + s - 1) / s + 1 : avail / s + 1;
        if (ceil_mode && (nn - 1) * s >= in_d + lo) --nn;
        return nn;
      };
      const int64_t HO = out_dim(H, k[0], st[0], pd[0], pd[2], dl[0]), WO = out_dim(W, k[1], st[1], pd[1], pd[3], dl[1]);
      A r{{N, C, HO, WO}, std::vector<double>(static_cast<size_t>(N * C * HO * WO))};
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t oy = 0; oy < HO; ++oy)
            for (int64_t ox = 0; ox < WO; ++ox) {
              double mx = -INFINITY, sum = 0;
              bool nan = false;
              int64_t cnt = 0;
              for (int64_t ky = 0; ky < k[0]; ++ky)
                for (int64_t kx = 0; kx < k[1]; ++kx) {
                  int64_t yy = oy * st[0] + ky * dl[0] - pd[0], xx = ox * st[1] + kx * dl[1] - pd[1];
                  bool inside = yy >= 0 && yy < H && xx >= 0 && xx < W;
                  bool in_padded = yy >= -pd[0] && yy < H + pd[2] && xx >= -pd[1] && xx < W + pd[3];
                  if (incl ? in_padded : inside) ++cnt;
                  if (!inside) continue;
                  double v = x.v[((n * C + c) * H + yy) * W + xx];
                  nan |= std::isnan(v);
                  mx = std::max(mx, v);
                  sum += v;
                }
              r.v[((n * C + c) * HO + oy) * WO + ox] =
                  op == Op::MaxPool2d ? (nan ? std::numeric_limits<double>::quiet_NaN() : mx) : sum / std::max<int64_t>(cnt, 1);
            }
      return std::vector<A>{r};
    }
    case Op::Attention: {
      // int8_scores: each row of q and k (over the head dimension) replaced by its int8 quants
      // times its scale, quantized in f32 as int8_matmul defines it
      auto int8_rows = [](A x) {
        const int64_t d = x.s.back();
        for (size_t r = 0; r < x.v.size(); r += static_cast<size_t>(d)) {
          float amax = 0.f;
          for (int64_t c = 0; c < d; ++c) amax = std::max(amax, std::fabs(static_cast<float>(x.v[r + c])));
          const float scale = std::max(amax / 127.f, 1e-30f);
          for (int64_t c = 0; c < d; ++c) {
            const float t = std::nearbyint(std::clamp(static_cast<float>(x.v[r + c]) / scale, -127.f, 127.f));
            x.v[r + c] = t * scale;  // the product rounded to f32, as the quants' dequantization
          }
        }
        return x;
      };
      const bool i8 = at.i("int8_scores", 0) != 0;
      const A qi = i8 ? int8_rows(in[0]) : A{}, ki = i8 ? int8_rows(in[1]) : A{};
      const A &q = i8 ? qi : in[0], &kk = i8 ? ki : in[1], &vv = in[2];
      const int64_t B = q.s[0], HQ = q.s[1], SQ = q.s[2], D = q.s[3], HK = kk.s[1], SK = kk.s[2], DV = vv.s[3];
      double scale = at.f("scale", 0.0);
      if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(D));
      const bool causal = at.i("causal", 0) != 0;
      const bool bool_mask = in.size() > 3 && raw[3].dtype() == DType::boolean;
      A r{{B, HQ, SQ, DV}, std::vector<double>(static_cast<size_t>(B * HQ * SQ * DV))};
      std::vector<double> s(static_cast<size_t>(SK));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < HQ; ++h) {
          const int64_t hk = h / (HQ / HK);
          for (int64_t i = 0; i < SQ; ++i) {
            double mx = -INFINITY;
            for (int64_t j = 0; j < SK; ++j) {
              double dot = 0;
              for (int64_t d = 0; d < D; ++d) dot += q.v[((b * HQ + h) * SQ + i) * D + d] * kk.v[((b * HK + hk) * SK + j) * D + d];
              double sc = dot * scale;
              if (const double cap = at.f("softcap", 0.0); cap > 0) sc = cap * std::tanh(sc / cap);
              if (in.size() > 3) {
                double m = bcast_at(in[3], {b, h, i, j});
                if (bool_mask) sc = m != 0 ? sc : -INFINITY;
                else sc += m;
              }
              if (causal && j > i + (SK - SQ)) sc = -INFINITY;
              s[j] = sc;
              mx = std::max(mx, sc);
            }
            double sum = 0;
            for (double& e : s) sum += (e = std::exp(e - mx));
            for (int64_t d = 0; d < DV; ++d) {
              double acc = 0;
              for (int64_t j = 0; j < SK; ++j) acc += s[j] / sum * vv.v[((b * HK + hk) * SK + j) * DV + d];
              r.v[((b * HQ + h) * SQ + i) * DV + d] = acc;
            }
          }
        }
      return std::vector<A>{r};
    }
    case Op::Rope: {
      const A& pos = in[1];
      const int64_t B = x.s[0], H = x.s[1], S = x.s[2], D = x.s[3], half = D / 2;
      const double theta = at.f("theta", 10000.0);
      const std::vector<double> inv_freq = at.floats("inv_freq");
      const bool inter = at.i("interleaved", 0) != 0;
      A r = x;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t s = 0; s < S; ++s) {
            const double p = pos.s.size() == 2 ? pos.v[b * S + s] : pos.v[s];
            for (int64_t i = 0; i < half; ++i) {
              const double ang = p * (inv_freq.empty() ? std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D))
                                                       : inv_freq[static_cast<size_t>(i)]);
              const int64_t base = ((b * H + h) * S + s) * D;
              const int64_t i1 = inter ? base + 2 * i : base + i, i2 = inter ? base + 2 * i + 1 : base + i + half;
              const double x1 = x.v[i1], x2 = x.v[i2];
              r.v[i1] = x1 * std::cos(ang) - x2 * std::sin(ang);
              r.v[i2] = x2 * std::cos(ang) + x1 * std::sin(ang);
            }
          }
      return std::vector<A>{r};
    }
    default: break;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<Tensor>> oracle_outputs(Op op, const Attrs& attrs, const std::vector<Tensor>& inputs,
                                                 const std::vector<TensorType>& out_types) {
  if (is_primitive(op)) return std::nullopt;
  std::vector<A> in;
  for (const Tensor& t : inputs) in.push_back(of(t));
  auto r = compute_layout(op, attrs, in, inputs);
  if (!r || r->size() != out_types.size()) return std::nullopt;
  std::vector<Tensor> outs;
  for (size_t i = 0; i < r->size(); ++i) {
    Sizes want = *static_sizes(out_types[i].shape);
    // a shape that differs from inference's shows up as a mismatch in the comparison
    outs.push_back((*r)[i].s == want ? to_tensor((*r)[i], out_types[i].dtype) : Tensor::zeros(out_types[i].dtype, (*r)[i].s));
  }
  return outs;
}

}  // namespace rlx::conformance
