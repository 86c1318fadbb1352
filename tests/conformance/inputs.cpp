// Random inputs for conformance cases: every case gets its own generator derived from the run
// seed, and values respect the variant's domain (positive for log, non-zero divisors, indices
// in range, masks that never hide a whole row).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "conformance.h"
#include "rlx/ops.h"

namespace rlx::conformance {

std::string_view dist_name(Dist d) {
  switch (d) {
    case Dist::standard: return "standard";
    case Dist::unit: return "unit";
    case Dist::positive: return "positive";
    case Dist::wide: return "wide";
    case Dist::nonzero: return "nonzero";
    case Dist::with_zeros: return "with_zeros";
    case Dist::exponent: return "exponent";
    case Dist::integral: return "integral";
    case Dist::halves: return "halves";
    case Dist::specials: return "specials";
    case Dist::int_edges: return "int_edges";
    case Dist::near_one: return "near_one";
    case Dist::full_range: return "full_range";
    case Dist::index: return "index";
    case Dist::mask: return "mask";
    case Dist::quant: return "quant";
    case Dist::dominant: return "dominant";
    case Dist::csr_row_ptr: return "csr_row_ptr";
    case Dist::csr_col_idx: return "csr_col_idx";
    case Dist::csr_values: return "csr_values";
  }
  return "?";
}

const std::vector<DType>& candidate_dtypes() {
  static const std::vector<DType> d = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::c64, DType::i8,
                                       DType::u8,  DType::i16, DType::u16,  DType::i32, DType::u32, DType::i64,
                                       DType::u64, DType::boolean, DType::i4, DType::u4};
  return d;
}

namespace {

uint64_t fnv(std::string_view s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Stores a 64-bit integer into element i of an integer tensor, truncating to its width (two's
// complement), without going through double (which would lose bits of i64/u64).
void set_int_bits(Tensor& t, int64_t i, uint64_t v) {
  const DType dt = t.dtype();
  if (is_packed(dt)) {
    t.set_f64(i, dt == DType::i4 ? static_cast<double>(static_cast<int64_t>(v << 60) >> 60) : static_cast<double>(v & 15));
    return;
  }
  const int bytes = dtype_bits(dt) / 8;
  std::memcpy(t.bytes() + i * bytes, &v, static_cast<size_t>(bytes));  // little endian
}

struct IntRange {
  int64_t lo, hi;  // inclusive
};

IntRange int_limits(DType dt) {
  switch (dt) {
    case DType::i8: return {-128, 127};
    case DType::u8: return {0, 255};
    case DType::i16: return {-32768, 32767};
    case DType::u16: return {0, 65535};
    case DType::i32: return {INT32_MIN, INT32_MAX};
    case DType::u32: return {0, UINT32_MAX};
    case DType::i4: return {-8, 7};
    case DType::u4: return {0, 15};
    case DType::boolean: return {0, 1};
    default: return {INT64_MIN, INT64_MAX};  // i64; u64 handled by bits
  }
}

IntRange clamp_range(DType dt, int64_t lo, int64_t hi) {
  IntRange l = int_limits(dt);
  return {std::max(lo, l.lo), std::min(hi, l.hi)};
}

double float_value(Dist d, std::mt19937_64& rng, DType dt) {
  auto u = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto coin = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto ii = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  switch (d) {
    case Dist::standard: return u(-2, 2);
    case Dist::unit: return u(-1, 1);
    case Dist::positive: return u(0.05, 4);
    case Dist::wide: return u(-50, 50);
    case Dist::nonzero: return (coin(0.5) ? -1 : 1) * u(0.25, 4);
    case Dist::with_zeros: return coin(0.35) ? (coin(0.5) ? 0.0 : -0.0) : u(-2, 2);
    case Dist::exponent: return u(-3, 3);
    case Dist::integral: return static_cast<double>(ii(-4, 4));
    case Dist::halves: return static_cast<double>(ii(-6, 6)) + (coin(0.6) ? 0.5 : 0.0) + (coin(0.2) ? u(-0.2, 0.2) : 0.0);
    case Dist::near_one: return (coin(0.5) ? -1 : 1) * u(0.7, 1.4);
    case Dist::full_range: return coin(0.1) ? static_cast<double>(ii(-300, 300)) : u(-300, 300);
    case Dist::specials: {
      const double inf = std::numeric_limits<double>::infinity();
      const double big = dt == DType::f16 ? 60000.0 : dt == DType::f64 ? 1e300 : 3e38;
      const double sub = dt == DType::f16 ? 3e-6 : dt == DType::bf16 ? 1e-39 : dt == DType::f64 ? 1e-310 : 1e-40;
      static const int kinds = 14;
      switch (ii(0, kinds + 5)) {
        case 0: return std::numeric_limits<double>::quiet_NaN();
        case 1: return inf;
        case 2: return -inf;
        case 3: return 0.0;
        case 4: return -0.0;
        case 5: return big;
        case 6: return -big;
        case 7: return sub;
        case 8: return -sub;
        case 9: return 1.0;
        case 10: return -1.0;
        case 11: return 0.5;
        case 12: return 2.5;
        case 13: return -2.5;
        default: return u(-3, 3);
      }
    }
    case Dist::int_edges:
    case Dist::index:
    case Dist::mask:
    case Dist::quant: return u(-2, 2);
    case Dist::dominant:
    case Dist::csr_row_ptr:
    case Dist::csr_col_idx:
    case Dist::csr_values: return u(-1, 1);
  }
  return u(-2, 2);
}

uint64_t int_value(Dist d, std::mt19937_64& rng, DType dt, int64_t lo, int64_t hi) {
  auto coin = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto ii = [&](IntRange r) { return static_cast<uint64_t>(std::uniform_int_distribution<int64_t>(r.lo, r.hi)(rng)); };
  const bool uns = is_unsigned_int(dt);
  switch (d) {
    case Dist::standard: return ii(clamp_range(dt, uns ? 0 : -30, uns ? 60 : 30));
    case Dist::unit: return ii(clamp_range(dt, uns ? 0 : -8, 8));
    case Dist::positive: return ii(clamp_range(dt, 1, 20));
    case Dist::wide: return ii(clamp_range(dt, uns ? 0 : -1000, uns ? 2000 : 1000));
    case Dist::nonzero: {
      uint64_t v = ii(clamp_range(dt, 1, 20));
      return (!uns && coin(0.5)) ? 0 - v : v;
    }
    case Dist::with_zeros: return coin(0.35) ? 0 : ii(clamp_range(dt, uns ? 0 : -30, uns ? 60 : 30));
    case Dist::exponent: return ii(clamp_range(dt, uns ? 0 : -2, 6));
    case Dist::integral:
    case Dist::halves: return ii(clamp_range(dt, uns ? 0 : -4, 4));
    case Dist::near_one: return ii(clamp_range(dt, uns ? 0 : -3, 3));
    case Dist::specials:
    case Dist::int_edges: {
      IntRange l = int_limits(dt);
      uint64_t lo_bits = dt == DType::u64 ? 0 : static_cast<uint64_t>(l.lo);
      uint64_t hi_bits = dt == DType::u64 ? UINT64_MAX : static_cast<uint64_t>(l.hi);
      switch (ii({0, 9})) {
        case 0: return lo_bits;
        case 1: return hi_bits;
        case 2: return uns ? 2 : UINT64_MAX;  // -1
        case 3: return 0;
        case 4: return 1;
        case 5: return lo_bits + 1;
        default: return rng();
      }
    }
    case Dist::full_range: return rng();
    case Dist::index: return static_cast<uint64_t>(std::uniform_int_distribution<int64_t>(lo, hi - 1)(rng));
    case Dist::mask: return coin(0.7) ? 1 : 0;
    case Dist::quant: return ii({0, 255});
    case Dist::dominant: return ii(clamp_range(dt, uns ? 0 : -8, 8));
    case Dist::csr_row_ptr:
    case Dist::csr_col_idx:
    case Dist::csr_values: return 0;  // filled from csr_test_pattern() below
  }
  return 0;
}

// Where the scales of one block of each format live (ggml's layouts): f16 fields, and the
// f32 scale of q8_k. Every other byte of a block may hold any value.
struct ScaleFields {
  std::vector<int> f16_offsets;
  int f32_offset = -1;
};

ScaleFields scale_fields(std::string_view fmt) {
  if (fmt == "q4_0" || fmt == "q5_0" || fmt == "q8_0" || fmt == "iq4_nl" || fmt == "iq4_xs") return {{0}};
  if (fmt == "q4_1" || fmt == "q5_1" || fmt == "q4_k" || fmt == "q5_k") return {{0, 2}};
  if (fmt == "q2_k") return {{80, 82}};
  if (fmt == "q3_k") return {{108}};
  if (fmt == "q6_k") return {{208}};
  if (fmt == "q8_k") return {{}, 0};
  return {};
}

// Random bytes with every scale of every block a small finite number (random bytes as f16
// scales would be NaN or huge now and then); format f16 holds f16 values in [-2, 2].
void fill_quant_blocks(Tensor& t, const std::string& fmt, std::mt19937_64& rng) {
  auto qf = quant_format(fmt);
  uint8_t* p = t.data<uint8_t>();
  const int64_t n = t.numel();
  std::uniform_real_distribution<double> scale(0.002, 0.05), val(-2, 2);
  auto put_f16 = [&](int64_t at, double v) {
    uint16_t h = f32_to_f16(static_cast<float>(v));
    std::memcpy(p + at, &h, 2);
  };
  if (fmt == "f16") {
    for (int64_t i = 0; i + 1 < n; i += 2) put_f16(i, val(rng));
    return;
  }
  if (!qf) return;
  ScaleFields sf = scale_fields(fmt);
  for (int64_t b = 0; b + qf->block_bytes <= n; b += qf->block_bytes) {
    for (int off : sf.f16_offsets) put_f16(b + off, scale(rng));
    if (sf.f32_offset >= 0) {
      float f = static_cast<float>(scale(rng));
      std::memcpy(p + b + sf.f32_offset, &f, 4);
    }
  }
}

}  // namespace

std::mt19937_64 case_rng(uint64_t seed, Op op, DType dt, const std::string& variant, const std::string& salt) {
  uint64_t h = fnv(op_name(op), 0xcbf29ce484222325ULL ^ seed);
  h = fnv(dtype_name(dt), h);
  h = fnv(variant, h);
  h = fnv(salt, h);
  std::seed_seq ss{static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(seed),
                   static_cast<uint32_t>(seed >> 32)};
  return std::mt19937_64(ss);
}

DType input_dtype(const InputSpec& spec, DType case_dtype) { return spec.dtype ? *spec.dtype : case_dtype; }

Tensor make_input(const InputSpec& spec, DType case_dtype, std::mt19937_64& rng) {
  const DType dt = input_dtype(spec, case_dtype);
  Tensor t = Tensor::zeros(dt, spec.shape);
  const int64_t n = t.numel();
  const bool zeros_allowed = spec.dist == Dist::with_zeros || spec.dist == Dist::index;
  for (int64_t i = 0; i < n; ++i) {
    if (is_float(dt)) {
      t.set_f64(i, float_value(spec.dist, rng, dt));
    } else if (is_complex(dt)) {
      t.set_f64(i, float_value(spec.dist, rng, DType::f32));
      t.set_imag(i, float_value(spec.dist, rng, DType::f32));
    } else if (dt == DType::boolean) {
      uint64_t v = spec.dist == Dist::mask ? int_value(Dist::mask, rng, dt, 0, 2)
                                           : std::uniform_int_distribution<int>(0, 1)(rng);
      t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    } else {
      set_int_bits(t, i, int_value(spec.dist, rng, dt, spec.lo, spec.hi));
    }
  }
  if (spec.dist == Dist::quant && dt == DType::u8) fill_quant_blocks(t, spec.quant, rng);
  // special values: every one of them at a random place (when the tensor has room for all),
  // so a bug that only one of them shows fails every run, not one run in a few
  if ((spec.dist == Dist::specials || spec.dist == Dist::int_edges) && !is_complex(dt) && dt != DType::boolean) {
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[i] = i;
    std::shuffle(pos.begin(), pos.end(), rng);
    if (is_float(dt)) {
      const double inf = std::numeric_limits<double>::infinity();
      const double big = dt == DType::f16 ? 60000.0 : dt == DType::f64 ? 1e300 : 3e38;
      const double sub = dt == DType::f16 ? 3e-6 : dt == DType::bf16 ? 1e-39 : dt == DType::f64 ? 1e-310 : 1e-40;
      const double vals[] = {std::numeric_limits<double>::quiet_NaN(), inf, -inf, 0.0, -0.0, big, -big, sub, -sub,
                             1.0, -1.0, 0.5, 2.5, -2.5};
      const int64_t k = static_cast<int64_t>(std::size(vals));
      if (n >= k)
        for (int64_t i = 0; i < k; ++i) t.set_f64(pos[i], vals[i]);
    } else if (is_int(dt)) {
      IntRange l = int_limits(dt);
      const bool uns = is_unsigned_int(dt);
      const uint64_t lo = dt == DType::u64 ? 0 : static_cast<uint64_t>(l.lo);
      const uint64_t hi = dt == DType::u64 ? UINT64_MAX : static_cast<uint64_t>(l.hi);
      const uint64_t vals[] = {lo, hi, uns ? 2 : UINT64_MAX, 0, 1, lo + 1, hi - 1};
      const int64_t k = static_cast<int64_t>(std::size(vals));
      if (n >= k)
        for (int64_t i = 0; i < k; ++i) set_int_bits(t, pos[i], vals[i]);
    }
  }
  // masks: column 0 of every row attends, so no softmax row is entirely masked
  if (spec.dist == Dist::mask && dt == DType::boolean && !spec.shape.empty()) {
    const int64_t cols = spec.shape.back();
    for (int64_t i = 0; cols > 0 && i < n; i += cols) t.data<uint8_t>()[i] = 1;
  }
  if (spec.dist == Dist::mask && is_float(dt) && !spec.shape.empty()) {
    // an additive float mask: 0 or a large negative number, column 0 always 0
    const int64_t cols = spec.shape.back();
    std::uniform_real_distribution<double> c(0, 1);
    for (int64_t i = 0; i < n; ++i) t.set_f64(i, (cols > 0 && i % cols == 0) || c(rng) < 0.7 ? 0.0 : -1e4 * c(rng));
  }
  if (spec.dist == Dist::csr_row_ptr || spec.dist == Dist::csr_col_idx || spec.dist == Dist::csr_values) {
    const CsrPattern p = csr_test_pattern(spec.lo, spec.hi);
    const std::vector<int64_t>& a = spec.dist == Dist::csr_row_ptr ? p.row_ptr : p.col_idx;
    // a case whose shape does not match the pattern fails at run time (the ops check the index
    // data), which names the case
    const int64_t count = std::min<int64_t>(n, static_cast<int64_t>(a.size()));
    if (spec.dist != Dist::csr_values) {
      for (int64_t i = 0; i < count; ++i) set_int_bits(t, i, static_cast<uint64_t>(a[i]));
    } else {
      for (int64_t row = 0; row + 1 < static_cast<int64_t>(p.row_ptr.size()); ++row)
        for (int64_t q = p.row_ptr[row]; q < p.row_ptr[row + 1] && q < count; ++q)
          if (p.col_idx[q] == row) t.set_f64(q, t.get_f64(q) + static_cast<double>(2 * spec.hi + 2));
    }
  }
  if (spec.dist == Dist::dominant && is_float(dt) && spec.shape.size() >= 2) {
    const int64_t rows = spec.shape[spec.shape.size() - 2], cols = spec.shape.back(), d = std::min(rows, cols);
    for (int64_t b = 0; rows * cols > 0 && b < n / (rows * cols); ++b)
      for (int64_t i = 0; i < d; ++i) {
        const int64_t at = b * rows * cols + i * cols + i;
        t.set_f64(at, t.get_f64(at) + static_cast<double>(d * (i + 1)));
      }
  }
  // never all zeros (except where zeros are the point, or the tensor is empty)
  if (!zeros_allowed && n > 0) {
    bool all_zero = true;
    for (int64_t i = 0; i < n && all_zero; ++i) all_zero = t.get_f64(i) == 0.0;
    if (all_zero) t.set_f64(0, 1.0);
  }
  return t;
}

std::string describe_attrs(const Attrs& a) {
  std::ostringstream os;
  bool first = true;
  for (const auto& [name, v] : a.items()) {
    os << (first ? "" : ", ") << name << "=";
    first = false;
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>>) {
            os << "[";
            for (size_t i = 0; i < x.size(); ++i) os << (i ? "," : "") << x[i];
            os << "]";
          } else if constexpr (std::is_same_v<T, DType>) {
            os << dtype_name(x);
          } else if constexpr (std::is_same_v<T, Tensor>) {
            os << x.type().to_string();
          } else {
            os << x;
          }
        },
        v);
  }
  return os.str();
}

std::string describe_inputs(const Variant& v, DType dt) {
  std::ostringstream os;
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    const InputSpec& s = v.inputs[i];
    os << (i ? ", " : "") << dtype_name(input_dtype(s, dt)) << sizes_to_string(s.shape);
    if (s.dist != Dist::standard) {
      os << " " << dist_name(s.dist);
      if (s.dist == Dist::index) os << "[" << s.lo << "," << s.hi << ")";
      if (s.dist == Dist::quant) os << " " << s.quant;
    }
  }
  return os.str();
}

CsrPattern csr_test_pattern(int64_t n, int64_t m) {
  CsrPattern p;
  p.row_ptr.push_back(0);
  uint64_t s = static_cast<uint64_t>(n) * 2654435761ULL + static_cast<uint64_t>(m) * 40503ULL + 1;
  auto next = [&] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>(s >> 33);
  };
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> cols;
    if (i < m) cols.push_back(i);
    const int64_t extra = m > 0 ? next() % 4 : 0;
    for (int64_t e = 0; e < extra; ++e) {
      const int64_t c = next() % m;
      if (std::find(cols.begin(), cols.end(), c) == cols.end()) cols.push_back(c);
    }
    std::sort(cols.begin(), cols.end());
    p.col_idx.insert(p.col_idx.end(), cols.begin(), cols.end());
    p.row_ptr.push_back(static_cast<int64_t>(p.col_idx.size()));
  }
  return p;
}

}  // namespace rlx::conformance
