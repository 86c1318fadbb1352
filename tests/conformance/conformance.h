// The op conformance suite: every op of the ops table, for every dtype its type inference
// accepts, on every available device, against the reference interpreter (`ref`), with fresh
// random inputs each run, per-op tolerances and sentinel bytes around every output.
//
// Pieces (one file each):
//   case_table.cpp   the cases: per op, a list of variants (input shapes, value domains, attrs)
//   inputs.cpp       random inputs that respect each variant's domain; dtype helpers
//   tolerance.cpp    per-op, per-dtype tolerances and the comparison of two outputs
//   oracle.cpp       independent f64 implementations of the composites, checked against ref
//   runner.cpp       builds one graph per (op, device) holding every legal case, runs it on ref
//                    and on the device into guarded output views, compares, isolates failures
//   manifest.cpp     tests/conformance/manifest.txt: known expected failures / unsupported cases
//   ops_matrix.cpp   the support matrix of docs/ops.md: rendering, parsing, merging
//   conformance_test.cpp  GoogleTest registration (one test per op) and the suite-level tests
//
// Replaying a failure: every failure message prints the run seed; RLX_CONFORMANCE_SEED=<seed>
// reruns with the same inputs (each case derives its own generator from the seed, the op, the
// dtype and the variant, so filtering to one op replays that op's inputs exactly).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "rlx/compile.h"
#include "rlx/graph.h"
#include "rlx/ops.h"
#include "rlx/tensor.h"

namespace rlx::conformance {

// ---------------------------------------------------------------- the case table

// Value domain of one input. Floats and integers read each domain in their own way (see
// inputs.cpp); no domain produces an all-zero tensor except where zeros are the point.
enum class Dist : uint8_t {
  standard,    // floats uniform [-2, 2]; ints small ([-30, 30], unsigned [0, 60]); bool fair coin
  unit,        // floats [-1, 1]; ints [-8, 8] / [0, 8]
  positive,    // floats [0.05, 4]; ints [1, 20] (log, sqrt, rsqrt, pow bases)
  wide,        // floats [-50, 50] (softmax shift invariance); ints [-1000, 1000] / [0, 2000]
  nonzero,     // floats +-[0.25, 4]; ints +-[1, 20] (divisors)
  with_zeros,  // like standard, about a third of the elements exactly zero (zero divisors)
  exponent,    // pow exponents: floats [-3, 3]; ints [-2, 6]
  integral,    // floats holding small integers in [-4, 4] (ties, negative pow bases, round)
  halves,      // floats k + 0.5 and k for small k (round half to even, floor/ceil)
  specials,    // NaN, +-inf, +-0, huge, tiny, subnormal, mixed with ordinary values
  int_edges,   // ints: MIN, MAX, -1, 0, 1, MIN+1 mixed with random bits (div/mod/abs/neg)
  near_one,    // floats +-[0.7, 1.4]; ints [-3, 3] (products of many terms stay representable)
  full_range,  // ints: uniformly random bits (wrapping); floats [-300, 300] (cast saturation)
  index,       // integers in [lo, hi) (gather/scatter indices, positions)
  mask,        // bool, mostly true, column 0 always true (attention masks never empty a row)
  quant,       // u8 rows of quantized blocks of InputSpec::quant, with small finite scales
  dominant,    // floats [-1, 1] plus n * (i + 1) on diagonal i of each matrix in the last two axes
               // (n = the smaller of them): well conditioned, SPD symmetric part, distinct
               // eigen/singular values (factorizations)
  // CSR matrices (the sparse ops): the three arrays of one n x m matrix (InputSpec lo = n,
  // hi = m) hold csr_test_pattern(n, m), so that they agree; values are floats [-1, 1] plus
  // 2m + 2 on the diagonal entries (diagonally dominant: the solves are well conditioned, and
  // SPD through the upper triangle for the Cholesky method)
  csr_row_ptr,
  csr_col_idx,
  csr_values,
};
std::string_view dist_name(Dist d);

// A fixed, irregular CSR pattern of an n x m matrix: rows of 0 to 4 entries (the diagonal
// always when i < m, others at pseudo-random columns), columns strictly increasing in a row.
struct CsrPattern {
  std::vector<int64_t> row_ptr, col_idx;
};
CsrPattern csr_test_pattern(int64_t n, int64_t m);

struct InputSpec {
  Sizes shape;
  std::optional<DType> dtype;  // nullopt: the case's dtype
  Dist dist = Dist::standard;
  int64_t lo = 0, hi = 0;      // Dist::index range [lo, hi)
  std::string quant;           // Dist::quant block format ("q8_0", "q4_k", ...)
};

// Tolerance class of an op (see tolerance.cpp for the numbers).
enum class TolClass : uint8_t {
  bits,            // data movement: bit-exact copies (NaN payloads and -0 included)
  exact,           // exact results (compare, logical, argmax, integer ops, floor, abs, ...)
  arith,           // one correctly rounded float operation (add, mul, div, sqrt, ...)
  transcendental,  // exp, log, tanh, erf, sin, ... (device libm vs f64 reference)
  random,          // the shared counter-based generator: equal up to the final rounding
  reduce,          // sums/products: scaled by the reduction length
  contraction,     // dot, matmul, gemm, conv: scaled by the contraction length
  composite,       // activations and normalizations made of several float ops
};

struct Variant {
  std::string name;                 // unique within the op; used in messages and the manifest
  std::vector<InputSpec> inputs;
  Attrs attrs;
  bool dtype_attr = false;          // sets attribute "dtype" to the case dtype (iota, random)
  bool seed_attr = false;           // sets attribute "seed" from the run seed (random)
  int64_t reduce_len = 1;           // terms combined per output element (tolerance scaling)
  double magnitude = 1.0;           // typical |intermediate| (absolute tolerance scaling)
  // > 0: the op rounds an intermediate to a narrower type than its output (attention's
  // probabilities to bf16 for an f32 result), which any device may round to the neighbouring
  // value where its last bits differ from ref's: the relative error one such rounding step
  // carries, a floor for rtol and (times magnitude) atol
  double rounding = 0;
  std::vector<DType> only;          // when non-empty, the variant runs for these dtypes only
};

struct OpCases {
  Op op;
  TolClass tol;
  std::vector<Variant> variants;
};

// Every op's cases, indexed by nothing: search with cases_for().
const std::vector<OpCases>& case_table();
const OpCases* cases_for(Op op);
// Ops that need no case (sources whose value is given: param, constant).
bool exempt_from_cases(Op op);

// Every dtype the suite tries; inference decides which ones an op accepts.
const std::vector<DType>& candidate_dtypes();

// ---------------------------------------------------------------- inputs and tolerances

// The generator of one case: independent of the other cases, fixed by the run seed.
std::mt19937_64 case_rng(uint64_t seed, Op op, DType dt, const std::string& variant, const std::string& salt = "");
// A fresh random tensor for `spec` (case dtype `dt`).
Tensor make_input(const InputSpec& spec, DType dt, std::mt19937_64& rng);
DType input_dtype(const InputSpec& spec, DType case_dtype);
std::string describe_inputs(const Variant& v, DType dt);
std::string describe_attrs(const Attrs& a);

struct Tolerance {
  bool bits = false;   // compare bit patterns
  bool exact = false;  // compare values exactly (NaN equals NaN)
  double rtol = 0, atol = 0;
  std::string to_string() const;
};
Tolerance tolerance_for(const OpCases& oc, const Variant& v, DType out_dtype);

// Compares `got` with `want` (same dtype and sizes). Empty string when they agree, else a
// message with the max abs/rel error and the first failing index.
std::string compare_outputs(const Tensor& got, const Tensor& want, const Tolerance& tol);

// Independent f64 implementations of the composite ops (oracle.cpp): the outputs of op on
// `inputs`, or nullopt when there is no oracle for the op (primitives, shape-only ops).
std::optional<std::vector<Tensor>> oracle_outputs(Op op, const Attrs& attrs, const std::vector<Tensor>& inputs,
                                                 const std::vector<TensorType>& out_types);

// ---------------------------------------------------------------- running

// An output view with sentinel bytes before and after it (and a poisoned payload).
struct GuardedOutput {
  std::shared_ptr<Storage> storage;
  Tensor view;
  size_t nbytes = 0;
};
GuardedOutput make_guarded(const TensorType& t);
// "" when both sentinel regions are intact, else what changed.
std::string check_guards(const GuardedOutput& g);

enum class Outcome : uint8_t {
  not_accepted,  // type inference rejects the dtype (or this variant's shapes): not a failure
  no_reference,  // accepted, but the reference interpreter does not implement it (c64 ...)
  unsupported,   // illegal on the device (ErrorCode::illegal): a cell of the matrix
  pass,
  fail,
  expected_fail,  // fails, and the manifest says so (set by check_against_manifest)
};
std::string_view outcome_name(Outcome o);

struct CaseResult {
  std::string device;
  DType dtype;
  std::string variant;
  Outcome outcome = Outcome::not_accepted;
  std::string detail;  // failure message, or why unsupported
};

struct OpRun {
  Op op;
  uint64_t seed = 0;
  std::vector<std::string> devices;  // devices run (ref first)
  std::vector<CaseResult> results;   // one per (device, dtype, variant) that was accepted
  std::vector<std::string> errors;   // suite-level problems (ref failed, inconsistent compile)
  int programs_compiled = 0;
};

// Devices the suite runs besides ref: available, not ref, not null.
std::vector<std::string> devices_under_test();
// Registered devices that are unavailable here, with the reason.
std::vector<std::pair<std::string, std::string>> unavailable_devices();

// Whether the manifest expects (device, variant, dtype) of the op to fail: such cases run in
// their own program (a known crash must not take the other cases down with it).
using ExpectedFailFn = std::function<bool(const std::string& device, const std::string& variant, DType dt)>;

// Runs all cases of one op on ref and every device under test.
OpRun run_op(const OpCases& oc, uint64_t seed, const ExpectedFailFn& expected_fail = {});

// Legality only, in this process (no compile, no run): what run_op would report as
// no_reference / unsupported, and "pass" for everything that runs. Used to check that
// docs/ops.md is current without running every case twice.
// Cases the manifest expects to fail are predicted as expected failures without legalizing
// them (a known crash may be in the legalizer).
OpRun predict_op(const OpCases& oc, const std::vector<std::string>& devices, const ExpectedFailFn& expected_fail);

// The reason a node is illegal, in a form that reads the same for every op and shape (so the
// matrix's footnotes group): `refusal` without the "<op> on <type>: " and "the rewrite needs
// <op> on <type>, which is illegal here (...)" prefixes the legalizer puts in front (up to
// four, outermost first), and "implement <op> on " reads "implement the op on ".
std::string strip_prefixes(std::string refusal);

// The entry point of a child process that runs one device program (see runner.cpp); returns
// the exit status. Called before main when RLX_CONFORMANCE_CHILD is set.
int child_main(const char* request);

// A graph holding one case (inputs named after the variant), or the inference error.
Expected<Graph> build_case_graph(const OpCases& oc, const Variant& v, DType dt, uint64_t seed);

// ---------------------------------------------------------------- manifest

enum class ManifestStatus : uint8_t { expected_fail, unsupported };

struct ManifestEntry {
  std::string device;
  std::string op;       // op name
  std::string variant;  // empty: every variant of the op
  std::string dtype;    // dtype name; "*" (unsupported entries only): every dtype
  ManifestStatus status;
  std::string reason;
  int line = 0;
};

struct Manifest {
  std::vector<ManifestEntry> entries;
  std::string path;
};

// Parses the manifest; errors name the line.
Expected<Manifest> load_manifest(const std::string& path);
std::string default_manifest_path();

// Checks one op's results against the manifest: returns the problems (empty when the op's
// results are exactly what the manifest says), and marks expected failures in `run`.
std::vector<std::string> check_against_manifest(OpRun& run, const Manifest& m,
                                                const std::vector<std::string>& devices_run);
// Whether (device, op, variant, dtype) is covered by an expected-fail entry.
const ManifestEntry* find_expected_fail(const Manifest& m, const std::string& device, Op op,
                                        const std::string& variant, DType dt);

// ---------------------------------------------------------------- docs/ops.md

// One device's column: per op, the cell text; plus its footnotes and counts.
struct DeviceColumn {
  std::string device;
  std::map<std::string, std::string> cells;  // op name -> cell
  std::vector<std::string> notes;            // footnote lines "[^cpu-1]: ..."
  std::string counts;                        // summary row cells after the device name
};

struct OpsMatrix {
  std::vector<std::string> ops;                    // row order
  std::map<std::string, std::string> family;       // op -> family
  std::map<std::string, std::string> accepted;     // op -> dtypes the reference runs
  std::vector<DeviceColumn> columns;               // devices, in column order
};

// Builds the matrix from run (or predicted) results; `xfail_marks` come from the manifest.
OpsMatrix build_matrix(const std::vector<OpRun>& runs, const std::vector<std::string>& devices, const Manifest& m);
std::string render_ops_md(const OpsMatrix& m);
// Parses a file written by render_ops_md (for merging and staleness checks).
Expected<OpsMatrix> parse_ops_md(const std::string& text);
// Keeps only the columns of `devices` (and drops the others' notes and counts).
OpsMatrix project(const OpsMatrix& m, const std::vector<std::string>& devices);
// `fresh` with the columns of `old` added for devices that are not in `fresh` (devices that
// are unavailable on this machine keep what was committed).
OpsMatrix merge_unavailable(const OpsMatrix& fresh, const OpsMatrix& old);
std::string default_ops_md_path();

// Reads a whole file ("" and an error when it cannot be read).
Expected<std::string> read_text(const std::string& path);

}  // namespace rlx::conformance
