// The case table: for every op of the ops table (except the given-value sources param and
// constant), the variants the suite runs. A variant fixes input shapes, value domains and
// attributes; the dtype is tried from candidate_dtypes() and the ops table's inference decides
// whether the op accepts it. Shapes are chosen to reach the corners: rank 0, odd sizes (7x13),
// numpy broadcasting, negative axes, keepdims both ways, middle axes, a size large enough to
// take the CPU's threaded path, empty tensors where the op defines them, and special values
// (NaN, inf, -0, integer MIN/MAX) where the semantics are defined (see ref/interpreter.h).
#include <algorithm>

#include "conformance.h"

namespace rlx::conformance {
namespace {

using I = std::vector<int64_t>;

InputSpec T(Sizes s, Dist d = Dist::standard) { return InputSpec{std::move(s), std::nullopt, d}; }
InputSpec D(DType dt, Sizes s, Dist d = Dist::standard) { return InputSpec{std::move(s), dt, d}; }
InputSpec Idx(DType dt, Sizes s, int64_t lo, int64_t hi) { return InputSpec{std::move(s), dt, Dist::index, lo, hi, ""}; }
// u8 rows of `cols` values quantized in `fmt`.
InputSpec Q(const std::string& fmt, int64_t rows, int64_t cols) {
  auto qf = quant_format(fmt);
  int64_t bytes = qf ? cols / qf->block_elems * qf->block_bytes : cols;
  return InputSpec{{rows, bytes}, DType::u8, Dist::quant, 0, 0, fmt};
}
int64_t quant_block(const std::string& fmt) {
  auto qf = quant_format(fmt);
  return qf ? qf->block_elems : 32;
}

struct V : Variant {
  V(std::string n, std::vector<InputSpec> in, Attrs a = {}) {
    name = std::move(n);
    inputs = std::move(in);
    attrs = std::move(a);
  }
  V& k(int64_t n) {
    reduce_len = n;
    return *this;
  }
  V& mag(double m) {
    magnitude = m;
    return *this;
  }
  V& dtypes(std::vector<DType> d) {
    only = std::move(d);
    return *this;
  }
  V& rounds(double step) {
    rounding = step;
    return *this;
  }
  // Shape-only variants (broadcasting, axes, ranks: index arithmetic that does not depend on
  // the element type) run for a few representative dtypes; the variants that exercise dtype
  // semantics run for every dtype. Keeps the number of generated kernels (compile time) down.
  V& reps();
};

// float, narrow float (computed in f32), signed, unsigned and bool (the C renderer's kinds).
const std::vector<DType> kReps = {DType::f32, DType::f16, DType::i32, DType::u8, DType::boolean};
V& V::reps() { return dtypes(kReps); }

const Sizes kLarge = {67, 531};  // 35577 elements: above the CPU's threading threshold

std::vector<Variant> unary_variants(Dist d, bool with_specials = true, bool with_wide = false) {
  std::vector<Variant> v = {V("scalar", {T({}, d)}), V("7x13", {T({7, 13}, d)}), V("rank4", {T({2, 3, 5, 4}, d)}).reps(),
                            V("large", {T(kLarge, d)})};
  if (with_wide) v.push_back(V("wide", {T({7, 13}, Dist::wide)}).mag(50));
  if (with_specials) v.push_back(V("specials", {T({9, 11}, Dist::specials)}));
  return v;
}

std::vector<Variant> binary_variants(Dist a, Dist b, bool specials = true) {
  std::vector<Variant> v = {
      V("same", {T({7, 13}, a), T({7, 13}, b)}),
      V("bcast_row", {T({7, 13}, a), T({13}, b)}).reps(),
      V("bcast_col_row", {T({7, 1}, a), T({1, 13}, b)}).reps(),
      V("scalar_lhs", {T({}, a), T({5, 3}, b)}).reps(),
      V("rank0", {T({}, a), T({}, b)}),
      V("bcast_rank3", {T({2, 1, 4}, a), T({3, 1}, b)}).reps(),
      V("large", {T(kLarge, a), T({531}, b)}).reps(),
  };
  if (specials) v.push_back(V("specials", {T({9, 11}, Dist::specials), T({9, 11}, Dist::specials)}));
  return v;
}

std::vector<Variant> reduce_variants(Dist d, bool empty_axis) {
  std::vector<Variant> v = {
      V("row", {T({7, 13}, d)}, {{"axes", I{1}}, {"keepdims", int64_t{0}}}).k(13),
      V("row_keep", {T({7, 13}, d)}, {{"axes", I{-1}}, {"keepdims", int64_t{1}}}).k(13).reps(),
      V("col", {T({7, 13}, d)}, {{"axes", I{0}}, {"keepdims", int64_t{0}}}).k(7),
      V("all", {T({7, 13}, d)}, {{"keepdims", int64_t{0}}}).k(91),
      V("all_keep_default", {T({7, 13}, d)}).k(91).reps(),
      V("middle", {T({3, 5, 7}, d)}, {{"axes", I{1}}, {"keepdims", int64_t{0}}}).k(5),
      V("outer_inner", {T({3, 5, 7}, d)}, {{"axes", I{0, 2}}, {"keepdims", int64_t{0}}}).k(21).reps(),
      V("neg_axes_keep", {T({3, 5, 7}, d)}, {{"axes", I{-1, -3}}, {"keepdims", int64_t{1}}}).k(21).reps(),
      V("rank0", {T({}, d)}, {{"keepdims", int64_t{0}}}).reps(),
      V("large", {T({64, 600}, d)}, {{"axes", I{1}}, {"keepdims", int64_t{0}}}).k(600),
      V("large_cols", {T({600, 64}, d)}, {{"axes", I{0}}, {"keepdims", int64_t{1}}}).k(600).reps(),
  };
  if (empty_axis) v.push_back(V("empty_axis", {T({5, 0}, d)}, {{"axes", I{1}}, {"keepdims", int64_t{0}}}).reps());
  return v;
}

std::vector<Variant> argreduce_variants() {
  return {
      V("row", {T({7, 13})}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}),
      V("row_keep_default", {T({7, 13})}, {{"axis", int64_t{-1}}}).reps(),
      V("col", {T({7, 13})}, {{"axis", int64_t{0}}, {"keepdims", int64_t{0}}}),
      V("middle", {T({3, 5, 7})}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}).reps(),
      V("rank1", {T({13})}, {{"axis", int64_t{0}}, {"keepdims", int64_t{0}}}).reps(),
      V("ties_first", {T({7, 13}, Dist::integral)}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}),
      V("ties_last", {T({7, 13}, Dist::integral)},
        {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}}),
      V("specials", {T({7, 13}, Dist::specials)}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}),
      V("large", {T({64, 600})}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}),
  };
}

std::vector<Variant> softmax_variants() {
  return {
      V("last_default", {T({7, 13})}).k(13),
      V("middle", {T({3, 5, 7})}, {{"axis", int64_t{1}}}).k(5),
      V("first", {T({7, 13})}, {{"axis", int64_t{0}}}).k(7),
      V("rank1", {T({13})}, {{"axis", int64_t{-1}}}).k(13),
      V("wide", {T({7, 13}, Dist::wide)}, {{"axis", int64_t{-1}}}).k(13).mag(50),
      V("large", {T({8, 1000})}, {{"axis", int64_t{1}}}).k(1000),
  };
}

std::vector<Variant> activation_variants() {
  std::vector<Variant> v = unary_variants(Dist::standard, true, true);
  return v;
}

// Appends one op's variants to the table.
void add(std::vector<OpCases>& t, Op op, TolClass tol, std::vector<Variant> v) {
  t.push_back(OpCases{op, tol, std::move(v)});
}

// The table is built by one function per op family, each kept out of line (noinline: -O1
// inlines a function that is called once). Why: as one function of about 490 lines, with
// thousands of brace-initialized temporaries, the sanitized build (GCC 12, -O1 -g,
// -fsanitize=address,undefined) did not finish compiling this file in 35 minutes; the time
// grows much faster than the function (its first 127 lines as one function: 23 s, its first
// 192: 61 s, of which variable tracking's dataflow went from 3 s to 22 s). Split, the file
// compiles in about a minute there.

// ---- sources
[[gnu::noinline]] void sources(std::vector<OpCases>& t) {
  add(t, Op::Iota, TolClass::exact,
      {V("rows", {}, {{"shape", I{7, 13}}, {"axis", int64_t{0}}}), V("cols", {}, {{"shape", I{7, 13}}, {"axis", int64_t{1}}}),
       V("neg_axis_rank3", {}, {{"shape", I{3, 5, 7}}, {"axis", int64_t{-1}}}),
       V("rank1_300", {}, {{"shape", I{300}}, {"axis", int64_t{0}}}),
       V("like_input", {D(DType::f32, {4, 6})}, {{"axis", int64_t{1}}}),
       V("like_input_neg_axis", {D(DType::i64, {2, 3, 5})}, {{"axis", int64_t{-2}}})});
  for (Variant& v : t.back().variants) v.dtype_attr = true;
  add(t, Op::Random, TolClass::random,
      {V("uniform", {}, {{"shape", I{7, 13}}, {"dist", std::string("uniform")}}),
       V("uniform_ab", {}, {{"shape", I{7, 13}}, {"dist", std::string("uniform")}, {"a", -3.0}, {"b", 5.0}}),
       V("normal", {}, {{"shape", I{7, 13}}, {"dist", std::string("normal")}}),
       V("normal_mean_std", {}, {{"shape", I{1000}}, {"dist", std::string("normal")}, {"a", 2.0}, {"b", 0.5}}),
       V("scalar", {}, {{"shape", I{}}, {"dist", std::string("uniform")}})});
  for (Variant& v : t.back().variants) v.dtype_attr = v.seed_attr = true;
}

// ---- elementwise unary
[[gnu::noinline]] void elementwise_unary(std::vector<OpCases>& t) {
  add(t, Op::Neg, TolClass::exact, unary_variants(Dist::standard));
  t.back().variants.push_back(V("int_edges", {T({9, 11}, Dist::int_edges)}));
  add(t, Op::Abs, TolClass::exact, unary_variants(Dist::standard));
  t.back().variants.push_back(V("int_edges", {T({9, 11}, Dist::int_edges)}));
  add(t, Op::Exp, TolClass::transcendental, unary_variants(Dist::standard, true, true));
  add(t, Op::Log, TolClass::transcendental, unary_variants(Dist::positive));
  add(t, Op::Sqrt, TolClass::arith, unary_variants(Dist::positive));
  add(t, Op::Rsqrt, TolClass::transcendental, unary_variants(Dist::positive));
  add(t, Op::Reciprocal, TolClass::arith, unary_variants(Dist::nonzero));
  add(t, Op::Tanh, TolClass::transcendental, unary_variants(Dist::standard, true, true));
  add(t, Op::Sigmoid, TolClass::transcendental, unary_variants(Dist::standard, true, true));
  add(t, Op::Erf, TolClass::transcendental, unary_variants(Dist::standard, true, true));
  add(t, Op::Sin, TolClass::transcendental, unary_variants(Dist::standard, true, true));
  add(t, Op::Cos, TolClass::transcendental, unary_variants(Dist::standard, true, true));
  for (Op op : {Op::Floor, Op::Ceil, Op::Round}) {
    add(t, op, TolClass::exact, unary_variants(Dist::standard));
    t.back().variants.push_back(V("halves", {T({9, 11}, Dist::halves)}));
  }
  add(t, Op::Sign, TolClass::exact, unary_variants(Dist::standard));
  t.back().variants.push_back(V("with_zeros", {T({9, 11}, Dist::with_zeros)}));
  t.back().variants.push_back(V("int_edges", {T({9, 11}, Dist::int_edges)}));
  add(t, Op::Not, TolClass::exact, unary_variants(Dist::standard, false));
  // on integers Not is bitwise: every bit pattern, the edges included
  t.back().variants.push_back(V("bitwise_full_range", {T({9, 11}, Dist::full_range)}));
  t.back().variants.push_back(V("bitwise_int_edges", {T({9, 11}, Dist::int_edges)}));
  add(t, Op::IsNan, TolClass::exact, {V("7x13", {T({7, 13})}), V("scalar", {T({}, Dist::specials)}),
                                      V("specials", {T({9, 11}, Dist::specials)}), V("large", {T(kLarge, Dist::specials)})});
  add(t, Op::IsInf, TolClass::exact,
      {V("specials", {T({9, 11}, Dist::specials)}),
       V("positive_only", {T({9, 11}, Dist::specials)}, {{"detect_negative", int64_t{0}}}),
       V("negative_only", {T({9, 11}, Dist::specials)}, {{"detect_positive", int64_t{0}}}),
       V("neither", {T({9, 11}, Dist::specials)}, {{"detect_positive", int64_t{0}}, {"detect_negative", int64_t{0}}}),
       V("scalar", {T({})}), V("large", {T(kLarge, Dist::specials)})});
}

// ---- complex parts: c64 only (inference rejects every other dtype), so no reps() variants;
// specials put NaN, +-inf, +-0, huge and subnormal values in either part
[[gnu::noinline]] void complex_parts(std::vector<OpCases>& t) {
  auto complex_unary = [] {
    return std::vector<Variant>{V("scalar", {T({})}), V("7x13", {T({7, 13})}), V("rank4", {T({2, 3, 5, 4})}),
                                V("large", {T(kLarge)}), V("wide", {T({7, 13}, Dist::wide)}).mag(50),
                                V("specials", {T({9, 11}, Dist::specials)})};
  };
  for (Op op : {Op::Real, Op::Imag, Op::Conj}) add(t, op, TolClass::exact, complex_unary());
  add(t, Op::Angle, TolClass::transcendental, complex_unary());
}

// ---- elementwise binary
[[gnu::noinline]] void elementwise_binary(std::vector<OpCases>& t) {
  for (Op op : {Op::Add, Op::Sub, Op::Mul}) {
    add(t, op, TolClass::arith, binary_variants(Dist::standard, Dist::standard));
    t.back().variants.push_back(V("int_wrap", {T({9, 11}, Dist::full_range), T({9, 11}, Dist::int_edges)}));
  }
  add(t, Op::Div, TolClass::arith, binary_variants(Dist::standard, Dist::nonzero));
  t.back().variants.push_back(V("zero_divisors", {T({9, 11}), T({9, 11}, Dist::with_zeros)}));
  t.back().variants.push_back(V("int_edges", {T({9, 11}, Dist::int_edges), T({9, 11}, Dist::int_edges)}));
  add(t, Op::Pow, TolClass::transcendental, binary_variants(Dist::positive, Dist::exponent));
  t.back().variants.push_back(V("neg_base_int_exp", {T({9, 11}, Dist::integral), T({9, 11}, Dist::integral)}));
  t.back().variants.push_back(V("int_small", {T({9, 11}, Dist::unit), T({9, 11}, Dist::exponent)}));
  for (Op op : {Op::Max, Op::Min}) {
    add(t, op, TolClass::exact, binary_variants(Dist::standard, Dist::standard));
    t.back().variants.push_back(V("ties", {T({9, 11}, Dist::integral), T({9, 11}, Dist::integral)}));
  }
  add(t, Op::Mod, TolClass::arith, binary_variants(Dist::standard, Dist::nonzero));
  t.back().variants.push_back(V("fmod", {T({7, 13}, Dist::wide), T({7, 13}, Dist::nonzero)}, {{"fmod", int64_t{1}}}));
  t.back().variants.push_back(V("floor_mod", {T({7, 13}, Dist::wide), T({7, 13}, Dist::nonzero)}, {{"fmod", int64_t{0}}}));
  t.back().variants.push_back(V("zero_divisors", {T({9, 11}), T({9, 11}, Dist::with_zeros)}));
  t.back().variants.push_back(V("zero_divisors_fmod", {T({9, 11}), T({9, 11}, Dist::with_zeros)}, {{"fmod", int64_t{1}}}));
  t.back().variants.push_back(V("int_edges", {T({9, 11}, Dist::int_edges), T({9, 11}, Dist::int_edges)}));
  t.back().variants.push_back(
      V("int_edges_fmod", {T({9, 11}, Dist::int_edges), T({9, 11}, Dist::int_edges)}, {{"fmod", int64_t{1}}}));
  for (Op op : {Op::Equal, Op::NotEqual, Op::Less, Op::LessEqual, Op::Greater, Op::GreaterEqual}) {
    add(t, op, TolClass::exact, binary_variants(Dist::standard, Dist::standard));
    t.back().variants.push_back(V("ties", {T({9, 11}, Dist::integral), T({9, 11}, Dist::integral)}));
  }
  for (Op op : {Op::And, Op::Or, Op::Xor}) {  // logical on bool, bitwise on integers
    add(t, op, TolClass::exact, binary_variants(Dist::standard, Dist::standard, false));
    t.back().variants.push_back(V("bitwise_full_range", {T({9, 11}, Dist::full_range), T({9, 11}, Dist::full_range)}));
    t.back().variants.push_back(V("bitwise_int_edges", {T({9, 11}, Dist::int_edges), T({9, 11}, Dist::full_range)}));
  }
  // complex(re, im): f32 parts (broadcast) to c64, so the variants run for f32 only
  add(t, Op::Complex, TolClass::exact, binary_variants(Dist::standard, Dist::standard));
}

// ---- where, cast
[[gnu::noinline]] void where_and_cast(std::vector<OpCases>& t) {
  add(t, Op::Where, TolClass::bits,
      {V("same", {D(DType::boolean, {7, 13}), T({7, 13}), T({7, 13})}),
       V("bcast", {D(DType::boolean, {7, 1}), T({7, 13}), T({13})}),
       V("scalar_branches", {D(DType::boolean, {5, 3}), T({}), T({})}),
       V("rank0", {D(DType::boolean, {}), T({}), T({})}),
       V("large", {D(DType::boolean, kLarge), T(kLarge), T({531})}),
       V("specials", {D(DType::boolean, {9, 11}), T({9, 11}, Dist::specials), T({9, 11}, Dist::specials)})});
  {
    std::vector<Variant> v;
    for (DType to : candidate_dtypes()) {
      if (is_packed(to)) continue;
      std::string n(dtype_name(to));
      v.push_back(V("to_" + n, {T({7, 13}, Dist::full_range)}, {{"to", to}}));
      // NaN, infinities, huge values into every type; integers' edges are in full_range already
      v.push_back(V("specials_to_" + n, {T({9, 11}, Dist::specials)}, {{"to", to}}).dtypes({DType::f32, DType::f16, DType::bf16, DType::f64}));
    }
    v.push_back(V("scalar_to_f32", {T({})}, {{"to", DType::f32}}));
    v.push_back(V("large_to_i32", {T(kLarge, Dist::wide)}, {{"to", DType::i32}}));
    add(t, Op::Cast, TolClass::exact, std::move(v));
  }
}

// ---- reductions
[[gnu::noinline]] void reductions(std::vector<OpCases>& t) {
  add(t, Op::ReduceSum, TolClass::reduce, reduce_variants(Dist::standard, true));
  add(t, Op::ReduceMax, TolClass::exact, reduce_variants(Dist::standard, false));
  t.back().variants.push_back(V("specials", {T({7, 13}, Dist::specials)}, {{"axes", I{1}}, {"keepdims", int64_t{0}}}));
  add(t, Op::ReduceMin, TolClass::exact, reduce_variants(Dist::standard, false));
  t.back().variants.push_back(V("specials", {T({7, 13}, Dist::specials)}, {{"axes", I{1}}, {"keepdims", int64_t{0}}}));
  add(t, Op::ReduceProd, TolClass::reduce, reduce_variants(Dist::near_one, true));
  add(t, Op::ArgMax, TolClass::exact, argreduce_variants());
  add(t, Op::ArgMin, TolClass::exact, argreduce_variants());
}

// ---- movement
[[gnu::noinline]] void movement(std::vector<OpCases>& t) {
  add(t, Op::Reshape, TolClass::bits,
      {V("flatten", {T({7, 13})}, {{"shape", I{91}}}), V("swap", {T({7, 13})}, {{"shape", I{13, 7}}}),
       V("zero_minus1", {T({2, 3, 4})}, {{"shape", I{0, -1}}}).reps(), V("to_scalar", {T({1})}, {{"shape", I{}}}).reps(),
       V("from_scalar", {T({})}, {{"shape", I{1, 1}}}).reps(), V("rank4", {T({2, 3, 5, 4})}, {{"shape", I{6, -1, 2}}}).reps(),
       V("empty_allowzero", {T({0, 3})}, {{"shape", I{3, 0}}, {"allowzero", int64_t{1}}}).reps(),
       V("large", {T(kLarge)}, {{"shape", I{531, 67}}})});
  add(t, Op::Transpose, TolClass::bits,
      {V("2d_default", {T({7, 13})}), V("3d", {T({2, 3, 5})}, {{"perm", I{2, 0, 1}}}),
       V("neg_perm", {T({2, 3, 5})}, {{"perm", I{-1, 0, 1}}}).reps(), V("4d", {T({2, 3, 5, 4})}, {{"perm", I{0, 2, 1, 3}}}).reps(),
       V("rank1", {T({13})}, {{"perm", I{0}}}).reps(), V("large", {T(kLarge)}, {{"perm", I{1, 0}}})});
  add(t, Op::Expand, TolClass::bits,
      {V("row", {T({1, 13})}, {{"shape", I{7, 13}}}), V("col", {T({7, 1})}, {{"shape", I{7, 13}}}),
       V("rank_ext", {T({13})}, {{"shape", I{2, 7, 13}}}).reps(), V("scalar", {T({})}, {{"shape", I{3, 4}}}).reps(),
       V("both", {T({3, 1, 5})}, {{"shape", I{2, 3, 4, 5}}}).reps(), V("target_ones", {T({7, 13})}, {{"shape", I{1, 13}}}),
       V("large", {T({1, 531})}, {{"shape", I{67, 531}}})});
  add(t, Op::StridedSlice, TolClass::bits,
      {V("pos_steps", {T({7, 13})}, {{"starts", I{1, 2}}, {"steps", I{2, 3}}, {"sizes", I{3, 4}}}),
       V("neg_steps", {T({7, 13})}, {{"starts", I{6, 12}}, {"steps", I{-1, -2}}, {"sizes", I{7, 7}}}),
       V("mixed_rank3", {T({3, 5, 7})}, {{"starts", I{2, 0, 6}}, {"steps", I{-1, 2, -3}}, {"sizes", I{3, 3, 3}}}).reps(),
       V("full", {T({7, 13})}, {{"starts", I{0, 0}}, {"steps", I{1, 1}}, {"sizes", I{7, 13}}}).reps(),
       V("empty", {T({7, 13})}, {{"starts", I{0, 0}}, {"steps", I{1, 1}}, {"sizes", I{0, 13}}}).reps(),
       V("rank0", {T({})}, {{"starts", I{}}, {"steps", I{}}, {"sizes", I{}}}).reps()});
  add(t, Op::Pad, TolClass::bits,
      {V("const", {T({7, 13})}, {{"pads", I{1, 2, 3, 0}}, {"value", 0.5}}),
       V("const_default", {T({7, 13})}, {{"pads", I{0, 1, 2, 3}}}).reps(),
       V("crop", {T({7, 13})}, {{"pads", I{-1, 0, 2, -3}}, {"value", -1.0}}),
       V("reflect", {T({7, 13})}, {{"pads", I{2, 3, 1, 4}}, {"mode", std::string("reflect")}}),
       V("edge", {T({7, 13})}, {{"pads", I{3, 0, 2, 5}}, {"mode", std::string("edge")}}),
       V("rank3_const", {T({2, 3, 5})}, {{"pads", I{0, 1, 2, 1, 0, 3}}, {"value", 2.0}}).reps(),
       V("rank3_reflect", {T({3, 5, 7})}, {{"pads", I{1, 2, 3, 2, 4, 6}}, {"mode", std::string("reflect")}}).reps(),
       V("rank1_edge", {T({13})}, {{"pads", I{0, 5}}, {"mode", std::string("edge")}}).reps(),
       V("large", {T(kLarge)}, {{"pads", I{1, 1, 1, 1}}})});
  add(t, Op::Concat, TolClass::bits,
      {V("three", {T({7, 3}), T({7, 5}), T({7, 1})}, {{"axis", int64_t{1}}}),
       V("neg_axis", {T({2, 3, 4}), T({2, 3, 2})}, {{"axis", int64_t{-1}}}).reps(),
       V("axis0_three", {T({2, 13}), T({5, 13}), T({1, 13})}, {{"axis", int64_t{0}}}).reps(),
       V("middle", {T({2, 3, 4}), T({2, 1, 4}), T({2, 2, 4})}, {{"axis", int64_t{1}}}).reps(),
       V("single", {T({7, 13})}, {{"axis", int64_t{0}}}).reps(), V("rank1", {T({3}), T({4})}, {{"axis", int64_t{0}}}).reps(),
       V("with_empty", {T({7, 0}), T({7, 4})}, {{"axis", int64_t{1}}}).reps(),
       V("large", {T(kLarge), T({67, 5})}, {{"axis", int64_t{1}}})});
}

// ---- gather and scatter
[[gnu::noinline]] void gather_and_scatter(std::vector<OpCases>& t) {
  add(t, Op::Gather, TolClass::bits,
      {V("axis0_neg_idx", {T({7, 13}), Idx(DType::i64, {5}, -7, 7)}, {{"axis", int64_t{0}}}),
       V("axis1_2d_idx", {T({7, 13}), Idx(DType::i32, {2, 3}, -13, 13)}, {{"axis", int64_t{1}}}),
       V("neg_axis", {T({3, 5, 7}), Idx(DType::i64, {4}, -7, 7)}, {{"axis", int64_t{-1}}}).reps(),
       V("middle_i16", {T({3, 5, 7}), Idx(DType::i16, {2, 2}, -5, 5)}, {{"axis", int64_t{1}}}).reps(),
       V("scalar_idx", {T({7, 13}), Idx(DType::i64, {}, -7, 7)}, {{"axis", int64_t{0}}}).reps(),
       V("u8_idx_default_axis", {T({7, 13}), Idx(DType::u8, {4}, 0, 7)}).reps(),
       V("clamped", {T({7, 13}), Idx(DType::i64, {6}, -20, 20)}, {{"axis", int64_t{0}}}).reps(),
       V("large", {T(kLarge), Idx(DType::i64, {40}, -67, 67)}, {{"axis", int64_t{0}}})});
  add(t, Op::ScatterAdd, TolClass::reduce,
      {V("axis0", {T({7, 13}), Idx(DType::i64, {5}, -7, 7), T({5, 13})}, {{"axis", int64_t{0}}}).k(5),
       V("axis1", {T({7, 13}), Idx(DType::i32, {4}, -13, 13), T({7, 4})}, {{"axis", int64_t{1}}}).k(4),
       V("repeats", {T({4, 6}), Idx(DType::i64, {10}, 0, 4), T({10, 6})}, {{"axis", int64_t{0}}}).k(10),
       V("neg_axis_2d_idx", {T({3, 5, 7}), Idx(DType::i64, {2, 3}, -5, 5), T({3, 2, 3, 7})}, {{"axis", int64_t{-2}}}).k(6),
       V("clamped", {T({7, 13}), Idx(DType::i64, {6}, -20, 20), T({6, 13})}, {{"axis", int64_t{0}}}).k(6)});

  // scatter assigns; with repeated indices the last update wins (ref and cpu both store in order)
  add(t, Op::Scatter, TolClass::bits,
      {V("axis0", {T({7, 13}), Idx(DType::i64, {5}, -7, 7), T({5, 13})}, {{"axis", int64_t{0}}}),
       V("axis1", {T({7, 13}), Idx(DType::i32, {4}, -13, 13), T({7, 4})}, {{"axis", int64_t{1}}}).reps(),
       V("repeats", {T({4, 6}), Idx(DType::i64, {10}, 0, 4), T({10, 6})}, {{"axis", int64_t{0}}}).reps(),
       V("neg_axis_2d_idx", {T({3, 5, 7}), Idx(DType::i64, {2, 3}, -5, 5), T({3, 2, 3, 7})}, {{"axis", int64_t{-2}}}).reps(),
       V("clamped", {T({7, 13}), Idx(DType::i64, {6}, -20, 20), T({6, 13})}, {{"axis", int64_t{0}}}).reps(),
       // per-sequence KV-cache slots: cache [batch, heads, ctx, dim], slots [batch, seq]
       V("batch_dims1_kv", {T({3, 2, 9, 4}), Idx(DType::i64, {3, 2}, 0, 9), T({3, 2, 2, 4})},
         {{"axis", int64_t{2}}, {"batch_dims", int64_t{1}}}).reps(),
       V("batch_dims2", {T({2, 3, 5, 4}), Idx(DType::i32, {2, 3, 2}, -5, 5), T({2, 3, 2, 4})},
         {{"axis", int64_t{2}}, {"batch_dims", int64_t{2}}}).reps()});
}

// ---- contraction
[[gnu::noinline]] void contraction(std::vector<OpCases>& t) {
  add(t, Op::Dot, TolClass::contraction,
      {V("mk_kn", {T({7, 13}), T({13, 5})}, {{"lhs_contract", I{1}}, {"rhs_contract", I{0}}}).k(13),
       V("batched", {T({3, 7, 13}), T({3, 13, 5})},
         {{"lhs_batch", I{0}}, {"rhs_batch", I{0}}, {"lhs_contract", I{2}}, {"rhs_contract", I{1}}}).k(13),
       V("trans_a", {T({13, 7}), T({13, 5})}, {{"lhs_contract", I{0}}, {"rhs_contract", I{0}}}).k(13),
       V("trans_b", {T({7, 13}), T({5, 13})}, {{"lhs_contract", I{1}}, {"rhs_contract", I{1}}}).k(13),
       V("two_contract", {T({4, 5, 6}), T({5, 6, 3})}, {{"lhs_contract", I{1, 2}}, {"rhs_contract", I{0, 1}}}).k(30),
       V("vec_vec", {T({13}), T({13})}, {{"lhs_contract", I{0}}, {"rhs_contract", I{0}}}).k(13),
       V("outer", {T({7}), T({5})}, {{"lhs_contract", I{}}, {"rhs_contract", I{}}}),
       V("batch_middle", {T({7, 3, 13}), T({3, 13, 5})},
         {{"lhs_batch", I{1}}, {"rhs_batch", I{0}}, {"lhs_contract", I{2}}, {"rhs_contract", I{1}}}).k(13),
       V("large", {T({64, 256}), T({256, 96})}, {{"lhs_contract", I{1}}, {"rhs_contract", I{0}}}).k(256),
       // 16-bit operands with an f32 result (out_type: what autocast's narrow form emits),
       // small and large enough for the cpu's native 16-bit GEMM, with a linear layer's
       // transposed weight and a batch
       V("out_f32", {T({7, 13}), T({13, 5})}, {{"lhs_contract", I{1}}, {"rhs_contract", I{0}}, {"out_type", DType::f32}})
           .k(13).dtypes({DType::bf16, DType::f16}),
       V("out_f32_linear", {T({2, 33, 256}), T({96, 256})},
         {{"lhs_contract", I{2}}, {"rhs_contract", I{1}}, {"out_type", DType::f32}})
           .k(256).dtypes({DType::bf16, DType::f16}),
       V("out_f32_batched", {T({3, 7, 13}), T({3, 13, 5})},
         {{"lhs_batch", I{0}}, {"rhs_batch", I{0}}, {"lhs_contract", I{2}}, {"rhs_contract", I{1}}, {"out_type", DType::f32}})
           .k(13).dtypes({DType::bf16})});
}

// ---- activations (composites)
[[gnu::noinline]] void activations(std::vector<OpCases>& t) {
  add(t, Op::Relu, TolClass::exact, unary_variants(Dist::standard));
  add(t, Op::Gelu, TolClass::composite, activation_variants());
  {
    std::vector<Variant> tanh_v = activation_variants();
    for (Variant& v : tanh_v) {
      v.name = "tanh_" + v.name;
      v.attrs.set("approximate", std::string("tanh"));
    }
    for (Variant& v : tanh_v) t.back().variants.push_back(std::move(v));
  }
  add(t, Op::Silu, TolClass::composite, activation_variants());
  add(t, Op::LeakyRelu, TolClass::composite, activation_variants());
  t.back().variants.push_back(V("alpha", {T({7, 13})}, {{"alpha", 0.2}}));
  t.back().variants.push_back(V("alpha_specials", {T({9, 11}, Dist::specials)}, {{"alpha", -1.5}}));
  add(t, Op::Softplus, TolClass::composite, activation_variants());
}

// ---- reductions and normalizations (composites)
[[gnu::noinline]] void normalizations(std::vector<OpCases>& t) {
  add(t, Op::ReduceMean, TolClass::reduce, reduce_variants(Dist::standard, false));
  add(t, Op::Softmax, TolClass::composite, softmax_variants());
  add(t, Op::LogSoftmax, TolClass::composite, softmax_variants());
  for (Op op : {Op::LayerNorm, Op::RmsNorm}) {
    std::vector<Variant> v = {
        V("last_affine", {T({4, 7, 13}), T({13}), T({13})}, {{"axis", int64_t{-1}}}).k(13),
        V("two_axes", {T({4, 7, 13}), T({7, 13}), T({13})}, {{"axis", int64_t{1}}}).k(91),
        V("no_affine_default_axis", {T({7, 13})}).k(13),
        V("scale_only", {T({7, 13}), T({13})}, {{"axis", int64_t{1}}}).k(13),
        V("eps", {T({7, 13}), T({13})}, {{"axis", int64_t{-1}}, {"epsilon", 0.1}}).k(13),
        V("offset_input", {T({5, 32}, Dist::positive), T({32})}, {{"axis", int64_t{-1}}}).k(32).mag(4),
        V("large", {T({8, 1024}), T({1024}), T({1024})}, {{"axis", int64_t{-1}}}).k(1024),
    };
    if (op == Op::RmsNorm) {
      for (Variant& x : v)
        if (x.inputs.size() == 3) x.inputs.pop_back();  // rms_norm has no bias
    }
    add(t, op, TolClass::composite, std::move(v));
  }
}

// ---- linear algebra and structure (composites)
[[gnu::noinline]] void linear_and_structure(std::vector<OpCases>& t) {
  add(t, Op::MatMul, TolClass::contraction,
      {V("2d", {T({7, 13}), T({13, 5})}).k(13), V("batched", {T({3, 7, 13}), T({3, 13, 5})}).k(13),
       V("bcast_b", {T({3, 7, 13}), T({13, 5})}).k(13), V("bcast_a", {T({7, 13}), T({3, 13, 5})}).k(13),
       V("bcast_partial", {T({2, 1, 7, 13}), T({3, 13, 5})}).k(13), V("vec_mat", {T({13}), T({13, 5})}).k(13),
       V("mat_vec", {T({7, 13}), T({13})}).k(13), V("vec_vec", {T({13}), T({13})}).k(13),
       V("k1", {T({7, 1}), T({1, 5})}), V("large", {T({64, 256}), T({256, 96})}).k(256),
       V("large_batched", {T({4, 33, 65}), T({4, 65, 47})}).k(65),
       // 16-bit operands with an f32 result (out_type: a narrow convolution's im2col product, A
       // shared by the batch), small and large enough for the cpu's native 16-bit GEMM
       V("out_f32_bcast_a", {T({7, 13}), T({3, 13, 5})}, {{"out_type", DType::f32}}).k(13).dtypes({DType::bf16, DType::f16}),
       V("out_f32_large_bcast_a", {T({1, 16, 72}), T({8, 1, 72, 121})}, {{"out_type", DType::f32}})
           .k(72).dtypes({DType::bf16})});
  add(t, Op::Gemm, TolClass::contraction,
      {V("nn", {T({7, 13}), T({13, 5})}).k(13),
       V("tn", {T({13, 7}), T({13, 5})}, {{"trans_a", int64_t{1}}}).k(13),
       V("nt", {T({7, 13}), T({5, 13})}, {{"trans_b", int64_t{1}}}).k(13),
       V("tt", {T({13, 7}), T({5, 13})}, {{"trans_a", int64_t{1}}, {"trans_b", int64_t{1}}}).k(13),
       V("bias_row", {T({7, 13}), T({13, 5}), T({5})}).k(13),
       V("full_c_scaled", {T({7, 13}), T({13, 5}), T({7, 5})}, {{"alpha", 0.5}, {"beta", 2.0}}).k(13).mag(4),
       V("scalar_c", {T({7, 13}), T({13, 5}), T({})}, {{"beta", 0.5}}).k(13),
       V("col_c_tn", {T({13, 7}), T({13, 5}), T({7, 1})}, {{"trans_a", int64_t{1}}, {"beta", -1.0}}).k(13),
       V("beta0", {T({7, 13}), T({13, 5}), T({7, 5})}, {{"beta", 0.0}}).k(13),
       V("alpha_only", {T({7, 13}), T({13, 5})}, {{"alpha", -1.5}}).k(13).mag(2),
       V("large_bias", {T({64, 256}), T({96, 256}), T({96})}, {{"trans_b", int64_t{1}}}).k(256)});
  add(t, Op::Embedding, TolClass::bits,
      {V("ids_1d", {T({11, 8}), Idx(DType::i64, {5}, -11, 11)}), V("ids_2d_i32", {T({11, 8}), Idx(DType::i32, {2, 3}, 0, 11)}),
       V("ids_scalar", {T({11, 8}), Idx(DType::i64, {}, 0, 11)}),
       V("large", {T({1000, 64}), Idx(DType::i64, {4, 50}, -1000, 1000)})});
  add(t, Op::Slice, TolClass::bits,
      {V("basic", {T({7, 13})}, {{"starts", I{1, 2}}, {"ends", I{5, 11}}}),
       V("neg_idx", {T({7, 13})}, {{"starts", I{-5}}, {"ends", I{-1}}, {"axes", I{1}}}).reps(),
       V("neg_steps", {T({7, 13})}, {{"starts", I{-1, 10}}, {"ends", I{-100, 1}}, {"axes", I{0, 1}}, {"steps", I{-1, -3}}}),
       V("clamped", {T({7, 13})}, {{"starts", I{-100, 3}}, {"ends", I{100, 1000}}, {"steps", I{2, 4}}}).reps(),
       V("neg_axes", {T({3, 5, 7})}, {{"starts", I{1}}, {"ends", I{4}}, {"axes", I{-2}}}).reps(),
       V("empty", {T({7, 13})}, {{"starts", I{5}}, {"ends", I{2}}, {"axes", I{0}}}).reps()});
  add(t, Op::Split, TolClass::bits,
      {V("axis0", {T({7, 13})}, {{"sizes", I{3, 4}}}),
       V("three_neg_axis", {T({3, 5, 7})}, {{"axis", int64_t{-1}}, {"sizes", I{2, 2, 3}}}).reps(),
       V("with_empty", {T({7, 13})}, {{"axis", int64_t{1}}, {"sizes", I{0, 13}}}).reps(),
       V("single", {T({7, 13})}, {{"sizes", I{7}}}).reps()});
  add(t, Op::Squeeze, TolClass::bits,
      {V("axis1", {T({7, 1, 13})}, {{"axes", I{1}}}), V("all", {T({1, 7, 1})}).reps(),
       V("neg_axes", {T({7, 1, 13, 1})}, {{"axes", I{-1, 1}}}).reps(), V("to_scalar", {T({1})}, {{"axes", I{0}}}).reps()});
  add(t, Op::Unsqueeze, TolClass::bits,
      {V("front_back", {T({7, 13})}, {{"axes", I{0, 3}}}), V("neg", {T({7, 13})}, {{"axes", I{-1}}}).reps(),
       V("scalar", {T({})}, {{"axes", I{0}}}).reps(), V("middle", {T({7, 13})}, {{"axes", I{1}}}).reps()});
}

// ---- convolution and pooling
[[gnu::noinline]] void convolution_and_pooling(std::vector<OpCases>& t) {
  add(t, Op::Conv2d, TolClass::contraction,
      {V("basic", {T({1, 3, 9, 11}), T({4, 3, 3, 3})}).k(27),
       V("stride_pad_bias", {T({2, 3, 9, 11}), T({4, 3, 3, 3}), T({4})}, {{"strides", I{2, 2}}, {"pads", I{1, 0, 2, 1}}}).k(27),
       V("dilation", {T({1, 2, 10, 9}), T({3, 2, 3, 2})}, {{"dilations", I{2, 1}}, {"pads", I{1, 1, 1, 1}}}).k(12),
       V("group2_bias", {T({1, 4, 7, 7}), T({6, 2, 3, 3}), T({6})}, {{"group", int64_t{2}}}).k(18),
       V("depthwise", {T({1, 4, 7, 7}), T({4, 1, 3, 3})}, {{"group", int64_t{4}}, {"pads", I{1, 1, 1, 1}}}).k(9),
       V("pointwise", {T({2, 8, 5, 6}), T({16, 8, 1, 1})}).k(8),
       V("asym_stride", {T({1, 3, 8, 13}), T({2, 3, 2, 4})}, {{"strides", I{1, 3}}, {"pads", I{0, 2, 0, 2}}}).k(24),
       V("large", {T({2, 16, 24, 24}), T({32, 16, 3, 3}), T({32})}, {{"pads", I{1, 1, 1, 1}}}).k(144),
       // 16-bit x and w with an f32 result and bias (out_type: autocast's narrow form), small
       // and large enough for the cpu's native 16-bit GEMM
       V("out_f32", {T({2, 3, 9, 11}), T({4, 3, 3, 3})}, {{"out_type", DType::f32}}).k(27).dtypes({DType::bf16, DType::f16}),
       V("out_f32_stride_pad_bias", {T({2, 3, 9, 11}), T({4, 3, 3, 3}), D(DType::f32, {4})},
         {{"strides", I{2, 2}}, {"pads", I{1, 0, 2, 1}}, {"out_type", DType::f32}}).k(27).dtypes({DType::bf16}),
       V("out_f32_large", {T({2, 16, 24, 24}), T({32, 16, 3, 3}), D(DType::f32, {32})},
         {{"pads", I{1, 1, 1, 1}}, {"out_type", DType::f32}}).k(144).dtypes({DType::bf16})});
  add(t, Op::MaxPool2d, TolClass::exact,
      {V("k3s2p1", {T({1, 3, 9, 11})}, {{"kernel", I{3, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}}),
       V("k2s2", {T({2, 3, 8, 8})}, {{"kernel", I{2, 2}}, {"strides", I{2, 2}}}),
       V("ceil", {T({1, 2, 9, 10})}, {{"kernel", I{3, 3}}, {"strides", I{2, 2}}, {"ceil_mode", int64_t{1}}}),
       V("dilation", {T({1, 2, 9, 9})}, {{"kernel", I{2, 3}}, {"dilations", I{2, 1}}, {"strides", I{1, 2}}}),
       V("default_stride", {T({1, 2, 5, 6})}, {{"kernel", I{2, 2}}}),
       V("specials", {T({1, 2, 6, 6}, Dist::specials)}, {{"kernel", I{2, 2}}, {"strides", I{2, 2}}})});
  add(t, Op::AvgPool2d, TolClass::reduce,
      {V("k3s2p1", {T({1, 3, 9, 11})}, {{"kernel", I{3, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}}).k(9),
       V("k3s2p1_count_pad", {T({1, 3, 9, 11})},
         {{"kernel", I{3, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}}).k(9),
       V("ceil_pad", {T({1, 2, 9, 10})},
         {{"kernel", I{3, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}, {"ceil_mode", int64_t{1}}}).k(9),
       V("k2s2", {T({2, 3, 8, 8})}, {{"kernel", I{2, 2}}, {"strides", I{2, 2}}}).k(4),
       V("asym", {T({1, 2, 7, 9})}, {{"kernel", I{2, 3}}, {"strides", I{1, 2}}, {"pads", I{1, 0, 0, 2}}}).k(6)});
}

// ---- transformer blocks
[[gnu::noinline]] void transformer_blocks(std::vector<OpCases>& t) {
  add(t, Op::Attention, TolClass::composite,
      {V("mha", {T({2, 2, 5, 8}), T({2, 2, 7, 8}), T({2, 2, 7, 8})}).k(8).mag(2),
       V("gqa_causal", {T({1, 4, 5, 8}), T({1, 2, 7, 8}), T({1, 2, 7, 8})}, {{"causal", int64_t{1}}}).k(8).mag(2),
       V("bool_mask", {T({2, 2, 5, 8}), T({2, 2, 7, 8}), T({2, 2, 7, 8}), D(DType::boolean, {2, 1, 5, 7}, Dist::mask)}).k(8).mag(2),
       V("float_mask", {T({2, 2, 5, 8}), T({2, 2, 7, 8}), T({2, 2, 7, 8}), T({5, 7}, Dist::mask)}).k(8).mag(2),
       V("causal_bool_mask", {T({1, 2, 6, 4}), T({1, 2, 6, 4}), T({1, 2, 6, 4}), D(DType::boolean, {1, 1, 6, 6}, Dist::mask)},
         {{"causal", int64_t{1}}}).k(6).mag(2),
       V("scale_dv", {T({1, 2, 3, 8}), T({1, 2, 4, 8}), T({1, 2, 4, 6})}, {{"scale", 0.5}}).k(8).mag(2),
       V("decode_gqa4", {T({2, 4, 1, 16}), T({2, 1, 9, 16}), T({2, 1, 9, 16})}, {{"causal", int64_t{1}}}).k(16).mag(2),
       V("bshd_gqa_causal_mask", {T({2, 5, 4, 8}), T({2, 7, 2, 8}), T({2, 7, 2, 6}), D(DType::boolean, {2, 1, 5, 7}, Dist::mask)},
         {{"causal", int64_t{1}}, {"layout", std::string("bshd")}}).k(8).mag(2),
       V("bshd_float_mask", {T({1, 4, 2, 8}), T({1, 6, 2, 8}), T({1, 6, 2, 8}), T({4, 6}, Dist::mask)},
         {{"layout", std::string("bshd")}}).k(8).mag(2),
       // Gemma 2's soft-capped scores (a cap small enough to bend them)
       V("softcap_gqa_mask", {T({1, 4, 5, 8}), T({1, 2, 7, 8}), T({1, 2, 7, 8}), D(DType::boolean, {1, 1, 5, 7}, Dist::mask)},
         {{"softcap", 1.5}}).k(8).mag(2),
       // 16-bit q, k, v with an f32 result (out_type: autocast's narrow form); the bshd one has
       // the rows and even head dimension of the cpu's bf16 direct kernel. The probabilities
       // are rounded to the operands' type for the value product: one bf16 step (2^-8) of a
       // probability, where a device's exp differs from ref's in the last bits
       V("out_f32_bshd_mask", {T({2, 9, 2, 16}), T({2, 9, 2, 16}), T({2, 9, 2, 16}), D(DType::boolean, {2, 1, 1, 9}, Dist::mask)},
         {{"layout", std::string("bshd")}, {"out_type", DType::f32}}).k(16).mag(2).dtypes({DType::bf16, DType::f16}).rounds(0x1p-8),
       V("out_f32_gqa_causal", {T({1, 4, 5, 8}), T({1, 2, 7, 8}), T({1, 2, 7, 8})},
         {{"causal", int64_t{1}}, {"out_type", DType::f32}}).k(8).mag(2).dtypes({DType::bf16}).rounds(0x1p-8),
       // q and k quantized to int8 per row for the scores (int8 BERT folders); the bshd one has
       // the rows and head dimension of the cpu's vpdpbusd direct kernel. f32 only: the
       // quantization is defined in f32 steps, which an f64 program may keep wider (directx)
       V("int8_scores_bshd_mask", {T({2, 9, 2, 16}), T({2, 9, 2, 16}), T({2, 9, 2, 16}), D(DType::boolean, {2, 1, 1, 9}, Dist::mask)},
         {{"layout", std::string("bshd")}, {"int8_scores", int64_t{1}}}).k(16).mag(2).dtypes({DType::f32}),
       V("int8_scores_gqa_causal", {T({1, 4, 5, 8}), T({1, 2, 7, 8}), T({1, 2, 7, 8})},
         {{"causal", int64_t{1}}, {"int8_scores", int64_t{1}}}).k(8).mag(2).dtypes({DType::f32})});
  // paged KV cache: pools [Hkv, blocks * block_size, D], random block tables (repeats allowed)
  // and masks over the gathered keys
  add(t, Op::PagedAttention, TolClass::composite,
      {V("gqa_decode", {T({3, 4, 1, 8}), T({2, 5 * 4, 8}), T({2, 5 * 4, 8}), Idx(DType::i64, {3, 3}, 0, 5),
                        D(DType::boolean, {3, 1, 1, 12}, Dist::mask)},
         {{"block_size", int64_t{4}}}).k(8).mag(2),
       V("bshd_prefill_softcap", {T({2, 5, 4, 8}), T({2, 6 * 3, 8}), T({2, 6 * 3, 6}), Idx(DType::i64, {2, 4}, 0, 6),
                                  D(DType::boolean, {2, 1, 5, 12}, Dist::mask)},
         {{"block_size", int64_t{3}}, {"layout", std::string("bshd")}, {"softcap", 1.5}, {"scale", 0.3}}).k(8).mag(2),
       V("float_mask_mha", {T({1, 2, 3, 4}), T({2, 4 * 2, 4}), T({2, 4 * 2, 4}), Idx(DType::i64, {1, 2}, 0, 4),
                            T({1, 2, 3, 4}, Dist::mask)},
         {{"block_size", int64_t{2}}}).k(4).mag(2),
       // a decode step with head sizes that are not whole vectors (the CPU's decode kernel's tails)
       V("decode_odd_dims_softcap", {T({2, 6, 1, 12}), T({3, 5 * 4, 12}), T({3, 5 * 4, 10}), Idx(DType::i64, {2, 3}, 0, 5),
                                     T({2, 1, 1, 12}, Dist::mask)},
         {{"block_size", int64_t{4}}, {"softcap", 2.0}}).k(12).mag(2)});
  add(t, Op::Rope, TolClass::composite,
      {V("half", {T({2, 3, 5, 8}), Idx(DType::i64, {5}, 0, 64)}).mag(2),
       V("interleaved", {T({2, 3, 5, 8}), Idx(DType::i64, {5}, 0, 64)}, {{"interleaved", int64_t{1}}}).mag(2),
       V("batched_pos_theta", {T({2, 3, 5, 8}), Idx(DType::i32, {2, 5}, 0, 1000)}, {{"theta", 500.0}}).mag(2),
       V("batched_interleaved", {T({2, 3, 5, 8}), Idx(DType::i32, {2, 5}, 0, 1000)}, {{"interleaved", int64_t{1}}}).mag(2),
       V("long_positions", {T({1, 2, 7, 16}), Idx(DType::i64, {7}, 0, 4096)}).mag(2),
       V("bshd", {T({2, 5, 3, 8}), Idx(DType::i64, {5}, 0, 64)}, {{"layout", std::string("bshd")}}).mag(2),
       V("bshd_interleaved_batched", {T({2, 5, 3, 8}), Idx(DType::i32, {2, 5}, 0, 1000)},
         {{"layout", std::string("bshd")}, {"interleaved", int64_t{1}}}).mag(2),
       // scaled frequencies (Llama 3 / linear rope scaling) given explicitly
       V("inv_freq", {T({2, 3, 5, 8}), Idx(DType::i64, {5}, 0, 512)}, {{"inv_freq", std::vector<double>{1.0, 0.1, 0.0125, 1e-4}}})
           .mag(2),
       V("bshd_inv_freq_interleaved", {T({1, 5, 2, 8}), Idx(DType::i32, {1, 5}, 0, 512)},
         {{"layout", std::string("bshd")}, {"interleaved", int64_t{1}}, {"inv_freq", std::vector<double>{0.5, 0.05, 0.005, 5e-4}}})
           .mag(2)});
}

// ---- quantized weights (u8 blocks in ggml's formats)
[[gnu::noinline]] void quantized_weights(std::vector<OpCases>& t) {
  std::vector<Variant> dq, qm;
  for (const char* f : {"f16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k",
                        "iq4_nl", "iq4_xs"}) {
    const std::string fmt = f;
    const int64_t cols = 2 * quant_block(fmt);
    dq.push_back(V(fmt, {Q(fmt, 3, cols)}, {{"format", fmt}, {"cols", cols}}).dtypes({DType::u8}));
  }
  dq.push_back(V("q8_0_batched_rows", {InputSpec{{2, 3, 68}, DType::u8, Dist::quant, 0, 0, "q8_0"}},
                 {{"format", std::string("q8_0")}, {"cols", int64_t{64}}}).dtypes({DType::u8}));
  add(t, Op::Dequantize, TolClass::arith, std::move(dq));
  for (const char* f : {"q8_0", "q4_0", "q4_k", "q6_k", "f16"}) {
    const std::string fmt = f;
    const int64_t k = 2 * quant_block(fmt);
    qm.push_back(V(fmt, {T({5, k}, Dist::unit), Q(fmt, 7, k)}, {{"format", fmt}}).k(k).mag(0.05));
  }
  qm.push_back(V("q8_0_batched", {T({2, 3, 64}, Dist::unit), Q("q8_0", 9, 64)}, {{"format", std::string("q8_0")}}).k(64).mag(0.05));
  qm.push_back(V("q4_0_vec", {T({64}, Dist::unit), Q("q4_0", 9, 64)}, {{"format", std::string("q4_0")}}).k(64).mag(0.05));
  add(t, Op::QMatMul, TolClass::contraction, std::move(qm));
}

// ---- int8 linear layer: f32 x quantized per token or per tensor, i8 weights, f32 scales
[[gnu::noinline]] void int8_linear(std::vector<OpCases>& t) {
  add(t, Op::Int8MatMul, TolClass::contraction,
      {V("per_token_bias", {T({5, 64}), D(DType::i8, {7, 64}, Dist::full_range), D(DType::f32, {7}, Dist::positive),
                            D(DType::f32, {7})}).dtypes({DType::f32}).k(64).mag(300),
       V("per_token_odd_k", {T({2, 3, 37}), D(DType::i8, {6, 37}, Dist::full_range), D(DType::f32, {6}, Dist::positive)})
           .dtypes({DType::f32}).k(37).mag(300),
       V("per_tensor_scales", {T({4, 32}), D(DType::i8, {9, 32}, Dist::full_range), D(DType::f32, {}, Dist::positive)},
         {{"x_scale", 0.02}}).dtypes({DType::f32}).k(32).mag(300)});
}

// ---- fake quantization (quantization-aware training): wide inputs clip at qmin/qmax; f32/f64
// only, where every device rounds each step as the reference does (an f16 chain fused in f32
// would round x / scale differently and move a value by one whole step)
[[gnu::noinline]] void fake_quantization(std::vector<OpCases>& t) {
  add(t, Op::FakeQuantize, TolClass::arith,
      {V("per_tensor", {T({5, 7}), T({}, Dist::positive), T({}, Dist::integral)}).dtypes({DType::f32, DType::f64}).mag(4),
       V("per_tensor_clipped", {T({3, 4, 5}, Dist::wide), T({1}, Dist::positive), T({1}, Dist::integral)})
           .dtypes({DType::f32, DType::f64}).mag(50),
       V("per_channel_axis1", {T({2, 6, 3, 3}, Dist::wide), T({6}, Dist::positive), T({6}, Dist::integral)},
         {{"axis", int64_t{1}}}).dtypes({DType::f32, DType::f64}).mag(50),
       V("per_channel_last_symmetric", {T({9, 4}), T({4}, Dist::positive), T({4}, Dist::integral)},
         {{"axis", int64_t{-1}}, {"qmin", int64_t{-127}}, {"qmax", int64_t{127}}}).dtypes({DType::f32, DType::f64}).mag(4),
       V("uint8_range", {T({4, 8}, Dist::wide), T({}, Dist::positive), T({}, Dist::integral)},
         {{"qmin", int64_t{0}}, {"qmax", int64_t{255}}}).dtypes({DType::f32, DType::f64}).mag(50)});
}

// ---- dense linear algebra (f32/f64; Dist::dominant keeps every matrix well conditioned,
// SPD in its symmetric part, with well-separated eigen/singular values)
[[gnu::noinline]] void dense_linear_algebra(std::vector<OpCases>& t) {
  const Dist dom = Dist::dominant;
  auto sq = [&](Sizes s) { return T(std::move(s), dom); };
  // tolerances: LAPACK and the reference's plain loops round differently; scale by n^3
  for (Op op : {Op::Lu, Op::Cholesky, Op::Eigh, Op::Det, Op::Slogdet}) {
    const double mag = op == Op::Det ? 3e7 : 40;
    add(t, op, TolClass::contraction,
        {V("6x6", {sq({6, 6})}).k(216).mag(mag), V("batched", {sq({2, 3, 6, 6})}).k(216).mag(mag),
         V("1x1", {sq({1, 1})}).mag(mag)});
  }
  for (Op op : {Op::Qr, Op::Svd})
    add(t, op, TolClass::contraction,
        {V("square", {sq({6, 6})}).k(216).mag(40), V("tall", {sq({9, 6})}).k(216).mag(40),
         V("wide", {sq({6, 9})}).k(216).mag(40), V("batched", {sq({2, 7, 5})}).k(216).mag(40)});
  add(t, Op::TriangularSolve, TolClass::contraction,
      {V("lower", {sq({6, 6}), T({6, 3})}).k(216), V("upper_transposed", {sq({6, 6}), T({6, 3})},
                                                         {{"lower", int64_t{0}}, {"transpose", int64_t{1}}}).k(216),
       V("unit_batched", {sq({2, 6, 6}), T({2, 6, 4})}, {{"unit_diagonal", int64_t{1}}}).k(216).mag(40)});
  add(t, Op::Solve, TolClass::contraction,
      {V("6x6", {sq({6, 6}), T({6, 3})}).k(216), V("batched", {sq({3, 6, 6}), T({3, 6, 1})}).k(216)});
  add(t, Op::Lstsq, TolClass::contraction,
      {V("tall", {sq({9, 6}), T({9, 2})}).k(216), V("batched", {sq({2, 8, 5}), T({2, 8, 3})}).k(216)});
}

// ---- 3D Gaussian splatting (cpu and ref run the same host kernels, opencl its own; the NumPy renderer and
// the finite-difference tests of tests/sci are their ground truth). The camera sits 6 units
// behind the scene, so standard-distributed means are in front of it.
[[gnu::noinline]] void splatting(std::vector<OpCases>& t) {
  const Attrs cam{{"viewmat", std::vector<double>{1, 0, 0, 0.1, 0, 1, 0, -0.2, 0, 0, 1, 6, 0, 0, 0, 1}},
                  {"fx", 20.0}, {"fy", 22.0}, {"cx", 16.0}, {"cy", 12.0}, {"width", int64_t{32}},
                  {"height", int64_t{24}}};
  const Attrs img{{"width", int64_t{32}}, {"height", int64_t{24}}, {"tile", int64_t{8}}};
  const int64_t n = 9;
  auto gauss = [&](int64_t k) {
    return std::vector<InputSpec>{T({n, 3}), T({n, 3}, Dist::unit), T({n, 4}), T({n, k, 3}, Dist::unit)};
  };
  auto plus = [](std::vector<InputSpec> a, std::vector<InputSpec> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  add(t, Op::SplatProject, TolClass::composite,
      {V("sh_degree0", gauss(1), cam).dtypes({DType::f32, DType::f64}),
       V("sh_degree3", gauss(16), cam).dtypes({DType::f32, DType::f64})});
  add(t, Op::SplatProjectBackward, TolClass::composite,
      {V("sh_degree2", plus(gauss(9), {T({n, 2}), T({n, 3}), T({n}), T({n, 3})}), cam).dtypes({DType::f32, DType::f64})});
  // 2D means spread over the image, positive conics and radii, opacities up to 4 (alpha
  // clamps at 0.99)
  const std::vector<InputSpec> raster = {T({n, 2}, Dist::wide), T({n, 3}, Dist::positive), T({n, 3}, Dist::unit),
                                         T({n}, Dist::positive), T({n}), T({n}, Dist::positive), T({3}, Dist::unit)};
  add(t, Op::SplatRasterize, TolClass::composite, {V("tiles8", raster, img).dtypes({DType::f32, DType::f64})});
  add(t, Op::SplatRasterizeBackward, TolClass::composite,
      {V("tiles8", plus(raster, {T({24, 32, 3})}), img).dtypes({DType::f32, DType::f64})});
}

// ---- CSR matrices (the sparse ops): the three arrays of one n x m matrix come from one fixed
// irregular pattern (csr_test_pattern), values and dense operands are fresh random numbers;
// cpu runs the thread-pooled kernel and SuiteSparse, ref plain loops and a dense LU
[[gnu::noinline]] void csr_matrices(std::vector<OpCases>& t) {
  auto csr = [](DType it, int64_t n, int64_t m) {
    const int64_t nnz = static_cast<int64_t>(csr_test_pattern(n, m).col_idx.size());
    return std::vector<InputSpec>{InputSpec{{n + 1}, it, Dist::csr_row_ptr, n, m, ""},
                                  InputSpec{{nnz}, it, Dist::csr_col_idx, n, m, ""},
                                  InputSpec{{nnz}, std::nullopt, Dist::csr_values, n, m, ""}};
  };
  auto with = [](std::vector<InputSpec> a, std::vector<InputSpec> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<DType> fl = {DType::f32, DType::f64};
  // COO triplets with random (repeating) indices: the sort order, row_ptr and positions are
  // exact, the values a permutation
  auto coo = [](DType it, int64_t nnz, int64_t n, int64_t m) {
    return std::vector<InputSpec>{InputSpec{{nnz}, it, Dist::index, 0, n, ""}, InputSpec{{nnz}, it, Dist::index, 0, m, ""},
                                  T({nnz})};
  };
  add(t, Op::CooToCsr, TolClass::bits,
      {V("i32", coo(DType::i32, 40, 9, 6), {{"rows", int64_t{9}}, {"cols", int64_t{6}}}).dtypes(fl),
       V("i64_empty_rows", coo(DType::i64, 25, 30, 4), {{"rows", int64_t{30}}, {"cols", int64_t{4}}}).dtypes(fl)});
  add(t, Op::SpmvCsr, TolClass::contraction,
      {V("spmv_i32", with(csr(DType::i32, 9, 6), {T({6})})).dtypes(fl).k(5).mag(14),
       V("spmm_i64", with(csr(DType::i64, 9, 6), {T({6, 3})})).dtypes(fl).k(5).mag(14),
       V("transposed", with(csr(DType::i32, 9, 6), {T({9, 2})}), {{"transpose", int64_t{1}}, {"cols", int64_t{6}}})
           .dtypes(fl).k(9).mag(14),
       // enough nonzeros for the cpu's threaded path
       V("threaded", with(csr(DType::i32, 9000, 9000), {T({9000})})).dtypes(fl).k(5).mag(18002)});
  add(t, Op::SddmmCsr, TolClass::contraction,
      {V("vector", {InputSpec{{10}, DType::i32, Dist::csr_row_ptr, 9, 6, ""},
                    InputSpec{{static_cast<int64_t>(csr_test_pattern(9, 6).col_idx.size())}, DType::i32,
                              Dist::csr_col_idx, 9, 6, ""},
                    T({9}), T({6})}).dtypes(fl).k(1),
       V("k3_i64", {InputSpec{{10}, DType::i64, Dist::csr_row_ptr, 9, 6, ""},
                    InputSpec{{static_cast<int64_t>(csr_test_pattern(9, 6).col_idx.size())}, DType::i64,
                              Dist::csr_col_idx, 9, 6, ""},
                    T({9, 3}), T({6, 3})}).dtypes(fl).k(3)});
  const Attrs chol{{"method", std::string("cholesky")}};
  add(t, Op::SparseSolve, TolClass::contraction,
      {V("lu_i32", with(csr(DType::i32, 8, 8), {T({8})})).dtypes(fl).k(64).mag(4),
       V("cholesky_i64", with(csr(DType::i64, 8, 8), {T({8, 2})}), chol).dtypes(fl).k(64).mag(4)});
  add(t, Op::SparseSolveBackward, TolClass::contraction,
      {V("lu_i64", with(csr(DType::i64, 8, 8), {T({8, 2}), T({8, 2})})).dtypes(fl).k(64).mag(8),
       V("cholesky_i32", with(csr(DType::i32, 8, 8), {T({8}), T({8})}), chol).dtypes(fl).k(64).mag(8)});
}

// ---- collectives, in one process (a group of one rank: every collective is a copy); the
// multi-rank results are checked under mpirun by tests/dist
[[gnu::noinline]] void collectives(std::vector<OpCases>& t) {
  add(t, Op::AllReduce, TolClass::bits,
      {V("sum", {T({7, 13})}), V("max", {T({2, 3, 5})}, {{"reduce", std::string("max")}})});
  add(t, Op::AllGather, TolClass::bits,
      {V("axis0", {T({7, 13})}, {{"ranks", int64_t{1}}}),
       V("axis1", {T({2, 3, 5})}, {{"axis", int64_t{1}}, {"ranks", int64_t{1}}})});
  add(t, Op::ReduceScatter, TolClass::bits,
      {V("axis0", {T({8, 5})}, {{"ranks", int64_t{1}}}),
       V("neg_axis", {T({2, 3, 4})}, {{"axis", int64_t{-1}}, {"ranks", int64_t{1}}})});
  add(t, Op::Broadcast, TolClass::bits, {V("root0", {T({4, 9})})});
}

std::vector<OpCases> build() {
  std::vector<OpCases> t;
  for (auto family : {sources, elementwise_unary, complex_parts, elementwise_binary, where_and_cast, reductions,
                      movement, gather_and_scatter, contraction, activations, normalizations, linear_and_structure,
                      convolution_and_pooling, transformer_blocks, quantized_weights, int8_linear, fake_quantization,
                      dense_linear_algebra, splatting, csr_matrices, collectives})
    family(t);
  return t;
}

}  // namespace

const std::vector<OpCases>& case_table() {
  static const std::vector<OpCases> t = build();
  return t;
}

const OpCases* cases_for(Op op) {
  for (const OpCases& c : case_table())
    if (c.op == op) return &c;
  return nullptr;
}

// param and constant are not computations; the data-dependent ops (nonzero, unique,
// non_max_suppression) have no device kernel on any device: Model::run computes them on the
// host between device programs, so there is no per-device behaviour to compare. They are
// checked on every device as parts of staged graphs (tests/unit/data_dependent_test.cpp) and
// against ONNX Runtime (the ONNX node and opset tests).
bool exempt_from_cases(Op op) {
  return op == Op::Param || op == Op::Constant || op_info(op).family == OpFamily::data_dependent;
}

}  // namespace rlx::conformance
