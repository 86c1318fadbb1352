// Tests for the C prelude of generated CPU kernels (src/codegen/c_prelude.h).
//
// The prelude is C, so these tests compile it with the system C compiler (CC, else `cc`)
// together with a small driver, run the driver on inputs written by the test, and compare
// its outputs here against std:: math in double precision. The driver is compiled twice:
// with the flags the CPU device uses (-O3 -march=native ... -fno-math-errno: GNU C, so FMA
// contraction where the machine has FMA) and as strict portable C99 (-O2 -std=c99 -pedantic
// -Werror: no contraction, baseline ISA, and the Newton sqrt/rsqrt used without
// -fno-math-errno), so the accuracy cannot depend on either.
//
// Error metric, for a float result `got` and the double reference `ref`:
//  * NaN must give NaN; got == (float)ref passes (this covers inf, overflow and exact results;
//    zeros must also agree in sign);
//  * otherwise err = |got - ref| / ulp(ref), where ulp(ref) is the spacing of floats at |ref|
//    (2^(e-24) for |ref| in [2^(e-1), 2^e), and 2^-149 in the subnormal range).
//  * gelu_erf / gelu_tanh pass where |got - ref| <= 1e-6 + 4 ulp(ref). For negative x their
//    value is a tiny difference whose relative error grows with x^2 (x/sqrt2 and the exp
//    argument are float), so the ulp bound alone is asserted only for x >= -1.
//  * sin/cos are held to their ulp bound for |x| <= 2^20*pi/2; beyond, only |y| <= 1.
// The test prints the measured maximum error of every function.

#include "codegen/c_jit.h"
#include "codegen/c_prelude.h"
#include "rlx/compile.h"
#include "rlx/op_builder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numbers>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

constexpr double kInf = std::numeric_limits<double>::infinity();
// As src/codegen/c_jit.cpp compiles kernels (less -fPIC -shared -w). With -fno-math-errno
// rlx_sqrt_f32/rlx_rsqrt_f32 use sqrt; the portable flags test their Newton versions.
const char* const kNativeFlags = rlx::codegen::c_code_flags();
constexpr char kPortableFlags[] = "-O2 -std=c99 -pedantic -Wall -Wextra -Werror";
// Without -fno-math-errno (vectorization only).
constexpr char kNativeErrnoFlags[] = "-O3 -march=native -fopenmp-simd";

// ------------------------------------------------------------------ process helpers

std::string c_compiler() {
  const char* cc = std::getenv("CC");
  return (cc != nullptr && *cc != '\0') ? std::string(cc) : std::string("cc");
}

std::string quote(const fs::path& p) {
  std::string out = "'";
  for (char c : p.string()) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs a shell command with stdout and stderr captured; returns the exit status.
int run(const std::string& cmd, const fs::path& log, std::string* output) {
  std::string full = cmd + " > " + quote(log) + " 2>&1";
  int status = std::system(full.c_str());
  *output = read_text(log);
  return status;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "rlx_c_prelude_XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty() && std::getenv("RLX_KEEP_TEMP") == nullptr) fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Empty when the C compiler works; otherwise why it does not.
std::string compiler_problem(const fs::path& dir) {
  std::ofstream(dir / "probe.c") << "int main(void) { return 0; }\n";
  std::string out;
  std::string cmd = c_compiler() + " " + quote(dir / "probe.c") + " -o " + quote(dir / "probe");
  if (run(cmd, dir / "probe.log", &out) != 0) {
    return "no working C compiler: `" + cmd + "` failed (set CC to a C compiler): " + out;
  }
  return "";
}

bool compiler_is_clang() {
  TempDir dir;
  std::string out;
  run(c_compiler() + " --version", dir.path() / "version.log", &out);
  return out.find("clang") != std::string::npos;
}

template <typename T>
void write_vec(const fs::path& p, const std::vector<T>& v) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

template <typename T>
std::vector<T> read_vec(const fs::path& p) {
  std::string bytes = read_text(p);
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// ------------------------------------------------------------------ the functions under test

double ref_sigmoid(double x) {
  double e = std::exp(-std::fabs(x));
  return (x >= 0 ? 1.0 : e) / (1.0 + e);
}
double ref_silu(double x) { return x == -kInf ? -0.0 : x * ref_sigmoid(x); }
double ref_softplus(double x) { return (x > 0 ? x : (std::isnan(x) ? x : 0.0)) + std::log1p(std::exp(-std::fabs(x))); }
double ref_gelu_erf(double x) { return x == -kInf ? -0.0 : 0.5 * x * std::erfc(-x / std::numbers::sqrt2); }
double ref_gelu_tanh(double x) {
  if (x == -kInf) return -0.0;
  double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return x * ref_sigmoid(2.0 * u);  // == 0.5x(1 + tanh(u)), without the cancellation
}
double ref_rsqrt(double x) { return 1.0 / std::sqrt(x); }
double ref_sign(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : x); }
double ref_round(double x) { return std::nearbyint(x); }  // default mode: half to even

struct UnaryCase {
  const char* name;        // rlx_<name>_f32 / rlx_<name>_f64
  double (*ref)(double);
  double max_ulp;          // asserted bound (measured values are printed)
  double abs_tol;          // extra absolute tolerance (gelu only)
  double strict_min_x;     // ulp bound alone holds for x >= this (gelu)
  double max_abs_x;        // accuracy domain; outside only |y| <= 1 is checked (sin/cos)
};

constexpr double kTrigRange = 1647099.0;  // 2^20 * pi/2, rounded down
constexpr double kNoMin = -kInf;

const UnaryCase kUnaryCases[] = {
    {"exp", [](double x) { return std::exp(x); }, 2, 0, kNoMin, kInf},
    {"expm1", [](double x) { return std::expm1(x); }, 2, 0, kNoMin, kInf},
    {"log", [](double x) { return std::log(x); }, 2, 0, kNoMin, kInf},
    {"tanh", [](double x) { return std::tanh(x); }, 4, 0, kNoMin, kInf},
    {"sigmoid", ref_sigmoid, 4, 0, kNoMin, kInf},
    {"erf", [](double x) { return std::erf(x); }, 4, 0, kNoMin, kInf},
    {"gelu_erf", ref_gelu_erf, 4, 1e-6, -1.0, kInf},
    {"gelu_tanh", ref_gelu_tanh, 4, 1e-6, -1.0, kInf},
    {"silu", ref_silu, 4, 0, kNoMin, kInf},
    {"softplus", ref_softplus, 4, 0, kNoMin, kInf},
    {"sin", [](double x) { return std::sin(x); }, 2, 0, kNoMin, kTrigRange},
    {"cos", [](double x) { return std::cos(x); }, 2, 0, kNoMin, kTrigRange},
    {"rsqrt", ref_rsqrt, 1, 0, kNoMin, kInf},
    {"sqrt", [](double x) { return std::sqrt(x); }, 0, 0, kNoMin, kInf},  // correctly rounded
    {"round", ref_round, 0, 0, kNoMin, kInf},
    {"sign", ref_sign, 0, 0, kNoMin, kInf},
};

const float kPowExponents[8] = {0.5f, 2.0f, -1.0f, 3.0f, 0.0f, 1.5f, -0.5f, 10.0f};
constexpr size_t kPowCount = 200000;

const char* const kSatTargets[] = {"i8", "u8", "i32", "i64"};

// ------------------------------------------------------------------ inputs

std::vector<float> special_floats() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {
      0.0f, -0.0f, inf, -inf, f32_from_bits(0x7fc00000u), f32_from_bits(0xffc00000u),
      f32_from_bits(0x7f800001u), f32_from_bits(0x7fc12345u), f32_from_bits(0xff812345u),
      FLT_MIN, -FLT_MIN, std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
      FLT_MAX, -FLT_MAX, 1.0f, -1.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 2.0f, 0.49999997f,
      88.72283f, 88.72284f, 88.7228394f, 89.0f, 100.0f, -87.33654f, -103.97208f, -103.972084f,
      -104.0f, -108.0f, -110.0f, -111.0f, -150.0f, -200.0f, 0.875f, -0.875f, 6.0f, -6.0f, 10.0f,
      -10.0f, 20.0f, -20.0f, 30.0f, -30.0f, 8388608.0f, 8388609.0f, 8388607.5f, -8388607.5f,
      16777216.0f, 65504.0f, 65519.996f, 65520.0f, 65536.0f, 6.1035156e-05f, 5.9604645e-08f,
      2.9802322e-08f, 127.5f, 127.99999f, 128.0f, -128.5f, -129.0f, 255.5f, 256.0f, -0.99f, 0.99f,
      2147483520.0f, 2147483648.0f, -2147483648.0f, -2147483904.0f, f32_from_bits(0x5effffffu),
      9.223372e18f, -9.223372e18f, f32_from_bits(0xdf000001u), 1e-30f, -1e-30f, 3.14159265f,
      1.57079637f, 1e4f, -1e4f, 1.6e6f, 1e10f, 1e30f, -1e30f, 1e-45f, 1e-40f, -1e-40f};
  for (int e = -149; e <= 127; ++e) {
    float p = std::ldexp(1.0f, e);
    for (float q : {p, std::nextafter(p, 0.0f), std::nextafter(p, inf)}) {
      v.push_back(q);
      v.push_back(-q);
    }
  }
  return v;
}

std::vector<float> general_inputs() {
  std::vector<float> v = special_floats();
  // Every 2^12-th bit pattern over all 2^32 (finite, inf and NaN, both signs), offset so
  // that the low mantissa bits vary.
  for (uint64_t u = 0x5a5; u < (uint64_t{1} << 32); u += uint64_t{1} << 12) {
    v.push_back(f32_from_bits(static_cast<uint32_t>(u)));
  }
  auto range = [&](double lo, double hi, int n) {
    for (int i = 0; i <= n; ++i) v.push_back(static_cast<float>(lo + (hi - lo) * i / n));
  };
  range(-12, 12, 240000);        // where activations do their work
  range(-1, 1, 100000);
  range(0.85, 0.9, 10000);       // erf branch point
  range(-0.9, -0.85, 10000);
  range(1.2, 1.28, 10000);       // gelu_erf branch point (x/sqrt2 = 0.875)
  range(-1.28, -1.2, 10000);
  range(80, 90, 20000);          // exp overflow
  range(-112, -80, 40000);       // exp, sigmoid, silu underflow
  range(-1e-3, 1e-3, 10000);
  // Floats nearest to multiples of pi/2: the hard cases of the sin/cos range reduction.
  for (int k = 1; k < (1 << 20); k += (k < 20000 ? 1 : 37)) {
    float f = static_cast<float>(k * (std::numbers::pi / 2));
    v.push_back(f);
    v.push_back(-std::nextafter(f, 0.0f));
  }
  return v;
}

// Floats that are ties (and their neighbours) for rounding to f16 and to bf16.
std::vector<float> conversion_inputs(const std::vector<float>& general) {
  std::vector<float> v = general;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {  // every finite f16 and the midpoint above it
    double lo = h < 0x400u ? std::ldexp(double(h), -24)
                           : std::ldexp(1.0 + (h & 0x3ffu) / 1024.0, int(h >> 10) - 15);
    double next = (h + 1) < 0x400u ? std::ldexp(double(h + 1), -24)
                                   : std::ldexp(1.0 + ((h + 1) & 0x3ffu) / 1024.0, int((h + 1) >> 10) - 15);
    float mid = static_cast<float>((lo + next) / 2);  // exact: 12 significant bits
    for (float f : {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      v.push_back(f);
      v.push_back(-f);
    }
  }
  for (uint32_t h = 0; h < 0x7f80u; ++h) {  // bf16 midpoints: bit 15 set, lower bits clear
    uint32_t mid = (h << 16) | 0x8000u;
    for (uint32_t b : {mid, mid - 1, mid + 1}) {
      v.push_back(f32_from_bits(b));
      v.push_back(f32_from_bits(b | 0x80000000u));
    }
  }
  return v;
}

std::vector<double> double_inputs(const std::vector<float>& general) {
  const double inf = kInf;
  std::vector<double> v = {0.0, -0.0, inf, -inf, std::nan(""), -std::nan(""), DBL_MIN, -DBL_MIN,
                           std::numeric_limits<double>::denorm_min(), DBL_MAX, -DBL_MAX, 1.0, -1.0, 0.5,
                           2.5, -2.5, 1.5, 1e-300, 709.78, 710.0, -745.2, -746.0, -1000.0, -2000.0,
                           127.5, 128.0, -128.5, -129.0, 255.5, 256.0, -0.99, 2147483647.0,
                           2147483647.9, 2147483648.0, -2147483648.0, -2147483648.9, -2147483649.0,
                           0x1.fffffffffffffp62, 0x1p63, -0x1p63, -0x1.0000000000001p63, 1e19, -1e19};
  for (size_t i = 0; i < general.size(); i += 7) v.push_back(general[i]);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 20000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v.push_back((static_cast<double>(s >> 11) * 0x1p-53 - 0.5) * 100.0);
  }
  return v;
}

std::vector<int64_t> int_pair_values() {
  std::vector<int64_t> v;
  for (int64_t i = -7; i <= 7; ++i) v.push_back(i);
  for (int64_t x : {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min() + 1,
                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max() - 1,
                    int64_t{INT32_MIN}, int64_t{INT32_MAX}, int64_t{INT32_MIN} - 1, int64_t{INT32_MAX} + 1,
                    int64_t{1000000007}, int64_t{-1000000007}, int64_t{123456789012345},
                    int64_t{-123456789012345}}) {
    v.push_back(x);
  }
  return v;
}

// ------------------------------------------------------------------ the driver

// A C program: prelude + one loop per function, reading the input files of a directory and
// writing one output file per function there. The loops are the same shape as generated
// kernels', so the code that runs is the vectorized code.
std::string driver_source() {
  std::ostringstream c;
  c << rlx::codegen::c_prelude() << R"(
#include <stdio.h>
#include <stdlib.h>

static const char* g_dir;
static void* load(const char* name, size_t elem, size_t* n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE* f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(2); }
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  *n = (size_t)bytes / elem;
  void* p = malloc((size_t)bytes + 64);
  if (!p || fread(p, 1, (size_t)bytes, f) != (size_t)bytes) { fprintf(stderr, "cannot read %s\n", path); exit(2); }
  fclose(f);
  return p;
}
static void store(const char* name, const void* p, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(p, 1, bytes, f) != bytes) { fprintf(stderr, "cannot write %s\n", path); exit(2); }
  fclose(f);
}

int main(int argc, char** argv) {
  size_t nf, nc, nd, np, i;
  float* restrict xf;
  float* restrict xc;
  double* restrict xd;
  int64_t* restrict pr;
  float* restrict yf;
  double* restrict yd;
  uint16_t* restrict yh;
  int8_t* restrict y8;
  uint8_t* restrict yu8;
  int32_t* restrict y32;
  int64_t* restrict y64;
  uint16_t* restrict hs;
  static const float pow_y[8] = {0.5f, 2.0f, -1.0f, 3.0f, 0.0f, 1.5f, -0.5f, 10.0f};
  if (argc != 2) return 2;
  g_dir = argv[1];
  xf = (float*)load("xf.bin", 4, &nf);
  xc = (float*)load("xc.bin", 4, &nc);
  xd = (double*)load("xd.bin", 8, &nd);
  pr = (int64_t*)load("pairs.bin", 16, &np);
  {
    size_t most = nf > nc ? nf : nc;
    most = most > nd ? most : nd;
    most = most > 65536 ? most : 65536;
    yf = (float*)malloc(most * 4);
    yd = (double*)malloc(most * 8);
    yh = (uint16_t*)malloc(most * 2);
    y8 = (int8_t*)malloc(most);
    yu8 = (uint8_t*)malloc(most);
    y32 = (int32_t*)malloc(most * 4);
    y64 = (int64_t*)malloc(most * 8);
    hs = (uint16_t*)malloc(65536 * 2);
    if (!yf || !yd || !yh || !y8 || !yu8 || !y32 || !y64 || !hs) return 3;
  }
#define UNARY(name) \
  for (i = 0; i < nf; i++) yf[i] = rlx_##name##_f32(xf[i]); \
  store(#name "_f32.bin", yf, nf * 4); \
  for (i = 0; i < nd; i++) yd[i] = rlx_##name##_f64(xd[i]); \
  store(#name "_f64.bin", yd, nd * 8);
)";
  for (const UnaryCase& u : kUnaryCases) c << "  UNARY(" << u.name << ")\n";
  c << R"(
  for (i = 0; i < )" << kPowCount << R"( && i < nf; i++) yf[i] = rlx_pow_f32(xf[i], pow_y[i % 8]);
  store("pow_f32.bin", yf, (nf < (size_t))" << kPowCount << " ? nf : (size_t)" << kPowCount << R"() * 4);
  for (i = 0; i < nd; i++) yd[i] = rlx_pow_f64(xd[i], (double)pow_y[i % 8]);
  store("pow_f64.bin", yd, nd * 8);

  for (i = 0; i < 65536; i++) hs[i] = (uint16_t)i;
  for (i = 0; i < 65536; i++) yf[i] = rlx_f16_to_f32(hs[i]);
  store("f16_to_f32.bin", yf, 65536 * 4);
  /* the staged loads' row conversion, in pieces of 1 to 40 codes */
  for (i = 0; i < 65536;) {
    size_t piece = 1 + i % 40;
    if (piece > 65536 - i) piece = 65536 - i;
    rlx_load_f16_n(yf + i, hs + i, (int64_t)piece);
    i += piece;
  }
  store("load_f16_n.bin", yf, 65536 * 4);
  for (i = 0; i < 65536; i++) yf[i] = rlx_bf16_to_f32(hs[i]);
  store("bf16_to_f32.bin", yf, 65536 * 4);
  for (i = 0; i < nc; i++) yh[i] = rlx_f32_to_f16(xc[i]);
  store("f32_to_f16.bin", yh, nc * 2);
  /* the staged stores' row conversion, in pieces of 1 to 40 values (vector bodies and tails) */
  for (i = 0; i < nc;) {
    size_t piece = 1 + i % 40;
    if (piece > nc - i) piece = nc - i;
    rlx_store_f16_n(yh + i, xc + i, (int64_t)piece);
    i += piece;
  }
  store("store_f16_n.bin", yh, nc * 2);
  /* rounding to f16 kept in a float: per value, and the staged rows' form in pieces */
  for (i = 0; i < nc; i++) yf[i] = rlx_round_f16(xc[i]);
  store("round_f16.bin", yf, nc * 4);
  for (i = 0; i < nc;) {
    size_t piece = 1 + i % 40;
    if (piece > nc - i) piece = nc - i;
    rlx_round_f16_n(yf + i, xc + i, (int64_t)piece);
    i += piece;
  }
  store("round_f16_n.bin", yf, nc * 4);
  for (i = 0; i < nc; i++) yh[i] = rlx_f32_to_bf16(xc[i]);
  store("f32_to_bf16.bin", yh, nc * 2);

  for (i = 0; i < nf; i++) y8[i] = rlx_f32_to_i8_sat(xf[i]);
  store("f32_to_i8.bin", y8, nf);
  for (i = 0; i < nf; i++) yu8[i] = rlx_f32_to_u8_sat(xf[i]);
  store("f32_to_u8.bin", yu8, nf);
  for (i = 0; i < nf; i++) y32[i] = rlx_f32_to_i32_sat(xf[i]);
  store("f32_to_i32.bin", y32, nf * 4);
  for (i = 0; i < nf; i++) y64[i] = rlx_f32_to_i64_sat(xf[i]);
  store("f32_to_i64.bin", y64, nf * 8);
  for (i = 0; i < nd; i++) y8[i] = rlx_f64_to_i8_sat(xd[i]);
  store("f64_to_i8.bin", y8, nd);
  for (i = 0; i < nd; i++) yu8[i] = rlx_f64_to_u8_sat(xd[i]);
  store("f64_to_u8.bin", yu8, nd);
  for (i = 0; i < nd; i++) y32[i] = rlx_f64_to_i32_sat(xd[i]);
  store("f64_to_i32.bin", y32, nd * 4);
  for (i = 0; i < nd; i++) y64[i] = rlx_f64_to_i64_sat(xd[i]);
  store("f64_to_i64.bin", y64, nd * 8);

  for (i = 0; i < np; i++) y64[i] = rlx_floordiv_i64(pr[2 * i], pr[2 * i + 1]);
  store("floordiv_i64.bin", y64, np * 8);
  for (i = 0; i < np; i++) y64[i] = rlx_mod_i64(pr[2 * i], pr[2 * i + 1]);
  store("mod_i64.bin", y64, np * 8);
  for (i = 0; i < np; i++) y64[i] = rlx_clamp_index(pr[2 * i], pr[2 * i + 1]);
  store("clamp_index.bin", y64, np * 8);
  for (i = 0; i < np; i++) y32[i] = rlx_floordiv_i32((int32_t)pr[2 * i], (int32_t)pr[2 * i + 1]);
  store("floordiv_i32.bin", y32, np * 4);
  for (i = 0; i < np; i++) y32[i] = rlx_mod_i32((int32_t)pr[2 * i], (int32_t)pr[2 * i + 1]);
  store("mod_i32.bin", y32, np * 4);
  for (i = 0; i < np; i++) y32[i] = rlx_clamp_index_i32((int32_t)pr[2 * i], (int32_t)pr[2 * i + 1]);
  store("clamp_index_i32.bin", y32, np * 4);
  return 0;
}
)";
  return c.str();
}

// ------------------------------------------------------------------ error measurement

double ulp_f32(double r) {
  r = std::fabs(r);
  if (r < 0x1p-126) return 0x1p-149;
  int e;
  std::frexp(r, &e);
  return std::ldexp(1.0, e - 24);
}

double ulp_f64(double r) {
  r = std::fabs(r);
  if (r < DBL_MIN) return std::numeric_limits<double>::denorm_min();
  int e;
  std::frexp(r, &e);
  return std::ldexp(1.0, e - 53);
}

struct Verdict {
  bool ok;
  double ulps;     // error in ulps (inf for a wrong special value)
  double abs_err;  // |got - ref| where both are finite
};

Verdict judge_f32(float got, double ref, double max_ulp, double abs_tol) {
  if (std::isnan(ref) || std::isnan(got)) {
    bool both = std::isnan(ref) && std::isnan(got);
    return {both, both ? 0 : kInf, 0};
  }
  float rf = static_cast<float>(ref);
  if (got == rf) {
    bool same_sign = got != 0 || std::signbit(got) == std::signbit(rf);
    return {same_sign, same_sign ? 0 : kInf, 0};
  }
  if (std::isinf(got) || std::isinf(rf)) return {false, kInf, kInf};
  double d = std::fabs(static_cast<double>(got) - ref);
  double u = ulp_f32(ref);
  return {d <= abs_tol + max_ulp * u, d / u, d};
}

std::string describe(double x, double got, double ref) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "x=%.9g (bits 0x%08x) got %.9g want %.12g", x,
                f32_bits(static_cast<float>(x)), got, ref);
  return buf;
}

struct Inputs {
  std::vector<float> xf, xc;
  std::vector<double> xd;
  std::vector<int64_t> pairs;
  static const Inputs& get() {
    static const Inputs in = [] {
      Inputs r;
      r.xf = general_inputs();
      r.xc = conversion_inputs(r.xf);
      r.xd = double_inputs(r.xf);
      std::vector<int64_t> vals = int_pair_values();
      for (int64_t a : vals) {
        for (int64_t b : vals) {
          r.pairs.push_back(a);
          r.pairs.push_back(b);
        }
      }
      return r;
    }();
    return in;
  }
};

// Python semantics, written plainly (the prelude's version is branch-free).
int64_t py_floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  int64_t q = a / b, r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) --q;
  return q;
}
int64_t py_mod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
int32_t py_floordiv32(int32_t a, int32_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int32_t>(0u - static_cast<uint32_t>(a));
  int32_t q = a / b, r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) --q;
  return q;
}
int32_t py_mod32(int32_t a, int32_t b) {
  if (b == 0 || b == -1) return 0;
  int32_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <typename T>
T ref_clamp_index(T i, T n) {
  if (n <= 0) return 0;
  if (i < 0) i += n;
  return std::clamp<T>(i, 0, n - 1);
}

// Reference f16 decoding, via ldexp.
uint32_t ref_f16_to_f32_bits(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) return sign | 0x7f800000u | (m << 13);  // inf, or NaN keeping its payload
  double v = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(1.0 + m / 1024.0, int(e) - 15);
  return sign | f32_bits(static_cast<float>(v));
}

// Reference rounding to f16, in double arithmetic: nearest, ties to the even code.
uint16_t ref_f32_to_f16(float f) {
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(static_cast<double>(f));
  if (std::isnan(f)) return sign | 0x7e00;  // only NaN-ness and sign are compared
  if (a >= 65520.0) return sign | 0x7c00;   // 65520 is the tie between 65504 and 2^16
  if (a < 0x1p-14) {
    return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24));  // 0x400 = 2^-14 is right
  }
  int e;
  double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  double q = std::nearbyint((m * 2 - 1) * 1024);
  int exp16 = e - 1 + 15;
  if (q == 1024) {
    q = 0;
    ++exp16;
  }
  if (exp16 >= 31) return sign | 0x7c00;
  return sign | static_cast<uint16_t>((exp16 << 10) | static_cast<int>(q));
}

// Reference rounding to bf16: compares the distances to the two neighbours exactly in double.
uint16_t ref_f32_to_bf16(float f) {
  uint32_t b = f32_bits(f);
  uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  if (std::isnan(f)) return sign | 0x7fc0;  // only NaN-ness and sign are compared
  uint32_t h = (b & 0x7fffffffu) >> 16;
  double a = std::fabs(static_cast<double>(f));
  double lo = f32_from_bits(h << 16);
  double hi = (h + 1) == 0x7f80u ? 0x1p128 : static_cast<double>(f32_from_bits((h + 1) << 16));
  if (h == 0x7f80u) return sign | 0x7f80;  // inf
  uint32_t r = h;
  if (a - lo > hi - a || (a - lo == hi - a && (h & 1u))) r = h + 1;
  return static_cast<uint16_t>(sign | r);
}

template <typename Int>
Int ref_sat(double x) {
  if (std::isnan(x)) return 0;
  double t = std::trunc(x);
  double lo = static_cast<double>(std::numeric_limits<Int>::min());
  double hi_excl = std::ldexp(1.0, std::numeric_limits<Int>::digits);  // 2^bits, exact
  if (t < lo) return std::numeric_limits<Int>::min();
  if (t >= hi_excl) return std::numeric_limits<Int>::max();
  return static_cast<Int>(t);
}

// ------------------------------------------------------------------ the compiled driver

struct DriverRun {
  std::string skip_reason;  // no C compiler
  std::string error;        // compile or run failure
  TempDir dir;
};

void build_and_run(const char* flags, DriverRun* r) {
  if (r->dir.path().empty()) {
    r->error = "cannot create a temporary directory";
    return;
  }
  r->skip_reason = compiler_problem(r->dir.path());
  if (!r->skip_reason.empty()) return;
  const fs::path& d = r->dir.path();
  const Inputs& in = Inputs::get();
  write_vec(d / "xf.bin", in.xf);
  write_vec(d / "xc.bin", in.xc);
  write_vec(d / "xd.bin", in.xd);
  write_vec(d / "pairs.bin", in.pairs);
  std::ofstream(d / "driver.c") << driver_source();
  std::string out;
  std::string cmd = c_compiler() + " " + flags + " " + quote(d / "driver.c") + " -o " + quote(d / "driver") + " -lm";
  if (run(cmd, d / "build.log", &out) != 0) {
    r->error = "compiling the prelude driver failed: " + cmd + "\n" + out;
    return;
  }
  if (run(quote(d / "driver") + " " + quote(d), d / "run.log", &out) != 0) {
    r->error = "the prelude driver failed: " + out;
  }
}

void check_accuracy(const char* flags) {
  DriverRun r;
  build_and_run(flags, &r);
  if (!r.skip_reason.empty()) GTEST_SKIP() << r.skip_reason;
  ASSERT_TRUE(r.error.empty()) << r.error;
  const fs::path& d = r.dir.path();
  const Inputs& in = Inputs::get();

  std::printf("C prelude accuracy, cc flags: %s (%zu float inputs)\n", flags, in.xf.size());
  std::printf("  %-10s %12s %12s  %s\n", "function", "max ulp", "max abs err", "worst input");
  for (const UnaryCase& c : kUnaryCases) {
    SCOPED_TRACE(c.name);
    std::vector<float> got = read_vec<float>(d / (std::string(c.name) + "_f32.bin"));
    ASSERT_EQ(got.size(), in.xf.size());
    double worst_ulp = 0, worst_abs = 0;
    float worst_x = 0;
    int failures = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      float x = in.xf[i];
      double ref = c.ref(static_cast<double>(x));
      if (std::isfinite(x) && std::fabs(x) > c.max_abs_x) {
        if (!(std::fabs(got[i]) <= 1.0f)) {
          if (failures++ < 5) ADD_FAILURE() << "outside the accuracy range: " << describe(x, got[i], ref);
        }
        continue;
      }
      Verdict v = judge_f32(got[i], ref, c.max_ulp, c.abs_tol);
      if (v.ok && c.abs_tol > 0 && x >= c.strict_min_x) v.ok = v.ulps <= c.max_ulp;
      if (!v.ok && failures++ < 5) {
        ADD_FAILURE() << "rlx_" << c.name << "_f32 error " << v.ulps << " ulp, " << v.abs_err
                      << " abs: " << describe(x, got[i], ref);
      }
      if (x >= c.strict_min_x && v.ulps > worst_ulp) {
        worst_ulp = v.ulps;
        worst_x = x;
      }
      if (std::isfinite(v.abs_err)) worst_abs = std::max(worst_abs, v.abs_err);
    }
    EXPECT_EQ(failures, 0) << "rlx_" << c.name << "_f32: " << failures << " inputs out of tolerance";
    std::string note = c.strict_min_x > kNoMin ? " (ulp over x >= -1)" : "";
    if (c.max_abs_x < kInf) note = " (|x| <= 2^20*pi/2)";
    char abs_col[32] = "-";
    if (c.abs_tol > 0) std::snprintf(abs_col, sizeof abs_col, "%.3g", worst_abs);
    std::printf("  %-10s %12.3f %12s  %.9g%s\n", c.name, worst_ulp, abs_col, worst_x, note.c_str());

    // The double versions wrap libm; they are checked for wiring and special values.
    std::vector<double> gd = read_vec<double>(d / (std::string(c.name) + "_f64.bin"));
    ASSERT_EQ(gd.size(), in.xd.size());
    int f64_failures = 0;
    for (size_t i = 0; i < gd.size(); ++i) {
      double x = in.xd[i], ref = c.ref(x), g = gd[i];
      bool ok;
      if (std::isnan(ref) || std::isnan(g)) {
        ok = std::isnan(ref) && std::isnan(g);
      } else if (g == ref) {
        ok = g != 0 || std::signbit(g) == std::signbit(ref);
      } else {
        // gelu's reference is written differently from the prelude's, so allow rounding noise.
        double tol = 4 * ulp_f64(ref) + (c.abs_tol > 0 ? 1e-11 * std::fabs(ref) : 0.0);
        ok = std::isfinite(g) && std::isfinite(ref) && std::fabs(g - ref) <= tol;
      }
      if (!ok && f64_failures++ < 5) {
        ADD_FAILURE() << "rlx_" << c.name << "_f64(" << x << ") = " << g << ", want " << ref;
      }
    }
  }

  {  // pow: powf itself, so only wiring and a 1-ulp check.
    std::vector<float> got = read_vec<float>(d / "pow_f32.bin");
    ASSERT_EQ(got.size(), std::min(kPowCount, in.xf.size()));
    int failures = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      double ref = std::pow(static_cast<double>(in.xf[i]), static_cast<double>(kPowExponents[i % 8]));
      Verdict v = judge_f32(got[i], ref, 1, 0);
      if (!v.ok && failures++ < 5) ADD_FAILURE() << "rlx_pow_f32 y=" << kPowExponents[i % 8] << " " << describe(in.xf[i], got[i], ref);
    }
    std::vector<double> gd = read_vec<double>(d / "pow_f64.bin");
    ASSERT_EQ(gd.size(), in.xd.size());
    for (size_t i = 0; i < gd.size(); ++i) {
      double ref = std::pow(in.xd[i], static_cast<double>(kPowExponents[i % 8]));
      bool ok = (std::isnan(ref) && std::isnan(gd[i])) || gd[i] == ref;
      if (!ok && failures++ < 5) ADD_FAILURE() << "rlx_pow_f64(" << in.xd[i] << ") = " << gd[i] << ", want " << ref;
    }
  }

  {  // f16 / bf16 decoding: all 65536 codes, bit-exact.
    std::vector<float> f16 = read_vec<float>(d / "f16_to_f32.bin");
    std::vector<float> bf16 = read_vec<float>(d / "bf16_to_f32.bin");
    std::vector<float> f16n = read_vec<float>(d / "load_f16_n.bin");  // rlx_load_f16_n
    ASSERT_EQ(f16.size(), 65536u);
    ASSERT_EQ(bf16.size(), 65536u);
    ASSERT_EQ(f16n.size(), 65536u);
    int failures = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
      if (f32_bits(f16n[h]) != ref_f16_to_f32_bits(static_cast<uint16_t>(h)) && failures++ < 5) {
        ADD_FAILURE() << std::hex << "rlx_load_f16_n(0x" << h << ") = 0x" << f32_bits(f16n[h]) << ", want 0x"
                      << ref_f16_to_f32_bits(static_cast<uint16_t>(h));
      }
      if (f32_bits(f16[h]) != ref_f16_to_f32_bits(static_cast<uint16_t>(h)) && failures++ < 5) {
        ADD_FAILURE() << std::hex << "rlx_f16_to_f32(0x" << h << ") = 0x" << f32_bits(f16[h]) << ", want 0x"
                      << ref_f16_to_f32_bits(static_cast<uint16_t>(h));
      }
      if (f32_bits(bf16[h]) != (h << 16) && failures++ < 5) {
        ADD_FAILURE() << std::hex << "rlx_bf16_to_f32(0x" << h << ") = 0x" << f32_bits(bf16[h]);
      }
    }
  }

  {  // f32 -> f16 / bf16 rounding, including every tie.
    std::vector<uint16_t> h = read_vec<uint16_t>(d / "f32_to_f16.bin");
    // rlx_store_f16_n (the CPU's conversion where it has one) gives rlx_f32_to_f16's bits,
    // NaN payloads included
    std::vector<uint16_t> hn = read_vec<uint16_t>(d / "store_f16_n.bin");
    ASSERT_EQ(hn.size(), h.size());
    int store_failures = 0;
    for (size_t i = 0; i < h.size(); ++i)
      if (hn[i] != h[i] && store_failures++ < 5)
        ADD_FAILURE() << std::hex << "rlx_store_f16_n(" << in.xc[i] << " = 0x" << f32_bits(in.xc[i]) << ") = 0x" << hn[i]
                      << ", rlx_f32_to_f16 gives 0x" << h[i];
    // rlx_round_f16 and rlx_round_f16_n (vcvtps2ph + vcvtph2ps where the CPU has them): the
    // reference's f16 widened again, bit for bit; a NaN stays a NaN of its sign, the same
    // one from both (the reference does not keep payloads)
    std::vector<float> rf = read_vec<float>(d / "round_f16.bin"), rn = read_vec<float>(d / "round_f16_n.bin");
    ASSERT_EQ(rf.size(), in.xc.size());
    ASSERT_EQ(rn.size(), in.xc.size());
    int round_failures = 0;
    for (size_t i = 0; i < in.xc.size(); ++i) {
      const float x = in.xc[i];
      const bool ok = std::isnan(x) ? std::isnan(rf[i]) && f32_bits(rn[i]) == f32_bits(rf[i]) && std::signbit(rf[i]) == std::signbit(x)
                                    : f32_bits(rf[i]) == ref_f16_to_f32_bits(ref_f32_to_f16(x)) && f32_bits(rn[i]) == f32_bits(rf[i]);
      const uint32_t want = ref_f16_to_f32_bits(ref_f32_to_f16(x));
      if (!ok && round_failures++ < 5)
        ADD_FAILURE() << std::hex << "rounding 0x" << f32_bits(in.xc[i]) << " to f16: rlx_round_f16 0x" << f32_bits(rf[i])
                      << ", rlx_round_f16_n 0x" << f32_bits(rn[i]) << ", want 0x" << want;
    }
    std::vector<uint16_t> b = read_vec<uint16_t>(d / "f32_to_bf16.bin");
    ASSERT_EQ(h.size(), in.xc.size());
    ASSERT_EQ(b.size(), in.xc.size());
    int failures = 0;
    for (size_t i = 0; i < in.xc.size(); ++i) {
      float x = in.xc[i];
      uint16_t want_h = ref_f32_to_f16(x), want_b = ref_f32_to_bf16(x);
      bool ok_h, ok_b;
      if (std::isnan(x)) {  // NaN stays NaN (quiet) with its sign
        ok_h = (h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff) != 0 && (h[i] & 0x8000) == (want_h & 0x8000);
        ok_b = (b[i] & 0x7f80) == 0x7f80 && (b[i] & 0x7f) != 0 && (b[i] & 0x8000) == (want_b & 0x8000);
      } else {
        ok_h = h[i] == want_h;
        ok_b = b[i] == want_b;
      }
      if (!ok_h && failures++ < 5) {
        ADD_FAILURE() << std::hex << "rlx_f32_to_f16(" << x << " = 0x" << f32_bits(x) << ") = 0x" << h[i] << ", want 0x" << want_h;
      }
      if (!ok_b && failures++ < 5) {
        ADD_FAILURE() << std::hex << "rlx_f32_to_bf16(" << x << " = 0x" << f32_bits(x) << ") = 0x" << b[i] << ", want 0x" << want_b;
      }
    }
  }

  {  // Saturating casts.
    auto check = [&](const char* file, auto got_vec, const auto& xs, auto ref_fn) {
      ASSERT_EQ(got_vec.size(), xs.size()) << file;
      int failures = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        auto want = ref_fn(static_cast<double>(xs[i]));
        if (got_vec[i] != want && failures++ < 5) {
          ADD_FAILURE() << file << ": x=" << xs[i] << " got " << int64_t(got_vec[i]) << " want " << int64_t(want);
        }
      }
    };
    check("f32_to_i8", read_vec<int8_t>(d / "f32_to_i8.bin"), in.xf, ref_sat<int8_t>);
    check("f32_to_u8", read_vec<uint8_t>(d / "f32_to_u8.bin"), in.xf, ref_sat<uint8_t>);
    check("f32_to_i32", read_vec<int32_t>(d / "f32_to_i32.bin"), in.xf, ref_sat<int32_t>);
    check("f32_to_i64", read_vec<int64_t>(d / "f32_to_i64.bin"), in.xf, ref_sat<int64_t>);
    check("f64_to_i8", read_vec<int8_t>(d / "f64_to_i8.bin"), in.xd, ref_sat<int8_t>);
    check("f64_to_u8", read_vec<uint8_t>(d / "f64_to_u8.bin"), in.xd, ref_sat<uint8_t>);
    check("f64_to_i32", read_vec<int32_t>(d / "f64_to_i32.bin"), in.xd, ref_sat<int32_t>);
    check("f64_to_i64", read_vec<int64_t>(d / "f64_to_i64.bin"), in.xd, ref_sat<int64_t>);
  }

  {  // Integer helpers over all pairs of edge values.
    std::vector<int64_t> fd = read_vec<int64_t>(d / "floordiv_i64.bin");
    std::vector<int64_t> md = read_vec<int64_t>(d / "mod_i64.bin");
    std::vector<int64_t> ci = read_vec<int64_t>(d / "clamp_index.bin");
    std::vector<int32_t> fd32 = read_vec<int32_t>(d / "floordiv_i32.bin");
    std::vector<int32_t> md32 = read_vec<int32_t>(d / "mod_i32.bin");
    std::vector<int32_t> ci32 = read_vec<int32_t>(d / "clamp_index_i32.bin");
    size_t n = in.pairs.size() / 2;
    ASSERT_EQ(fd.size(), n);
    ASSERT_EQ(md.size(), n);
    ASSERT_EQ(ci.size(), n);
    ASSERT_EQ(fd32.size(), n);
    ASSERT_EQ(md32.size(), n);
    ASSERT_EQ(ci32.size(), n);
    int failures = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t a = in.pairs[2 * i], b = in.pairs[2 * i + 1];
      auto a32 = static_cast<int32_t>(a), b32 = static_cast<int32_t>(b);
      bool ok = fd[i] == py_floordiv(a, b) && md[i] == py_mod(a, b) && ci[i] == ref_clamp_index(a, b) &&
                fd32[i] == py_floordiv32(a32, b32) && md32[i] == py_mod32(a32, b32) &&
                ci32[i] == ref_clamp_index(a32, b32);
      if (!ok && failures++ < 5) {
        ADD_FAILURE() << "a=" << a << " b=" << b << ": floordiv " << fd[i] << " mod " << md[i] << " clamp_index "
                      << ci[i] << " floordiv_i32 " << fd32[i] << " mod_i32 " << md32[i] << " clamp_index_i32 "
                      << ci32[i];
      }
    }
  }
}

// ------------------------------------------------------------------ tests

TEST(CPrelude, DeclaresEveryDocumentedFunction) {
  std::string_view p = rlx::codegen::c_prelude();
  EXPECT_NE(p.find("#ifndef RLX_C_PRELUDE_INCLUDED"), std::string_view::npos);
  const char* names[] = {
      "float rlx_exp_f32(float",       "float rlx_expm1_f32(float",      "float rlx_log_f32(float",
      "float rlx_tanh_f32(float",      "float rlx_sigmoid_f32(float",    "float rlx_erf_f32(float",
      "float rlx_sin_f32(float",       "float rlx_cos_f32(float",        "float rlx_gelu_erf_f32(float",
      "float rlx_gelu_tanh_f32(float", "float rlx_silu_f32(float",       "float rlx_rsqrt_f32(float",
      "float rlx_sqrt_f32(float",      "float rlx_pow_f32(float",        "float rlx_round_f32(float",
      "float rlx_sign_f32(float",      "float rlx_softplus_f32(float",   "float rlx_f16_to_f32(uint16_t",
      "uint16_t rlx_f32_to_f16(float", "void rlx_store_f16_n(uint16_t*", "void rlx_round_f16_n(float*", "void rlx_load_f16_n(float*", "void rlx_store_bf16_n(uint16_t*", "void rlx_load_bf16_n(float*", "float rlx_bf16_to_f32(uint16_t", "uint16_t rlx_f32_to_bf16(float",
      "int64_t rlx_floordiv_i64(",     "int64_t rlx_mod_i64(",           "int32_t rlx_floordiv_i32(",
      "int32_t rlx_mod_i32(",          "int64_t rlx_clamp_index(",       "int32_t rlx_clamp_index_i32(",
      "int32_t rlx_f32_to_i32_sat(",   "int64_t rlx_f32_to_i64_sat(",    "int8_t rlx_f32_to_i8_sat(",
      "uint8_t rlx_f32_to_u8_sat(",    "int32_t rlx_f64_to_i32_sat(",    "int64_t rlx_f64_to_i64_sat(",
      "int8_t rlx_f64_to_i8_sat(",     "uint8_t rlx_f64_to_u8_sat(",
  };
  for (const char* n : names) EXPECT_NE(p.find(std::string("static inline ") + n), std::string_view::npos) << n;
  for (const UnaryCase& c : kUnaryCases) {
    EXPECT_NE(p.find(std::string("double rlx_") + c.name + "_f64(double"), std::string_view::npos) << c.name;
  }
}

TEST(CPreludeCompiled, AccuracyWithKernelFlags) { check_accuracy(kNativeFlags); }

TEST(CPreludeCompiled, AccuracyAsPortableC99) { check_accuracy(kPortableFlags); }

// The kernel flags without AVX-512: rlx_store_f16_n's F16C path (AVX2 hosts) on this one.
TEST(CPreludeCompiled, AccuracyWithKernelFlagsWithoutAvx512) {
#if defined(__x86_64__)
  const std::string flags = std::string(kNativeFlags) + " -mno-avx512f";
  check_accuracy(flags.c_str());
#else
  GTEST_SKIP() << "x86-64 only: -mno-avx512f selects the F16C conversion of rlx_store_f16_n";
#endif
}

// Explicit special values (also covered by the sweeps, but stated here one by one).
TEST(CPreludeCompiled, SpecialValues) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string problem = compiler_problem(dir.path());
  if (!problem.empty()) GTEST_SKIP() << problem;
  std::ostringstream c;
  c << rlx::codegen::c_prelude() << R"(
#include <stdio.h>
static int failures = 0;
static void expect_f(const char* what, float got, float want) {
  int ok = (want != want) ? (got != got) : (got == want && signbit(got) == signbit(want));
  if (!ok) { printf("FAIL %s = %a (want %a)\n", what, (double)got, (double)want); failures++; }
}
static void expect_i(const char* what, long long got, long long want) {
  if (got != want) { printf("FAIL %s = %lld (want %lld)\n", what, got, want); failures++; }
}
#define F(call, want) expect_f(#call, call, want)
#define I(call, want) expect_i(#call, (long long)(call), (long long)(want))
int main(void) {
  volatile float inf = INFINITY, nan = NAN, zero = 0.0f;
  float ninf = -inf, nzero = -zero;
  F(rlx_exp_f32(inf), INFINITY); F(rlx_exp_f32(ninf), 0.0f); F(rlx_exp_f32(nan), NAN);
  F(rlx_exp_f32(89.0f), INFINITY); F(rlx_exp_f32(-200.0f), 0.0f); F(rlx_exp_f32(0.0f), 1.0f);
  F(rlx_expm1_f32(ninf), -1.0f); F(rlx_expm1_f32(nzero), -0.0f); F(rlx_expm1_f32(inf), INFINITY);
  F(rlx_log_f32(zero), -INFINITY); F(rlx_log_f32(nzero), -INFINITY); F(rlx_log_f32(-1.0f), NAN);
  F(rlx_log_f32(inf), INFINITY); F(rlx_log_f32(ninf), NAN); F(rlx_log_f32(nan), NAN); F(rlx_log_f32(1.0f), 0.0f);
  F(rlx_tanh_f32(inf), 1.0f); F(rlx_tanh_f32(ninf), -1.0f); F(rlx_tanh_f32(nan), NAN); F(rlx_tanh_f32(nzero), -0.0f);
  F(rlx_erf_f32(inf), 1.0f); F(rlx_erf_f32(ninf), -1.0f); F(rlx_erf_f32(nan), NAN); F(rlx_erf_f32(nzero), -0.0f);
  F(rlx_sigmoid_f32(ninf), 0.0f); F(rlx_sigmoid_f32(inf), 1.0f); F(rlx_sigmoid_f32(nan), NAN); F(rlx_sigmoid_f32(0.0f), 0.5f);
  F(rlx_silu_f32(ninf), -0.0f); F(rlx_silu_f32(inf), INFINITY); F(rlx_silu_f32(nan), NAN); F(rlx_silu_f32(nzero), -0.0f);
  F(rlx_gelu_erf_f32(ninf), -0.0f); F(rlx_gelu_erf_f32(inf), INFINITY); F(rlx_gelu_erf_f32(nan), NAN);
  F(rlx_gelu_tanh_f32(ninf), -0.0f); F(rlx_gelu_tanh_f32(inf), INFINITY); F(rlx_gelu_tanh_f32(nan), NAN);
  F(rlx_softplus_f32(inf), INFINITY); F(rlx_softplus_f32(ninf), 0.0f); F(rlx_softplus_f32(nan), NAN);
  F(rlx_softplus_f32(100.0f), 100.0f);
  F(rlx_sin_f32(inf), NAN); F(rlx_cos_f32(ninf), NAN); F(rlx_sin_f32(nan), NAN); F(rlx_sin_f32(nzero), -0.0f);
  F(rlx_cos_f32(0.0f), 1.0f);
  F(rlx_rsqrt_f32(zero), INFINITY); F(rlx_rsqrt_f32(nzero), -INFINITY); F(rlx_rsqrt_f32(-1.0f), NAN);
  F(rlx_rsqrt_f32(inf), 0.0f); F(rlx_rsqrt_f32(4.0f), 0.5f); F(rlx_rsqrt_f32(nan), NAN);
  F(rlx_sqrt_f32(nzero), -0.0f); F(rlx_sqrt_f32(-1.0f), NAN); F(rlx_sqrt_f32(inf), INFINITY); F(rlx_sqrt_f32(2.25f), 1.5f);
  F(rlx_round_f32(2.5f), 2.0f); F(rlx_round_f32(-2.5f), -2.0f); F(rlx_round_f32(0.5f), 0.0f);
  F(rlx_round_f32(1.5f), 2.0f); F(rlx_round_f32(-0.4f), -0.0f); F(rlx_round_f32(nan), NAN); F(rlx_round_f32(inf), INFINITY);
  F(rlx_sign_f32(nzero), -0.0f); F(rlx_sign_f32(nan), NAN); F(rlx_sign_f32(-3.0f), -1.0f); F(rlx_sign_f32(ninf), -1.0f);
  F(rlx_pow_f32(2.0f, 10.0f), 1024.0f); F(rlx_pow_f32(nan, 0.0f), 1.0f); F(rlx_pow_f32(-8.0f, 1.0f / 3.0f), NAN);
  I(rlx_f32_to_f16(65520.0f), 0x7c00); I(rlx_f32_to_f16(65519.996f), 0x7bff); I(rlx_f32_to_f16(ninf), 0xfc00);
  I(rlx_f32_to_f16(2.9802322e-08f), 0); I(rlx_f32_to_f16(2.9802326e-08f), 1); I(rlx_f32_to_f16(nzero), 0x8000);
  I(rlx_f32_to_f16(1.0f), 0x3c00); I(rlx_f32_to_f16(nan) & 0x7e00, 0x7e00);
  I(rlx_f32_to_bf16(1.0f), 0x3f80); I(rlx_f32_to_bf16(ninf), 0xff80); I(rlx_f32_to_bf16(nan) & 0x7fc0, 0x7fc0);
  I(rlx_f32_to_bf16(rlx_f32_from_bits(0x7f800001u)) & 0x7fc0, 0x7fc0);
  I(rlx_f32_to_bf16(rlx_f32_from_bits(0x3f808000u)), 0x3f80); I(rlx_f32_to_bf16(rlx_f32_from_bits(0x3f818000u)), 0x3f82);
  F(rlx_f16_to_f32(0x7c00), INFINITY); F(rlx_f16_to_f32(0x0001), 5.9604645e-08f); F(rlx_f16_to_f32(0x8000), -0.0f);
  I(rlx_f32_to_i32_sat(nan), 0); I(rlx_f32_to_i32_sat(3e9f), INT32_MAX); I(rlx_f32_to_i32_sat(-3e9f), INT32_MIN);
  I(rlx_f32_to_i32_sat(-2.9f), -2); I(rlx_f32_to_i64_sat(inf), INT64_MAX); I(rlx_f32_to_i64_sat(ninf), INT64_MIN);
  I(rlx_f32_to_u8_sat(-5.0f), 0); I(rlx_f32_to_u8_sat(300.0f), 255); I(rlx_f32_to_i8_sat(-300.0f), -128);
  I(rlx_f64_to_i64_sat(1e300), INT64_MAX); I(rlx_f64_to_i32_sat(2147483647.9), INT32_MAX); I(rlx_f64_to_i8_sat(NAN), 0);
  I(rlx_floordiv_i64(7, -2), -4); I(rlx_mod_i64(7, -2), -1); I(rlx_floordiv_i64(-7, 2), -4); I(rlx_mod_i64(-7, 2), 1);
  I(rlx_floordiv_i64(-6, 3), -2); I(rlx_mod_i64(-6, 3), 0); I(rlx_floordiv_i64(5, 0), 0); I(rlx_mod_i64(5, 0), 0);
  I(rlx_floordiv_i64(INT64_MIN, -1), INT64_MIN); I(rlx_mod_i64(INT64_MIN, -1), 0);
  I(rlx_floordiv_i32(INT32_MIN, -1), INT32_MIN); I(rlx_mod_i32(-1, 5), 4); I(rlx_mod_i32(1, -5), -4);
  I(rlx_clamp_index(-1, 5), 4); I(rlx_clamp_index(-6, 5), 0); I(rlx_clamp_index(7, 5), 4);
  I(rlx_clamp_index(INT64_MIN, 5), 0); I(rlx_clamp_index(3, 0), 0); I(rlx_clamp_index_i32(-2, 3), 1);
  F((float)rlx_exp_f64(-INFINITY), 0.0f); F((float)rlx_gelu_erf_f64(-INFINITY), -0.0f);
  F((float)rlx_silu_f64(-INFINITY), -0.0f); F((float)rlx_sigmoid_f64(INFINITY), 1.0f);
  printf("%d failures\n", failures);
  return failures != 0;
}
)";
  std::ofstream(dir.path() / "special.c") << c.str();
  for (const char* flags : {kNativeFlags, kPortableFlags}) {
    std::string out;
    std::string cmd = c_compiler() + " " + flags + " " + quote(dir.path() / "special.c") + " -o " +
                      quote(dir.path() / "special") + " -lm";
    ASSERT_EQ(run(cmd, dir.path() / "build.log", &out), 0) << cmd << "\n" << out;
    EXPECT_EQ(run(quote(dir.path() / "special"), dir.path() / "run.log", &out), 0) << flags << "\n" << out;
  }
}

// The point of the prelude: loops over these functions must vectorize without -ffast-math.
TEST(CPreludeCompiled, LoopsVectorize) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string problem = compiler_problem(dir.path());
  if (!problem.empty()) GTEST_SKIP() << problem;
  struct Loop {
    const char* fn;
    const char* in;
    const char* out;
  };
  const Loop loops[] = {
      {"rlx_exp_f32", "float", "float"},         {"rlx_expm1_f32", "float", "float"},
      {"rlx_log_f32", "float", "float"},         {"rlx_tanh_f32", "float", "float"},
      {"rlx_sigmoid_f32", "float", "float"},     {"rlx_erf_f32", "float", "float"},
      {"rlx_gelu_erf_f32", "float", "float"},    {"rlx_gelu_tanh_f32", "float", "float"},
      {"rlx_silu_f32", "float", "float"},        {"rlx_softplus_f32", "float", "float"},
      {"rlx_sin_f32", "float", "float"},         {"rlx_cos_f32", "float", "float"},
      {"rlx_sqrt_f32", "float", "float"},        {"rlx_rsqrt_f32", "float", "float"},
      {"rlx_round_f32", "float", "float"},       {"rlx_sign_f32", "float", "float"},
      {"rlx_f16_to_f32", "uint16_t", "float"},   {"rlx_f32_to_f16", "float", "uint16_t"},
      {"rlx_bf16_to_f32", "uint16_t", "float"},  {"rlx_f32_to_bf16", "float", "uint16_t"},
      {"rlx_f32_to_i32_sat", "float", "int32_t"}, {"rlx_f32_to_u8_sat", "float", "uint8_t"},
  };
  std::string prelude(rlx::codegen::c_prelude());
  int line = 1 + static_cast<int>(std::count(prelude.begin(), prelude.end(), '\n'));
  std::ostringstream c;
  c << prelude;
  std::vector<int> loop_lines;
  int k = 0;
  for (const Loop& l : loops) {
    c << "void loop" << k++ << "(" << l.out << "* restrict y, const " << l.in
      << "* restrict x, long n) { for (long i = 0; i < n; i++) y[i] = " << l.fn << "(x[i]); }\n";
    loop_lines.push_back(line++);
  }
  std::ofstream(dir.path() / "vec.c") << c.str();

  bool clang = compiler_is_clang();
  std::string report = clang ? "-Rpass=loop-vectorize" : "-fopt-info-vec-optimized";
  std::regex pattern(clang ? R"(vec\.c:(\d+):\d+: remark: vectorized loop)"
                           : R"(vec\.c:(\d+):\d+: optimized: loop vectorized)");
  for (const char* flags : {kNativeFlags, kNativeErrnoFlags}) {
    std::string out;
    std::string cmd = c_compiler() + " " + flags + " " + report + " -c " + quote(dir.path() / "vec.c") + " -o " +
                      quote(dir.path() / "vec.o");
    ASSERT_EQ(run(cmd, dir.path() / "vec.log", &out), 0) << cmd << "\n" << out;
    std::set<int> vectorized;
    for (std::sregex_iterator it(out.begin(), out.end(), pattern), end; it != end; ++it) {
      vectorized.insert(std::stoi((*it)[1].str()));
    }
    size_t count = 0;
    for (size_t i = 0; i < std::size(loops); ++i) {
      bool ok = vectorized.count(loop_lines[i]) > 0;
      count += ok;
      EXPECT_TRUE(ok) << "the loop over " << loops[i].fn << " did not vectorize (" << cmd << ")";
    }
    std::printf("%zu of %zu prelude loops vectorized with %s\n", count, std::size(loops), flags);
  }
}

// The vectorization report of compiling `c_file` with the kernel flags: the lines of the loops
// the compiler vectorized.
std::set<int> vectorized_lines(const fs::path& c_file, const fs::path& dir) {
  const bool clang = compiler_is_clang();
  const std::string report = clang ? "-Rpass=loop-vectorize" : "-fopt-info-vec-optimized";
  const std::regex pattern(clang ? R"(\.c:(\d+):\d+: remark: vectorized loop)" : R"(\.c:(\d+):\d+: optimized: loop vectorized)");
  std::string out;
  const std::string cmd = c_compiler() + " " + kNativeFlags + " " + report + " -c " + quote(c_file) + " -o " + quote(dir / "k.o");
  EXPECT_EQ(run(cmd, dir / "k.log", &out), 0) << cmd << "\n" << out;
  std::set<int> lines;
  for (std::sregex_iterator it(out.begin(), out.end(), pattern), end; it != end; ++it) lines.insert(std::stoi((*it)[1].str()));
  return lines;
}

// A chain of NaN-propagating selects over gathers (2x2 max pooling of relu(x + bias), as a
// convolution's epilogue feeds it) is one generated loop; GCC's partial-redundancy
// elimination used to leave it scalar with data-dependent branches, 15x slower (c_jit.cpp's
// -fno-tree-pre). The test renders it through the cpu device, recompiles the cached source
// with the kernel flags and requires every simd loop in it to vectorize.
TEST(CPreludeCompiled, GeneratedPoolingOverReluVectorizes) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string problem = compiler_problem(dir.path());
  if (!problem.empty()) GTEST_SKIP() << problem;
  using namespace rlx;
  Graph g;
  ValueId x = g.add_input("x", TensorType{DType::f32, Shape{4, 8, 26, 26}});
  ValueId bias = g.add_input("bias", TensorType{DType::f32, Shape{8}});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId h = o.relu(o.add(x, o.reshape(bias, {1, 8, 1, 1})));
  g.outputs = {o.op(Op::MaxPool2d, {h}, Attrs{{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}})};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  const fs::path cache = dir.path() / "kernels";
  const char* saved = std::getenv("RLX_CACHE_DIR");
  const std::string saved_value = saved ? saved : "";
  setenv("RLX_CACHE_DIR", cache.c_str(), 1);
  auto model = Model::compile(g, {.device = "cpu"});
  Expected<std::vector<Tensor>> ran = error(ErrorCode::internal, "not compiled");
  if (model.has_value()) {  // kernels are built on the first run
    const std::vector<Tensor> inputs = {
        Tensor::from_f64(DType::f32, {4, 8, 26, 26}, std::vector<double>(4 * 8 * 26 * 26, 1.0)),
        Tensor::from_f64(DType::f32, {8}, std::vector<double>(8, -0.5))};
    ran = (*model)->run(inputs);
  }
  if (saved) setenv("RLX_CACHE_DIR", saved_value.c_str(), 1); else unsetenv("RLX_CACHE_DIR");
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  ASSERT_TRUE(ran.has_value()) << ran.status().to_string();
  EXPECT_EQ((*ran)[0].get_f64(0), 0.5);
  std::vector<fs::path> sources;
  for (const auto& e : fs::directory_iterator(cache))
    if (e.path().extension() == ".c") sources.push_back(e.path());
  ASSERT_EQ(sources.size(), 1u) << "expected the model's one generated C file in " << cache;
  const std::string text = read_text(sources[0]);
  std::vector<int> simd_loops;  // the line of each `for` under `#pragma omp simd`
  int line = 1;
  for (size_t at = 0; at < text.size(); ++at) {
    if (text.compare(at, 16, "#pragma omp simd") == 0) simd_loops.push_back(line + 1);
    if (text[at] == '\n') ++line;
  }
  ASSERT_FALSE(simd_loops.empty()) << sources[0];
  const std::set<int> vectorized = vectorized_lines(sources[0], dir.path());
  for (int l : simd_loops)  // GCC reports the loop's header or the first line of its body
    EXPECT_TRUE(vectorized.count(l) || vectorized.count(l + 1)) << "the loop at " << sources[0] << ":" << l << " did not vectorize";
}

}  // namespace
