#include "conformance/compile_check.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <regex>
#include <thread>

#include "rlx/dispatch.h"

namespace rlx::conformance {
namespace {

// One case's kernels, rendered with a prefix unique within its translation unit.
struct RenderedCase {
  std::string label;    // "f32 basic" (and "(common)" when rendered with natives refused)
  std::string kernels;
  int count = 0;
};

struct OpRender {
  Op op;
  std::vector<RenderedCase> cases;
  int illegal = 0;                    // cases the device refuses (with the reasons below)
  std::set<std::string> illegal_why;  // distinct reasons
  std::vector<std::string> errors;
};

// Why an illegal node (or the illegal node a rewrite made) cannot run: its common-IR refusal.
std::string leaf_refusal(const NodeDecision& d) {
  for (const NodeDecision& c : d.children)
    if (c.path == DispatchPath::illegal) return leaf_refusal(c);
  return d.common_refused.empty() ? d.native_refused : d.common_refused;
}

// "add on c64[7, 13]: ..." -> "add on c64: ...", so a refusal reads the same for every variant.
std::string without_shapes(const std::string& s) {
  static const std::regex shapes(R"(\[[0-9, ]*\])");
  return std::regex_replace(s, shapes, "");
}

Status render_case(const CompileCheck& check, const Graph& primitive, const std::string& prefix, RenderedCase& out) {
  RLX_ASSIGN_OR_RETURN(auto r, check.render(primitive, prefix));
  out.kernels = std::move(r.first);
  out.count = r.second;
  return Status::ok();
}

OpRender render_op(const OpCases& oc, const CompileCheck& check, bool first_only = false) {
  OpRender r;
  r.op = oc.op;
  DispatchPolicy common;
  common.default_policy = PathPolicy::force_common;
  int index = 0;
  for (const Variant& v : oc.variants) {
    for (DType dt : candidate_dtypes()) {
      if (first_only && !r.cases.empty()) return r;
      if (!v.only.empty() && std::find(v.only.begin(), v.only.end(), dt) == v.only.end()) continue;
      auto g = build_case_graph(oc, v, dt, /*seed=*/1);
      if (!g) continue;  // type inference does not accept this dtype: not a case
      const std::string label = cat(dtype_name(dt), " ", v.name);
      auto lr = legalize(*g, *check.device, DispatchPolicy{});
      if (!lr || !lr->report.ok()) {
        if (lr && !lr->report.ok()) {
          ++r.illegal;
          for (const NodeDecision& d : lr->report.nodes)
            if (d.path == DispatchPath::illegal) r.illegal_why.insert(without_shapes(leaf_refusal(d)));
        } else if (lr.status().code() == ErrorCode::illegal) {
          ++r.illegal;
          r.illegal_why.insert(without_shapes(lr.status().message().substr(0, 300)));
        } else {
          r.errors.push_back(cat(label, ": legalize: ", lr.status().to_string()));
        }
        continue;
      }
      RenderedCase rc;
      rc.label = label;
      if (Status s = render_case(check, lr->graph, cat("c", index++, "_"), rc); !s.ok()) {
        r.errors.push_back(cat(label, ": ", s.to_string()));
        continue;
      }
      const bool has_native = lr->report.count(DispatchPath::native) > 0;
      r.cases.push_back(std::move(rc));
      // a node a library runs here also has generated code where the library's plan refuses
      // (other shapes, dtypes): render that path too
      if (has_native) {
        auto lc = legalize(*g, *check.device, common);
        if (lc && lc->report.ok()) {
          RenderedCase cc;
          cc.label = label + " (common)";
          if (Status s = render_case(check, lc->graph, cat("c", index++, "_"), cc); !s.ok())
            r.errors.push_back(cat(cc.label, ": ", s.to_string()));
          else
            r.cases.push_back(std::move(cc));
        }
      }
    }
  }
  return r;
}

}  // namespace

CompileCheckResult compile_every_case(const CompileCheck& check) {
  CompileCheckResult res;
  std::vector<const OpCases*> ops;
  for (const OpCases& oc : case_table())
    if (check.ops.empty() || check.ops.count(std::string(op_name(oc.op)))) ops.push_back(&oc);
  res.ops = static_cast<int>(ops.size());

  // render everything first (fast), then compile the units on up to 8 threads
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<OpRender> renders;
  for (const OpCases* oc : ops) renders.push_back(render_op(*oc, check));
  res.render_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const OpRender& r : renders) {
    res.ops_with_cases += !r.cases.empty();
    res.ops_all_illegal += r.cases.empty() && r.illegal > 0;
    res.rendered += static_cast<int>(r.cases.size());
  }
  if (check.sample)
    for (OpRender& r : renders) {
      std::set<std::string> dtypes;
      std::vector<RenderedCase> kept;
      for (RenderedCase& c : r.cases)
        if (dtypes.insert(c.label.substr(0, c.label.find(' '))).second) kept.push_back(std::move(c));
      r.cases = std::move(kept);
    }
  {
    static const std::regex digits("[0-9]+");
    static const std::string marker = "__global__ void c";  // CUDA's and HIP's kernel names: c<case>_<kernel>
    std::set<std::string> seen;
    for (OpRender& r : renders) {
      std::vector<RenderedCase> kept;
      for (RenderedCase& c : r.cases) {
        std::string body = c.kernels;
        for (size_t p = body.find(marker); p != std::string::npos; p = body.find(marker, p + 1)) {
          const size_t e = body.find('_', p + marker.size());
          body.erase(p + marker.size() - 1, e - (p + marker.size() - 1));
        }
        if (!check.full) body = std::regex_replace(body, digits, "N");
        if (seen.insert(body).second) kept.push_back(std::move(c));
        else ++res.duplicates;
      }
      r.cases = std::move(kept);
    }
  }
  std::vector<std::vector<const OpRender*>> units(1);
  int in_unit = 0;
  for (const OpRender& r : renders) {
    if (r.cases.empty()) continue;
    if (in_unit >= check.unit_kernels) {
      units.emplace_back();
      in_unit = 0;
    }
    units.back().push_back(&r);
    for (const RenderedCase& c : r.cases) in_unit += c.count;
  }
  res.units = static_cast<int>(units.size());
  std::mutex mu;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < units.size(); i = next++) {
      std::string all;
      for (const OpRender* r : units[i])
        for (const RenderedCase& c : r->cases) all += c.kernels;
      if (all.empty() || check.compile_error(all).empty()) continue;
      for (const OpRender* r : units[i]) {
        std::string op_all;
        for (const RenderedCase& c : r->cases) op_all += c.kernels;
        if (check.compile_error(op_all).empty()) continue;
        for (const RenderedCase& c : r->cases) {
          std::string e = check.compile_error(c.kernels);
          if (e.empty()) continue;
          std::lock_guard<std::mutex> lock(mu);
          res.failures.push_back(cat(op_name(r->op), " ", c.label, ": ", e));
        }
      }
    }
  };
  const unsigned nthreads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < nthreads; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  res.total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  for (const OpRender& r : renders) {
    res.cases += static_cast<int>(r.cases.size());
    for (const RenderedCase& c : r.cases) res.kernels += c.count;
    res.illegal += r.illegal;
    for (const std::string& w : r.illegal_why) {
      // "add on c64: why" -> why, listing the ops and dtypes it refuses
      static const std::regex prefix(R"(^([a-z_0-9]+) on ([a-z0-9]+): )");
      std::smatch m;
      if (std::regex_search(w, m, prefix)) res.illegal_why[m.suffix().str()].insert(cat(op_name(r.op), "/", m[2].str()));
      else res.illegal_why[w].insert(std::string(op_name(r.op)));
    }
    for (const std::string& e : r.errors) res.errors.push_back(cat(op_name(r.op), " ", e));
  }
  return res;
}

std::string CompileCheckResult::summary(const std::string& device, const std::string& target) const {
  std::string s = cat(target, ": ", ops, " ops in the case table, ", ops_with_cases, " with cases that run on ", device, " (",
                      ops_all_illegal, " illegal in every case), ", rendered, " cases rendered; ", cases, " cases, ", kernels,
                      " kernels compiled in ", units, " units (", duplicates, " cases identical to another skipped), ",
                      failures.size(), " failed; ", illegal, " cases illegal on ", device, "; render ", render_s, " s, total ",
                      total_s, " s\n");
  for (const auto& [why, where] : illegal_why) {
    std::string list;
    for (const std::string& w : where) list += (list.empty() ? "" : " ") + w;
    s += cat("[ illegal  ] ", why, ": ", list, "\n");
  }
  return s;
}

std::string first_case_kernels(Op op, const CompileCheck& check) {
  const OpCases* oc = cases_for(op);
  if (!oc) return "";
  OpRender r = render_op(*oc, check, /*first_only=*/true);
  return r.cases.empty() ? "" : r.cases[0].kernels;
}

}  // namespace rlx::conformance
