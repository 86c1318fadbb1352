// Compiling every conformance case's generated kernels for a device that cannot run here
// (cuda through NVRTC, rocm through clang's AMDGPU backend): each case of the suite's own case
// table is legalized for the device's code-generation stand-in, scheduled and rendered as the
// device does it, and the device's compiler must accept every case.
//
// Kernels of many cases share one translation unit (the prelude is compiled once per unit);
// when a unit fails, its ops and then their cases are compiled one by one to name the failing
// ones. Cases whose kernels differ only in their names compile alike and are compiled once;
// without `full`, cases that differ only in numbers (shapes, strides, constants) count as alike.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "conformance/conformance.h"
#include "rlx/device.h"

namespace rlx::conformance {

struct CompileCheck {
  const Device* device = nullptr;  // the code-generation stand-in the cases are legalized for
  // The kernels of a legalized case, each named with `prefix` first, and how many there are.
  std::function<Expected<std::pair<std::string, int>>(const Graph& primitive, const std::string& prefix)> render;
  // "" when the compiler accepts `kernels` (one or more cases' worth), else its error.
  std::function<std::string(const std::string& kernels)> compile_error;
  std::set<std::string> ops;  // op names to check; empty: every op of the case table
  bool sample = false;        // only the first case of each (op, dtype)
  bool full = false;          // cases alike only when their text is (else digits are ignored)
  int unit_kernels = 400;     // kernels per translation unit
};

struct CompileCheckResult {
  int ops = 0, ops_with_cases = 0, ops_all_illegal = 0, rendered = 0;
  int cases = 0, kernels = 0, units = 0, duplicates = 0, illegal = 0;
  std::vector<std::string> failures;                      // "op case: compiler error", per failing case
  std::vector<std::string> errors;                        // legalize / schedule / render failures
  std::map<std::string, std::set<std::string>> illegal_why;  // refusal -> "op/dtype"s
  double render_s = 0, total_s = 0;
  // "<ops> ops in the case table, ... cases, ... kernels compiled ..." and one line per refusal.
  std::string summary(const std::string& device, const std::string& target) const;
};

// Runs the check on up to 8 threads.
CompileCheckResult compile_every_case(const CompileCheck& check);

// The kernels of `op`'s first case that `device` runs (rendered by `check.render` with prefix
// "c0_"), for tests of a dialect's text; empty when there is none.
std::string first_case_kernels(Op op, const CompileCheck& check);

}  // namespace rlx::conformance
