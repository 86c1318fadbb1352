// Running one op's cases: legality per case, one program per (op, device) holding every legal
// case as separate outputs (so each device compiles one C file per op, not one per case), runs
// into guarded output views, comparison against ref, and isolation of whatever fails.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <algorithm>
#include <atomic>
#include <thread>

#include "conformance.h"
#include "rlx/dispatch.h"

namespace rlx::conformance {

std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::not_accepted: return "not-accepted";
    case Outcome::no_reference: return "no-reference";
    case Outcome::unsupported: return "unsupported";
    case Outcome::pass: return "pass";
    case Outcome::fail: return "FAIL";
    case Outcome::expected_fail: return "expected-fail";
  }
  return "?";
}

std::vector<std::string> devices_under_test() {
  // RLX_CONFORMANCE_DEVICES=cuda,cpu limits the run to those devices (a GPU check that
  // must fit in minutes); unset, every available device runs
  std::string only;
  if (const char* e = std::getenv("RLX_CONFORMANCE_DEVICES")) only = "," + std::string(e) + ",";
  std::vector<std::string> r;
  for (const DeviceInfo& d : list_devices())
    if (d.available && d.name != "ref" && d.name != "null" && (only.empty() || only.find("," + d.name + ",") != std::string::npos))
      r.push_back(d.name);
  return r;
}

std::vector<std::pair<std::string, std::string>> unavailable_devices() {
  std::vector<std::pair<std::string, std::string>> r;
  for (const DeviceInfo& d : list_devices())
    if (!d.available) r.push_back({d.name, d.reason});
  return r;
}

// ---------------------------------------------------------------- guarded outputs

namespace {
constexpr size_t kGuard = 256;  // bytes of sentinel before and after each output

uint8_t guard_byte(size_t i) { return static_cast<uint8_t>(0xA5 ^ (i * 0x3B) ^ (i >> 8)); }
}  // namespace

GuardedOutput make_guarded(const TensorType& t) {
  GuardedOutput g;
  Sizes s = *static_sizes(t.shape);
  g.nbytes = dtype_bytes(t.dtype, static_cast<size_t>(numel(s)));
  g.storage = allocate_storage(kGuard + g.nbytes + kGuard);
  uint8_t* p = g.storage->data();
  for (size_t i = 0; i < kGuard; ++i) p[i] = guard_byte(i);
  // poison the payload: NaN for floats, -1 / MAX for integers, 0xFF (not a bool) for bool,
  // so elements the device never writes do not pass by luck
  std::memset(p + kGuard, 0xFF, g.nbytes);
  for (size_t i = 0; i < kGuard; ++i) p[kGuard + g.nbytes + i] = guard_byte(i + kGuard);
  g.view = Tensor(t.dtype, s, g.storage, kGuard);
  return g;
}

// "" when both guards are intact.
std::string check_guards(const GuardedOutput& g) {
  const uint8_t* p = g.storage->data();
  int64_t before = -1, after = -1, nb = 0, na = 0;
  for (size_t i = 0; i < kGuard; ++i)
    if (p[i] != guard_byte(i)) {
      if (before < 0 || static_cast<int64_t>(i) > before) before = static_cast<int64_t>(i);
      ++nb;
    }
  for (size_t i = 0; i < kGuard; ++i)
    if (p[kGuard + g.nbytes + i] != guard_byte(i + kGuard)) {
      if (after < 0) after = static_cast<int64_t>(i);
      ++na;
    }
  if (nb == 0 && na == 0) return "";
  std::string s = "out-of-bounds write:";
  if (nb) s += cat(" ", nb, " sentinel byte(s) before the output changed (the nearest ", kGuard - before, " byte(s) before it)");
  if (na) s += cat(" ", na, " sentinel byte(s) after the output changed (the first ", after, " byte(s) past its end, output is ",
                   g.nbytes, " bytes)");
  return s;
}

namespace {

// ---------------------------------------------------------------- crash context

// What the suite is doing, printed if a device crashes the process (a segfault in a kernel
// otherwise leaves ctest with nothing but "SEGFAULT").
char g_context[1024] = "";
FILE* g_progress = nullptr;  // in a child process: the result file, where each phase is logged

void set_context(const std::string& s) {
  std::strncpy(g_context, s.c_str(), sizeof g_context - 1);
  g_context[sizeof g_context - 1] = 0;
  if (g_progress && !s.empty()) {
    std::fprintf(g_progress, "phase %s\n", g_context);
    std::fflush(g_progress);
  }
}

extern "C" void on_fatal_signal(int sig) {
  const char* head = "\n*** conformance: fatal signal while running: ";
  ssize_t r = write(2, head, std::strlen(head));
  r = write(2, g_context, std::strlen(g_context));
  r = write(2, "\n", 1);
  (void)r;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void install_crash_handler() {
  static bool done = false;
  if (done) return;
  done = true;
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(s, on_fatal_signal);
}

// ---------------------------------------------------------------- building

Attrs case_attrs(const Variant& v, DType dt, uint64_t seed) {
  Attrs a = v.attrs;
  if (v.dtype_attr) a.set("dtype", dt);
  if (v.seed_attr) {
    // a fresh generator seed each run, derived from the run seed
    std::mt19937_64 r = case_rng(seed, Op::Random, dt, v.name, "seed-attr");
    a.set("seed", static_cast<int64_t>(r() >> 1));
  }
  return a;
}

// Appends one case's inputs and node to g; returns the node's outputs.
Expected<std::vector<ValueId>> append_case(Graph& g, const OpCases& oc, const Variant& v, DType dt, uint64_t seed,
                                           const std::string& prefix) {
  std::vector<ValueId> ins;
  for (size_t i = 0; i < v.inputs.size(); ++i)
    ins.push_back(g.add_input(cat(prefix, "in", i), TensorType{input_dtype(v.inputs[i], dt), to_shape(v.inputs[i].shape)}));
  return g.add_node(oc.op, ins, case_attrs(v, dt, seed), prefix + std::string(op_name(oc.op)));
}

// A case: one (dtype, variant) of the op, with its inputs and reference outputs.
struct Case {
  const Variant* v;
  DType dt;
  std::vector<TensorType> out_types;
  std::vector<Tensor> inputs;
  std::vector<Tensor> want;
  std::string label() const { return cat(dtype_name(dt), " ", v->name); }
};

std::string case_description(const OpCases& oc, const Case& c, uint64_t seed) {
  std::string d = cat("op ", op_name(oc.op), ", dtype ", dtype_name(c.dt), ", variant '", c.v->name, "', inputs (",
                      describe_inputs(*c.v, c.dt), ")");
  if (!c.v->attrs.empty() || c.v->dtype_attr || c.v->seed_attr)
    d += cat(", attrs {", describe_attrs(case_attrs(*c.v, c.dt, seed)), "}");
  return d + cat(", seed ", seed, " (replay: RLX_CONFORMANCE_SEED=", seed, ")");
}

// One graph holding the given cases in order.
Expected<Graph> combined_graph(const OpCases& oc, const std::vector<Case*>& cases, uint64_t seed) {
  Graph g;
  g.name = cat("conformance_", op_name(oc.op));
  for (size_t i = 0; i < cases.size(); ++i) {
    RLX_ASSIGN_OR_RETURN(auto outs, append_case(g, oc, *cases[i]->v, cases[i]->dt, seed, cat("c", i, "_")));
    for (ValueId o : outs) g.outputs.push_back(o);
  }
  return g;
}

std::vector<Tensor> all_inputs(const std::vector<Case*>& cases) {
  std::vector<Tensor> r;
  for (Case* c : cases) r.insert(r.end(), c->inputs.begin(), c->inputs.end());
  return r;
}

// ---------------------------------------------------------------- legality

enum class Legal : uint8_t { yes, illegal, error };

struct LegalityResult {
  Legal legal;
  std::string why;
};

// Removes shapes from a reason so that the same refusal on different variants reads the same.
std::string without_shapes(std::string s) {
  static const std::regex shapes(R"(\[[0-9, ]*\])");
  return std::regex_replace(s, shapes, "");
}

}  // namespace

std::string strip_prefixes(std::string s) {
  static const std::regex prefix(R"(^(the rewrite needs )?[a-z_0-9]+ on [a-z0-9]+(\[[0-9, ]*\])?(: |, which is illegal here \())");
  for (int i = 0; i < 4; ++i) {
    std::smatch m;
    if (!std::regex_search(s, m, prefix)) break;
    // read the match before s changes: m's iterators point into s's old buffer
    const bool parenthesized = m[3].str() != ": ";
    s = s.substr(static_cast<size_t>(m.length(0)));
    if (parenthesized && !s.empty() && s.back() == ')') s.pop_back();
  }
  static const std::regex implement(R"(implement [a-z_0-9]+ on )");
  return std::regex_replace(s, implement, "implement the op on ");
}

namespace {

// The refusal of the path that got furthest, through strip_prefixes.
std::string refusal_text(const NodeDecision& d) {
  for (const NodeDecision& c : d.children)
    if (c.path == DispatchPath::illegal) return refusal_text(c);
  const std::string& common = d.common_refused;
  if (!common.empty() && common.find("has no decomposition") == std::string::npos &&
      common.rfind("not tried", 0) != 0)
    return strip_prefixes(common);
  if (!d.rewrite_refused.empty() && d.rewrite_refused.rfind("no rewrite rule", 0) != 0 &&
      d.rewrite_refused.rfind("not tried", 0) != 0)
    return strip_prefixes(d.rewrite_refused);
  std::string s;
  auto part = [&](const char* path, const std::string& why) {
    if (!why.empty()) s += cat(s.empty() ? "" : "; ", path, ": ", why);
  };
  part("native", d.native_refused);
  part("common-ir", d.common_refused);
  part("rewrite", d.rewrite_refused);
  return strip_prefixes(s);
}

LegalityResult legality(const Graph& g, const Device& dev) {
  auto lr = legalize(g, dev, DispatchPolicy{});
  if (!lr) {
    if (lr.status().code() == ErrorCode::illegal) return {Legal::illegal, lr.status().message()};
    return {Legal::error, lr.status().to_string()};
  }
  if (lr->report.ok()) return {Legal::yes, ""};
  for (const NodeDecision& d : lr->report.nodes)
    if (d.path == DispatchPath::illegal) return {Legal::illegal, without_shapes(refusal_text(d))};
  return {Legal::illegal, "illegal"};
}

// ---------------------------------------------------------------- executing cases (in a child)

struct CaseOutcome {
  Outcome outcome = Outcome::fail;
  std::string detail;
};

// What running a group of cases on a device gave: an outcome per case, or a failure of the
// whole group (a compile or run error that the parent pins down by splitting the group).
struct GroupResult {
  Status status;
  std::vector<CaseOutcome> outcomes;
  int programs = 0;
};

// A copy of `t` with its f32-subnormal values (f32, bf16) set to zero of their sign.
Tensor flush_subnormals(const Tensor& t) {
  Tensor r = t.clone();
  if (t.dtype() != DType::f32 && t.dtype() != DType::bf16) return r;
  for (int64_t i = 0; i < r.numel(); ++i) {
    const double v = r.get_f64(i);
    if (v != 0 && std::fabs(v) < static_cast<double>(std::numeric_limits<float>::min())) r.set_f64(i, std::signbit(v) ? -0.0 : 0.0);
  }
  return r;
}

// On a device that flushes subnormals (DeviceInfo::flushes_subnormals), whether `got` (case
// `c`'s outputs) matches the reference on the case's inputs with subnormals flushed, with
// subnormal outputs of both sides flushed too: the outcome WGSL permits. The WebGPU CTS
// accepts the same.
bool matches_flushed(const OpCases& oc, const Case& c, const std::vector<const Tensor*>& got, uint64_t seed) {
  std::vector<Tensor> inputs;
  bool any = false;
  for (const Tensor& t : c.inputs) {
    inputs.push_back(flush_subnormals(t));
    any |= inputs.back().nbytes() && std::memcmp(inputs.back().bytes(), t.bytes(), t.nbytes()) != 0;
  }
  Case flushed = c;
  auto g = combined_graph(oc, {&flushed}, seed);
  if (!g) return false;
  auto model = Model::compile(std::move(*g), {.device = "ref"});
  if (!model) return false;
  auto want = (*model)->run(any ? inputs : c.inputs);
  if (!want || want->size() != got.size()) return false;
  for (size_t k = 0; k < got.size(); ++k)
    if (!compare_outputs(flush_subnormals(*got[k]), flush_subnormals((*want)[k]), tolerance_for(oc, *c.v, c.out_types[k].dtype)).empty())
      return false;
  return true;
}

// Whether a 64-bit integer input or reference output of `c` holds a value that 32 bits do not
// (i64 outside the i32 range, u64 past UINT32_MAX): a device that computes i64/u64 in 32 bits
// (DeviceInfo::int64_in_32_bits) must refuse such a case, and may refuse only such a case.
bool needs_64_bits(const Case& c) {
  auto past = [](const Tensor& t) {
    if (t.dtype() != DType::i64 && t.dtype() != DType::u64) return false;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype() == DType::u64 ? t.data<uint64_t>()[i] > UINT32_MAX
                                  : t.data<int64_t>()[i] < INT32_MIN || t.data<int64_t>()[i] > INT32_MAX)
        return true;
    }
    return false;
  };
  return std::any_of(c.inputs.begin(), c.inputs.end(), past) || std::any_of(c.want.begin(), c.want.end(), past);
}

// Compiles `cases` as one program on `device`, runs it into guarded outputs and compares
// against the cases' reference outputs. Returns the problems per case ("" = pass).
Status run_program(const OpCases& oc, const std::vector<Case*>& cases, const std::string& device, uint64_t seed,
                   int& programs, std::vector<std::string>& problems) {
  problems.assign(cases.size(), "");
  RLX_ASSIGN_OR_RETURN(Graph g, combined_graph(oc, cases, seed));
  set_context(cat("op ", op_name(oc.op), " on ", device, ": compiling ", cases.size(), " case(s) starting with ",
                  cases[0]->label(), ", seed ", seed));
  RLX_ASSIGN_OR_RETURN(auto model, Model::compile(std::move(g), {.device = device}));
  std::vector<Tensor> inputs = all_inputs(cases);
  ++programs;
  RLX_ASSIGN_OR_RETURN(CompiledVariant * var, model->variant_for(inputs));
  std::vector<GuardedOutput> outs;
  std::vector<Tensor> views;
  for (const Case* c : cases)
    for (const TensorType& t : c->out_types) {
      outs.push_back(make_guarded(t));
      views.push_back(outs.back().view);
    }
  std::vector<Tensor> before;
  for (const Tensor& t : inputs) before.push_back(t.clone());
  set_context(cat("op ", op_name(oc.op), " on ", device, ": running ", cases.size(), " case(s) starting with ",
                  cases[0]->label(), ", seed ", seed));
  RLX_TRY(var->executable->run_into(inputs, views));
  set_context(cat("op ", op_name(oc.op), " on ", device, ": comparing"));
  auto dev = get_device(device);
  const bool flushes = dev && (*dev)->info().flushes_subnormals;
  size_t o = 0, in = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = *cases[i];
    std::string& problem = problems[i];
    bool flushed_ok = false;
    if (flushes) {  // only asked where the exact comparison fails
      bool exact = true;
      for (size_t k = 0; k < c.out_types.size() && exact; ++k)
        exact = compare_outputs(outs[o + k].view, c.want[k], tolerance_for(oc, *c.v, c.out_types[k].dtype)).empty();
      std::vector<const Tensor*> got;
      for (size_t k = 0; k < c.out_types.size(); ++k) got.push_back(&outs[o + k].view);
      flushed_ok = !exact && matches_flushed(oc, c, got, seed);
    }
    for (size_t k = 0; k < c.out_types.size(); ++k, ++o) {
      std::string guards = check_guards(outs[o]);
      std::string cmp =
          flushed_ok ? "" : compare_outputs(outs[o].view, c.want[k], tolerance_for(oc, *c.v, c.out_types[k].dtype));
      std::string where = c.out_types.size() > 1 ? cat("output ", k, " (", c.out_types[k].to_string(), "): ")
                                                 : cat("output ", c.out_types[k].to_string(), ": ");
      if (!guards.empty()) problem += (problem.empty() ? "" : "; ") + where + guards;
      if (!cmp.empty()) problem += (problem.empty() ? "" : "; ") + where + cmp;
    }
    for (size_t k = 0; k < c.inputs.size(); ++k, ++in)
      if (c.inputs[k].nbytes() && std::memcmp(c.inputs[k].bytes(), before[in].bytes(), c.inputs[k].nbytes()) != 0)
        problem += cat(problem.empty() ? "" : "; ", "input ", k, " was modified by the device");
  }
  return Status::ok();
}

// Reference outputs for the cases (one ref program, or one per case if that fails). Returns
// per case "" or why the reference failed.
std::vector<std::string> compute_reference(const OpCases& oc, const std::vector<Case*>& cases, uint64_t seed) {
  std::vector<std::string> why(cases.size(), "");
  auto attempt = [&](const std::vector<Case*>& group) -> Status {
    RLX_ASSIGN_OR_RETURN(Graph g, combined_graph(oc, group, seed));
    set_context(cat("op ", op_name(oc.op), " on ref: computing the reference for ", group.size(),
                    " case(s) starting with ", group[0]->label(), ", seed ", seed));
    RLX_ASSIGN_OR_RETURN(auto model, Model::compile(std::move(g), {.device = "ref"}));
    RLX_ASSIGN_OR_RETURN(auto outs, model->run(all_inputs(group)));
    size_t o = 0;
    for (Case* c : group) {
      c->want.assign(outs.begin() + static_cast<std::ptrdiff_t>(o),
                     outs.begin() + static_cast<std::ptrdiff_t>(o + c->out_types.size()));
      o += c->out_types.size();
    }
    return Status::ok();
  };
  if (cases.empty() || attempt(cases).is_ok()) return why;
  for (size_t i = 0; i < cases.size(); ++i) {
    Status s = attempt({cases[i]});
    if (!s.is_ok()) why[i] = cat("the reference interpreter failed: ", s.to_string());
  }
  return why;
}

std::unique_ptr<Case> make_case(const OpCases& oc, const Variant& v, DType dt, uint64_t seed, const Graph& g,
                                bool with_inputs) {
  auto c = std::make_unique<Case>();
  c->v = &v;
  c->dt = dt;
  for (ValueId o : g.outputs) c->out_types.push_back(g.type(o));
  if (with_inputs)
    for (size_t i = 0; i < v.inputs.size(); ++i) {
      std::mt19937_64 rng = case_rng(seed, oc.op, dt, v.name, cat("input", i));
      c->inputs.push_back(make_input(v.inputs[i], dt, rng));
    }
  return c;
}

// Everything about a group of cases on one device, in this process: legality on ref and on
// the device, reference outputs, one device program, comparison. The device "ref" runs the
// reference executable into guarded outputs and compares it with its own fresh outputs.
GroupResult execute_cases(const OpCases& oc, const std::vector<std::pair<const Variant*, DType>>& ids,
                          const std::string& device, uint64_t seed) {
  install_crash_handler();
  GroupResult r;
  r.outcomes.resize(ids.size());
  auto ref_dev = get_device("ref");
  auto dev = get_device(device);
  if (!ref_dev || !dev) {
    r.status = !dev ? dev.status() : ref_dev.status();
    return r;
  }
  std::vector<std::unique_ptr<Case>> owned;
  std::vector<Case*> cases;
  std::vector<size_t> index;  // case -> position in ids
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto& [v, dt] = ids[i];
    auto g = build_case_graph(oc, *v, dt, seed);
    if (!g) {
      r.outcomes[i] = {Outcome::not_accepted, g.status().to_string()};
      continue;
    }
    set_context(cat("op ", op_name(oc.op), ": legalizing ", dtype_name(dt), " ", v->name, " for ref"));
    LegalityResult lr = legality(*g, **ref_dev);
    if (lr.legal != Legal::yes) {
      r.outcomes[i] = lr.legal == Legal::illegal
                          ? CaseOutcome{Outcome::no_reference, lr.why}
                          : CaseOutcome{Outcome::fail, cat("legalizing for ref failed: ", lr.why)};
      continue;
    }
    if (device != "ref") {
      set_context(cat("op ", op_name(oc.op), ": legalizing ", dtype_name(dt), " ", v->name, " for ", device));
      lr = legality(*g, **dev);
      if (lr.legal != Legal::yes) {
        r.outcomes[i] = lr.legal == Legal::illegal
                            ? CaseOutcome{Outcome::unsupported, lr.why}
                            : CaseOutcome{Outcome::fail, cat("legalizing failed (not an illegal-node report): ", lr.why)};
        continue;
      }
    }
    owned.push_back(make_case(oc, *v, dt, seed, *g, true));
    cases.push_back(owned.back().get());
    index.push_back(i);
  }
  std::vector<std::string> ref_why = compute_reference(oc, cases, seed);
  if (device == "ref") {
    // composites reach ref through the same decomposition rules as every device: check the
    // f64 cases against an independent implementation of the op's documented semantics
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = *cases[k];
      if (!ref_why[k].empty() || c.dt != DType::f64) continue;
      set_context(cat("op ", op_name(oc.op), ": oracle for ", c.label()));
      auto want = oracle_outputs(oc.op, case_attrs(*c.v, c.dt, seed), c.inputs, c.out_types);
      if (!want) continue;
      Tolerance tol;
      tol.rtol = 1e-9;
      tol.atol = 1e-9 * c.v->magnitude * std::sqrt(static_cast<double>(std::max<int64_t>(1, c.v->reduce_len)));
      for (size_t o = 0; o < want->size(); ++o) {
        std::string cmp = compare_outputs(c.want[o], (*want)[o], tol);
        if (!cmp.empty())
          ref_why[k] += cat(ref_why[k].empty() ? "" : "; ", "output ", o, ": the reference (the op's decomposition "
                            "rule run by ref) disagrees with the independent oracle in tests/conformance/oracle.cpp: ", cmp);
      }
    }
  }
  std::vector<Case*> runnable;
  std::vector<size_t> runnable_index;
  for (size_t k = 0; k < cases.size(); ++k) {
    if (!ref_why[k].empty()) {
      r.outcomes[index[k]] = {Outcome::fail, ref_why[k]};
    } else {
      runnable.push_back(cases[k]);
      runnable_index.push_back(index[k]);
    }
  }
  if (runnable.empty()) return r;
  std::vector<std::string> problems;
  Status st = run_program(oc, runnable, device, seed, r.programs, problems);
  set_context("");
  if (!st.is_ok()) {
    if (ids.size() > 1) {
      r.status = st;  // the parent splits the group
      return r;
    }
    // the documented refusal of a device that computes i64/u64 in 32 bits: a pass where the
    // case needs 64 bits, a failure where it does not
    auto dev = get_device(device);
    // (reductions and contractions may also be refused for a partial sum or product past 32
    // bits that the final result does not show: 32-bit arithmetic cannot tell)
    const OpFamily fam = op_info(oc.op).family;
    const bool partials = fam == OpFamily::reduce || fam == OpFamily::contraction;
    if (st.code() == ErrorCode::out_of_range && dev && (*dev)->info().int64_in_32_bits &&
        (needs_64_bits(*runnable[0]) || partials)) {
      r.outcomes[runnable_index[0]] = {Outcome::pass, cat("refused, as documented: ", st.message())};
      return r;
    }
    r.outcomes[runnable_index[0]] = {Outcome::fail, st.code() == ErrorCode::illegal
                                                        ? cat("legalize() accepts the case but compiling reports it "
                                                              "illegal: ", st.to_string())
                                                        : cat("compile/run failed: ", st.to_string())};
    return r;
  }
  for (size_t k = 0; k < runnable.size(); ++k)
    r.outcomes[runnable_index[k]] = {problems[k].empty() ? Outcome::pass : Outcome::fail, problems[k]};
  return r;
}

// ---------------------------------------------------------------- child processes

// Every group of cases runs in a child process (this executable, re-run with
// RLX_CONFORMANCE_CHILD naming a request file): legalizing, compiling or running a case can
// crash or hang, and that must fail the cases concerned (which the manifest can then list)
// instead of killing the suite. RLX_CONFORMANCE_INPROCESS=1 runs everything in this process
// (for a debugger).

bool in_process() { return std::getenv("RLX_CONFORMANCE_INPROCESS") != nullptr; }

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

constexpr int kChildTimeoutSeconds = 300;

using CaseIds = std::vector<std::pair<const Variant*, DType>>;

GroupResult run_cases(const OpCases& oc, const CaseIds& ids, const std::string& device, uint64_t seed) {
  if (in_process()) return execute_cases(oc, ids, device, seed);
  GroupResult r;
  r.outcomes.resize(ids.size());
  char dir_tmpl[] = "/tmp/rlx-conformance-XXXXXX";
  if (!mkdtemp(dir_tmpl)) {
    r.status = error(ErrorCode::io_error, "mkdtemp failed: ", std::strerror(errno));
    return r;
  }
  const std::string dir = dir_tmpl, req = dir + "/request", res = dir + "/result";
  {
    std::ofstream f(req);
    f << "op " << op_name(oc.op) << "\nseed " << seed << "\ndevice " << device << "\nresult " << res << "\n";
    for (const auto& [v, dt] : ids) f << "case " << dtype_name(dt) << " " << v->name << "\n";
  }
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "RLX_CONFORMANCE_CHILD=", 22) != 0) env_store.push_back(*e);
  env_store.push_back("RLX_CONFORMANCE_CHILD=" + req);
  std::vector<char*> envp;
  for (std::string& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  char* argv[] = {exe.data(), nullptr};
  pid_t pid;
  int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data());
  if (rc != 0) {
    r.status = error(ErrorCode::runtime_error, "cannot start a child process: ", std::strerror(rc));
    return r;
  }
  int wstatus = 0;
  bool timed_out = false;
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    pid_t w = waitpid(pid, &wstatus, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(kChildTimeoutSeconds)) {
      kill(pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::string phase, status_line;
  bool ended = false;
  {
    std::ifstream f(res);
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind("phase ", 0) == 0) {
        phase = line.substr(6);
      } else if (line.rfind("status ", 0) == 0) {
        status_line = line.substr(7);
      } else if (line.rfind("programs ", 0) == 0) {
        r.programs += std::atoi(line.c_str() + 9);
      } else if (line.rfind("case ", 0) == 0) {
        std::istringstream ls(line.substr(5));
        size_t i = 0;
        int outcome = 0;
        ls >> i >> outcome;
        std::string detail;
        std::getline(ls, detail);
        if (!detail.empty() && detail[0] == ' ') detail.erase(0, 1);
        if (i < r.outcomes.size()) r.outcomes[i] = {static_cast<Outcome>(outcome), detail};
      } else if (line == "end") {
        ended = true;
      }
    }
  }
  std::remove(req.c_str());
  std::remove(res.c_str());
  rmdir(dir.c_str());
  if (timed_out) {
    r.status = error(ErrorCode::runtime_error, "timed out after ", kChildTimeoutSeconds, " s while ", phase);
  } else if (WIFSIGNALED(wstatus)) {
    r.status = error(ErrorCode::runtime_error, "crashed with signal ", WTERMSIG(wstatus), " (", strsignal(WTERMSIG(wstatus)),
                     ") while ", phase.empty() ? "starting" : phase);
  } else if (!ended) {
    r.status = error(ErrorCode::runtime_error, "the child process exited with status ",
                     WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, " before finishing, while ", phase);
  } else if (status_line != "ok") {
    size_t sp = status_line.find(' ');
    int code = std::atoi(status_line.substr(0, sp).c_str());
    r.status = Status(static_cast<ErrorCode>(code), sp == std::string::npos ? "" : status_line.substr(sp + 1));
  }
  return r;
}

// Runs the cases on the device, splitting the group (by dtype, then case by case) until a
// group failure is pinned to single cases. A case that fails inside a combined program is
// confirmed alone (unless it is a known failure), so a failure that only shows when cases
// share a program is reported as such.
void run_isolating(const OpCases& oc, const CaseIds& ids, const std::string& device, uint64_t seed, bool confirm_alone,
                   std::map<std::pair<const Variant*, DType>, CaseOutcome>& out, int& programs) {
  if (ids.empty()) return;
  GroupResult r = run_cases(oc, ids, device, seed);
  programs += r.programs;
  if (r.status.is_ok()) {
    for (size_t i = 0; i < ids.size(); ++i) {
      CaseOutcome o = r.outcomes[i];
      if (o.outcome == Outcome::fail && ids.size() > 1 && confirm_alone) {
        GroupResult alone = run_cases(oc, {ids[i]}, device, seed);
        programs += alone.programs;
        if (!alone.status.is_ok()) {
          o.detail += cat(" [alone: ", alone.status.to_string(), "]");
        } else if (alone.outcomes[0].outcome == Outcome::pass) {
          o.detail = cat("fails only when compiled together with other cases of the op (", o.detail, "); passes alone");
        } else {
          o = alone.outcomes[0];
        }
      }
      out[ids[i]] = o;
    }
    return;
  }
  if (ids.size() == 1) {
    out[ids[0]] = {Outcome::fail, cat("compile/run failed: ", r.status.to_string())};
    return;
  }
  std::map<DType, CaseIds> by_dtype;
  for (const auto& id : ids) by_dtype[id.second].push_back(id);
  if (by_dtype.size() > 1) {
    for (auto& [dt, group] : by_dtype) run_isolating(oc, group, device, seed, confirm_alone, out, programs);
    return;
  }
  for (const auto& id : ids) run_isolating(oc, {id}, device, seed, confirm_alone, out, programs);
}

std::string case_text(const OpCases& oc, const Variant& v, DType dt, uint64_t seed) {
  Case c;
  c.v = &v;
  c.dt = dt;
  return case_description(oc, c, seed);
}

}  // namespace

Expected<Graph> build_case_graph(const OpCases& oc, const Variant& v, DType dt, uint64_t seed) {
  Graph g;
  g.name = cat("case_", op_name(oc.op), "_", dtype_name(dt), "_", v.name);
  RLX_ASSIGN_OR_RETURN(auto outs, append_case(g, oc, v, dt, seed, ""));
  g.outputs = outs;
  return g;
}

namespace {

int parallel_jobs() {
  if (const char* e = std::getenv("RLX_CONFORMANCE_JOBS")) return std::max(1, std::atoi(e));
  return std::max(1u, std::thread::hardware_concurrency());
}

// Splits cases into at most `n` groups of whole dtypes with about the same number of cases.
std::vector<CaseIds> split_by_dtype(const CaseIds& ids, int n) {
  std::map<DType, CaseIds> by;
  for (const auto& id : ids) by[id.second].push_back(id);
  std::vector<CaseIds> groups(static_cast<size_t>(std::max(1, std::min<int>(n, static_cast<int>(by.size())))));
  // largest dtype groups first, each to the currently smallest group
  std::vector<CaseIds*> order;
  for (auto& [dt, g] : by) order.push_back(&g);
  std::stable_sort(order.begin(), order.end(), [](CaseIds* a, CaseIds* b) { return a->size() > b->size(); });
  for (CaseIds* g : order) {
    auto smallest = std::min_element(groups.begin(), groups.end(),
                                     [](const CaseIds& a, const CaseIds& b) { return a.size() < b.size(); });
    smallest->insert(smallest->end(), g->begin(), g->end());
  }
  return groups;
}

}  // namespace

OpRun run_op(const OpCases& oc, uint64_t seed, const ExpectedFailFn& expected_fail) {
  OpRun run;
  run.op = oc.op;
  run.seed = seed;
  const std::vector<std::string> devices = devices_under_test();
  run.devices.push_back("ref");
  run.devices.insert(run.devices.end(), devices.begin(), devices.end());
  CaseIds accepted;
  for (DType dt : candidate_dtypes())
    for (const Variant& v : oc.variants) {
      if (!v.only.empty() && std::find(v.only.begin(), v.only.end(), dt) == v.only.end()) continue;
      if (build_case_graph(oc, v, dt, seed)) accepted.push_back({&v, dt});
    }
  // Tasks: for every device (ref included) the cases, in a few groups that run as concurrent
  // child processes. Each child computes the reference itself, so devices need not wait for
  // the ref column; a device's results count only where the reference passes.
  const int jobs = in_process() ? 1 : parallel_jobs();
  struct Task {
    std::string device;
    CaseIds ids;
    bool known;
    std::map<std::pair<const Variant*, DType>, CaseOutcome> out;
    int programs = 0;
  };
  std::vector<Task> tasks;
  for (const std::string& device : run.devices) {
    // known failures run apart from the rest, so a known crash cannot take the others down
    CaseIds known, rest;
    for (const auto& id : accepted)
      (expected_fail && expected_fail(device, id.first->name, id.second) ? known : rest).push_back(id);
    for (CaseIds& g : split_by_dtype(rest, device == "ref" ? 1 : jobs))
      if (!g.empty()) tasks.push_back({device, std::move(g), false, {}, 0});
    if (!known.empty()) tasks.push_back({device, std::move(known), true, {}, 0});
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t t; (t = next++) < tasks.size();)
      run_isolating(oc, tasks[t].ids, tasks[t].device, seed, !tasks[t].known, tasks[t].out, tasks[t].programs);
  };
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  std::map<std::pair<const Variant*, DType>, CaseOutcome> ref_out;
  for (Task& t : tasks) {
    run.programs_compiled += t.programs;
    if (t.device == "ref") ref_out.insert(t.out.begin(), t.out.end());
  }
  for (const std::string& device : run.devices) {
    std::map<std::pair<const Variant*, DType>, CaseOutcome> out;
    for (Task& t : tasks)
      if (t.device == device) out.insert(t.out.begin(), t.out.end());
    for (const auto& id : accepted) {
      if (device != "ref" && ref_out[id].outcome != Outcome::pass) continue;  // nothing to check against
      CaseOutcome o = out[id];
      if (o.outcome == Outcome::not_accepted) {
        run.errors.push_back(cat("inference rejects a case in the child that it accepts here: ", o.detail));
        continue;
      }
      if (o.outcome == Outcome::fail) o.detail = cat(device, ": ", case_text(oc, *id.first, id.second, seed), ": ", o.detail);
      run.results.push_back({device, id.second, id.first->name, o.outcome, o.detail});
    }
  }
  return run;
}

OpRun predict_op(const OpCases& oc, const std::vector<std::string>& devices, const ExpectedFailFn& expected_fail) {
  OpRun run;
  run.op = oc.op;
  run.devices.push_back("ref");
  run.devices.insert(run.devices.end(), devices.begin(), devices.end());
  auto ref_dev = get_device("ref");
  for (DType dt : candidate_dtypes())
    for (const Variant& v : oc.variants) {
      if (!v.only.empty() && std::find(v.only.begin(), v.only.end(), dt) == v.only.end()) continue;
      auto g = build_case_graph(oc, v, dt, 0);
      if (!g) continue;
      // known failures are not legalized here: a known crash may be in the legalizer
      if (expected_fail && expected_fail("ref", v.name, dt)) {
        run.results.push_back({"ref", dt, v.name, Outcome::expected_fail, ""});
        continue;
      }
      LegalityResult lr = legality(*g, **ref_dev);
      if (lr.legal != Legal::yes) {
        run.results.push_back({"ref", dt, v.name, Outcome::no_reference, lr.why});
        continue;
      }
      run.results.push_back({"ref", dt, v.name, Outcome::pass, ""});
      for (const std::string& device : devices) {
        if (expected_fail && expected_fail(device, v.name, dt)) {
          run.results.push_back({device, dt, v.name, Outcome::expected_fail, ""});
          continue;
        }
        auto dev = get_device(device);
        LegalityResult dl = legality(*g, **dev);
        run.results.push_back({device, dt, v.name, dl.legal == Legal::illegal ? Outcome::unsupported : Outcome::pass,
                               dl.legal == Legal::illegal ? dl.why : ""});
      }
    }
  return run;
}

int child_main(const char* request) {
  install_crash_handler();
  std::ifstream f(request);
  std::string line, op_text, device, result;
  uint64_t seed = 0;
  std::vector<std::pair<std::string, std::string>> wanted;
  while (std::getline(f, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "op") ls >> op_text;
    else if (key == "seed") ls >> seed;
    else if (key == "device") ls >> device;
    else if (key == "result") ls >> result;
    else if (key == "case") {
      std::string dt, v;
      ls >> dt >> v;
      wanted.push_back({dt, v});
    }
  }
  g_progress = std::fopen(result.c_str(), "w");
  if (!g_progress) return 3;
  auto finish = [&](const GroupResult& r) {
    std::fprintf(g_progress, "programs %d\n", r.programs);
    if (r.status.is_ok()) std::fprintf(g_progress, "status ok\n");
    else std::fprintf(g_progress, "status %d %s\n", static_cast<int>(r.status.code()), one_line(r.status.message()).c_str());
    for (size_t i = 0; i < r.outcomes.size(); ++i)
      std::fprintf(g_progress, "case %zu %d %s\n", i, static_cast<int>(r.outcomes[i].outcome),
                   one_line(r.outcomes[i].detail).c_str());
    std::fprintf(g_progress, "end\n");
    std::fclose(g_progress);
    g_progress = nullptr;
    return 0;
  };
  auto op = op_from_name(op_text);
  const OpCases* oc = op ? cases_for(*op) : nullptr;
  GroupResult bad;
  if (!oc) {
    bad.status = error(ErrorCode::internal, "child: unknown op ", op_text);
    return finish(bad);
  }
  CaseIds ids;
  for (const auto& [dt_name, vname] : wanted) {
    const Variant* v = nullptr;
    for (const Variant& x : oc->variants)
      if (x.name == vname) v = &x;
    auto dt = parse_dtype(dt_name);
    if (!v || !dt) {
      bad.status = error(ErrorCode::internal, "child: unknown case ", dt_name, " ", vname);
      return finish(bad);
    }
    ids.push_back({v, *dt});
  }
  return finish(execute_cases(*oc, ids, device, seed));
}

}  // namespace rlx::conformance
