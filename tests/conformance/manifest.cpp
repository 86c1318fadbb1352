// The manifest of known gaps (tests/conformance/manifest.txt), one entry a line:
//
//   device  op[/variant]  dtype[,dtype...]  status  reason...
//
// status is expected-fail (the device runs the case and gets it wrong: a bug with a reason)
// or unsupported (the device reports the case illegal, and that is a known, documented gap).
// dtype is a dtype name or a comma-separated list of them (one entry per dtype); unsupported
// entries may use * for every dtype, and op * for every op. '#' starts a comment.
//
// The suite holds the manifest to the results both ways: a failing case not covered by an
// expected-fail entry fails the op's test, and so does an entry that no longer matches what
// happens (an expected failure that now passes, an "unsupported" case the device now runs, an
// entry that matches no case at all).
#include <fstream>
#include <sstream>

#include "conformance.h"

namespace rlx::conformance {

Expected<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return error(ErrorCode::io_error, "cannot read ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string default_manifest_path() {
  if (const char* e = std::getenv("RLX_CONFORMANCE_MANIFEST")) return e;
  return std::string(RLX_SOURCE_DIR) + "/tests/conformance/manifest.txt";
}

Expected<Manifest> load_manifest(const std::string& path) {
  Manifest m;
  m.path = path;
  RLX_ASSIGN_OR_RETURN(std::string text, read_text(path));
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ls(line);
    ManifestEntry e;
    std::string op, status;
    if (!(ls >> e.device)) continue;  // blank or comment
    if (!(ls >> op >> e.dtype >> status))
      return error(ErrorCode::parse_error, path, ":", n, ": expected 'device op[/variant] dtype status reason'");
    std::getline(ls, e.reason);
    e.reason.erase(0, e.reason.find_first_not_of(" \t"));
    if (e.reason.empty()) return error(ErrorCode::parse_error, path, ":", n, ": every entry needs a reason");
    if (auto s = op.find('/'); s != std::string::npos) {
      e.variant = op.substr(s + 1);
      op.resize(s);
    }
    auto o = op_from_name(op);
    if (!o && op != "*") return error(ErrorCode::parse_error, path, ":", n, ": unknown op '", op, "'");
    e.op = op;
    if (status == "expected-fail") {
      e.status = ManifestStatus::expected_fail;
    } else if (status == "unsupported") {
      e.status = ManifestStatus::unsupported;
    } else {
      return error(ErrorCode::parse_error, path, ":", n, ": status must be expected-fail or unsupported, got '", status, "'");
    }
    if (op == "*" && (status != "unsupported" || !e.variant.empty()))
      return error(ErrorCode::parse_error, path, ":", n, ": op * is for unsupported entries (without a variant)");
    if (!e.variant.empty()) {
      const OpCases* oc = cases_for(*o);
      bool found = false;
      for (const Variant& v : oc ? oc->variants : std::vector<Variant>{}) found |= v.name == e.variant;
      if (!found) return error(ErrorCode::parse_error, path, ":", n, ": op ", op, " has no variant '", e.variant, "'");
    }
    e.line = n;
    // a comma-separated dtype list is one entry per dtype
    std::vector<std::string> dtypes;
    std::stringstream ds(e.dtype);
    for (std::string d; std::getline(ds, d, ',');) dtypes.push_back(d);
    for (const std::string& d : dtypes) {
      if (d == "*") {
        if (e.status != ManifestStatus::unsupported)
          return error(ErrorCode::parse_error, path, ":", n, ": expected-fail entries name their dtypes (not *)");
      } else if (!parse_dtype(d)) {
        return error(ErrorCode::parse_error, path, ":", n, ": unknown dtype '", d, "'");
      }
      ManifestEntry one = e;
      one.dtype = d;
      m.entries.push_back(std::move(one));
    }
  }
  return m;
}

namespace {

bool matches(const ManifestEntry& e, const std::string& device, Op op, const std::string& variant, DType dt) {
  return e.device == device && (e.op == "*" || e.op == op_name(op)) && (e.variant.empty() || e.variant == variant) &&
         (e.dtype == "*" || e.dtype == dtype_name(dt));
}

std::string entry_text(const Manifest& m, const ManifestEntry& e) {
  return cat(m.path, ":", e.line, " '", e.device, " ", e.op, e.variant.empty() ? "" : "/" + e.variant, " ", e.dtype, " ",
             e.status == ManifestStatus::expected_fail ? "expected-fail" : "unsupported", "'");
}

}  // namespace

const ManifestEntry* find_expected_fail(const Manifest& m, const std::string& device, Op op, const std::string& variant,
                                        DType dt) {
  for (const ManifestEntry& e : m.entries)
    if (e.status == ManifestStatus::expected_fail && matches(e, device, op, variant, dt)) return &e;
  return nullptr;
}

std::vector<std::string> check_against_manifest(OpRun& run, const Manifest& m, const std::vector<std::string>& devices_run) {
  std::vector<std::string> problems;
  for (CaseResult& r : run.results) {
    if (r.outcome != Outcome::fail) continue;
    if (find_expected_fail(m, r.device, run.op, r.variant, r.dtype)) {
      r.outcome = Outcome::expected_fail;
    } else {
      problems.push_back(r.detail);
    }
  }
  for (const ManifestEntry& e : m.entries) {
    if (e.op != "*" && e.op != op_name(run.op)) continue;
    if (std::find(devices_run.begin(), devices_run.end(), e.device) == devices_run.end()) continue;
    int matched = 0, failing = 0, passing = 0, unsupported = 0;
    std::string example;
    for (const CaseResult& r : run.results) {
      if (!matches(e, r.device, run.op, r.variant, r.dtype)) continue;
      // an expected-fail entry is more specific than an unsupported one
      if (e.status == ManifestStatus::unsupported && find_expected_fail(m, r.device, run.op, r.variant, r.dtype)) continue;
      ++matched;
      if (r.outcome == Outcome::expected_fail || r.outcome == Outcome::fail) ++failing;
      if (r.outcome == Outcome::pass) {
        ++passing;
        if (example.empty()) example = cat(dtype_name(r.dtype), " ", r.variant);
      }
      if (r.outcome == Outcome::unsupported) ++unsupported;
    }
    if (matched == 0 && e.op == "*") {
      continue;  // a wildcard entry need not match every op
    } else if (matched == 0) {
      problems.push_back(cat(entry_text(m, e), " matches no case of the suite (the op does not accept the dtype, or the "
                             "variant is gone): remove it from the manifest"));
    } else if (e.status == ManifestStatus::expected_fail && failing == 0) {
      problems.push_back(cat("unexpected pass: ", entry_text(m, e), " (", e.reason, ") but every matching case ",
                             unsupported == matched ? "is unsupported" : "passes now", ": remove it from the manifest"));
    } else if (e.status == ManifestStatus::unsupported && unsupported != matched) {
      problems.push_back(cat(passing ? "unexpected pass: " : "", entry_text(m, e), " (", e.reason, ") but ",
                             matched - unsupported, " of ", matched, " matching cases run on the device",
                             example.empty() ? "" : cat(" (e.g. ", example, " passes)"),
                             ": remove it from the manifest or narrow it"));
    }
  }
  return problems;
}

}  // namespace rlx::conformance
