// docs/ops.md: the op support matrix the conformance suite generates, and the parser that
// reads it back (to keep the columns of devices that are unavailable on the machine writing
// the file, and to check that the committed file is current).
#include <algorithm>
#include <array>
#include <sstream>

#include "conformance.h"
#include "rlx/device.h"

namespace rlx::conformance {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split_row(const std::string& line) {
  std::vector<std::string> cells;
  std::string t = trim(line);
  if (t.size() < 2 || t.front() != '|' || t.back() != '|') return cells;
  std::string inner = t.substr(1, t.size() - 2);
  std::stringstream ss(inner);
  std::string c;
  while (std::getline(ss, c, '|')) cells.push_back(trim(c));
  return cells;
}

// Cell status of one (op, device, dtype), from the results of its variants.
enum class CellStatus { none, pass, partial, xfail, unsupported, fail };

struct Footnotes {
  std::string device;
  std::vector<std::string> texts;
  std::string ref(const std::string& text) {
    for (size_t i = 0; i < texts.size(); ++i)
      if (texts[i] == text) return cat("[^", device, "-", i + 1, "]");
    texts.push_back(text);
    return cat("[^", device, "-", texts.size(), "]");
  }
};

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '|') c = ' ';
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s;
}

}  // namespace

std::string default_ops_md_path() { return std::string(RLX_SOURCE_DIR) + "/docs/ops.md"; }

OpsMatrix build_matrix(const std::vector<OpRun>& runs, const std::vector<std::string>& devices, const Manifest& m) {
  OpsMatrix mx;
  std::vector<std::string> cols = {"ref"};
  cols.insert(cols.end(), devices.begin(), devices.end());
  std::vector<Footnotes> notes;
  for (const std::string& d : cols) notes.push_back(Footnotes{d, {}});
  for (const std::string& d : cols) mx.columns.push_back(DeviceColumn{d, {}, {}, ""});
  std::vector<std::array<int, 6>> counts(cols.size(), std::array<int, 6>{});
  for (const OpRun& run : runs) {
    const std::string op(op_name(run.op));
    mx.ops.push_back(op);
    mx.family[op] = std::string(op_family_name(op_info(run.op).family));
    for (size_t ci = 0; ci < cols.size(); ++ci) {
      const std::string& dev = cols[ci];
      // group dtype names by status (and by footnote for the marked ones)
      std::vector<std::string> pass, fail;
      std::vector<std::pair<std::string, std::vector<std::string>>> marked;  // "label ref" -> dtypes
      auto mark = [&](const std::string& label, const std::string& note, const std::string& dt) {
        std::string key = cat(label, ":", notes[ci].ref(note));
        for (auto& [k, v] : marked)
          if (k == key) {
            v.push_back(dt);
            return;
          }
        marked.push_back({key, {dt}});
      };
      bool any = false;
      for (DType dt : candidate_dtypes()) {
        CellStatus s = CellStatus::none;
        bool has_pass = false, has_unsup = false, has_xfail = false, has_fail = false, has_noref = false;
        std::string unsup_why, xfail_why;
        for (const CaseResult& r : run.results) {
          if (r.dtype != dt) continue;
          if (r.device != dev) continue;  // (cases without a reference appear in the ref column only)
          switch (r.outcome) {
            case Outcome::pass: has_pass = true; break;
            case Outcome::unsupported:
              has_unsup = true;
              if (unsup_why.empty()) unsup_why = r.detail;
              break;
            case Outcome::no_reference:
              has_noref = true;
              if (unsup_why.empty()) unsup_why = r.detail;
              break;
            case Outcome::expected_fail: {
              has_xfail = true;
              if (const ManifestEntry* e = find_expected_fail(m, dev, run.op, r.variant, dt); e && xfail_why.empty())
                xfail_why = e->reason;
              break;
            }
            case Outcome::fail: has_fail = true; break;
            default: break;
          }
        }
        const std::string dn(dtype_name(dt));
        if (has_fail) {
          s = CellStatus::fail;
          fail.push_back(dn);
        } else if (has_xfail) {
          s = CellStatus::xfail;
          mark("xfail", "expected failure: " + one_line(xfail_why), dn);
        } else if (has_pass && has_unsup) {
          s = CellStatus::partial;
          mark("partial", "some variants unsupported: " + one_line(unsup_why), dn);
        } else if (has_pass) {
          s = CellStatus::pass;
          pass.push_back(dn);
        } else if (has_unsup || has_noref) {
          s = CellStatus::unsupported;
          mark(has_noref ? "no reference" : "unsupported",
               (has_noref ? "no reference: " : "unsupported: ") + one_line(unsup_why), dn);
        }
        if (s != CellStatus::none) {
          any = true;
          ++counts[ci][static_cast<int>(s)];
        }
      }
      std::string cell;
      auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
        return s;
      };
      cell = join(pass);
      if (!fail.empty()) cell += (cell.empty() ? "" : " · ") + std::string("**FAIL**: ") + join(fail);
      // marked groups, in a fixed order of labels
      for (const char* label : {"partial", "xfail", "unsupported", "no reference"}) {
        std::string part;
        for (auto& [key, dts] : marked) {
          size_t colon = key.find(':');
          if (key.substr(0, colon) != label) continue;
          part += (part.empty() ? "" : ", ") + join(dts) + " " + key.substr(colon + 1);
        }
        if (!part.empty()) cell += (cell.empty() ? "" : " · ") + std::string(label) + ": " + part;
      }
      if (!any) cell = "-";
      mx.columns[ci].cells[op] = cell;
      if (dev == "ref") mx.accepted[op] = cell;
    }
  }
  for (size_t ci = 0; ci < cols.size(); ++ci) {
    for (size_t i = 0; i < notes[ci].texts.size(); ++i)
      mx.columns[ci].notes.push_back(cat("[^", cols[ci], "-", i + 1, "]: ", notes[ci].texts[i]));
    const auto& c = counts[ci];
    mx.columns[ci].counts = cat(c[1], " | ", c[2], " | ", c[3], " | ", c[4], " | ", c[5]);
  }
  return mx;
}

std::string render_ops_md(const OpsMatrix& m) {
  std::ostringstream os;
  os << "# Op support matrix\n\n"
     << "Generated by the op conformance suite (`tests/conformance/`); do not edit by hand. To regenerate,\n"
     << "from the repository root:\n\n"
     << "    cmake -S . -B build -G Ninja && ninja -C build rlx_tests_conformance\n"
     << "    RLX_WRITE_OPS_MD=docs/ops.md build/bin/rlx_tests_conformance\n\n"
     << "Columns of devices that are not available on the machine regenerating the file are kept as\n"
     << "committed. `ctest -L conformance` fails (test `OpsMatrix.DocIsCurrent`) when this file no longer\n"
     << "matches the suite's results for the devices available where it runs.\n\n"
     << "Every op is run for every dtype its type inference accepts, on every available device, against\n"
     << "the reference interpreter (`ref`, scalar f64, the ground truth), on fresh random inputs with\n"
     << "per-op tolerances and sentinel bytes around every output. A cell lists the dtypes whose cases\n"
     << "all pass; then, with a footnote giving the reason:\n\n"
     << "- **partial**: the cases that run pass, but the device reports some variants (shapes or\n"
     << "  attributes) of the op illegal;\n"
     << "- **xfail**: a known failure, listed in `tests/conformance/manifest.txt` (a bug to fix);\n"
     << "- **unsupported**: the device reports the op illegal for that dtype (no silent fallback);\n"
     << "- **no reference**: the type rules accept the dtype but `ref` does not implement it, so it is\n"
     << "  not tested anywhere.\n\n"
     << "The `ref` column is what the suite can check: the dtypes the ops table accepts and `ref` runs.\n"
     << "Counts are (op, dtype) cells.\n\n"
     << "Devices without a column cannot run on the machines rlx is tested on: `cuda` and `rocm` (no\n"
     << "NVIDIA or AMD GPU). Their generated code for every case of the suite is compiled instead, by\n"
     << "NVRTC for sm_90 and sm_80 (`tests/cuda/`) and by clang's AMDGPU backend for gfx90a, gfx942 and\n"
     << "gfx1100 (`tests/rocm/`, docs/rocm.md); nothing about their results is claimed here.\n\n";
  os << "## Summary\n\n| device | pass | partial | xfail | unsupported | FAIL |\n|---|---|---|---|---|---|\n";
  for (const DeviceColumn& c : m.columns) os << "| " << c.device << " | " << c.counts << " |\n";
  os << "\n## Matrix\n\n| op | family |";
  for (const DeviceColumn& c : m.columns) os << " " << c.device << " |";
  os << "\n|---|---|";
  for (size_t i = 0; i < m.columns.size(); ++i) os << "---|";
  os << "\n";
  for (const std::string& op : m.ops) {
    auto f = m.family.find(op);
    os << "| " << op << " | " << (f == m.family.end() ? "" : f->second) << " |";
    for (const DeviceColumn& c : m.columns) {
      auto it = c.cells.find(op);
      os << " " << (it == c.cells.end() ? "not run" : it->second) << " |";
    }
    os << "\n";
  }
  os << "\n## Notes\n";
  for (const DeviceColumn& c : m.columns) {
    os << "\n### " << c.device << "\n\n";
    if (c.notes.empty()) os << "No footnotes.\n";
    for (const std::string& n : c.notes) os << n << "\n";
  }
  return os.str();
}

Expected<OpsMatrix> parse_ops_md(const std::string& text) {
  OpsMatrix m;
  std::istringstream in(text);
  std::string line, section, note_device;
  std::vector<std::string> header;
  std::map<std::string, DeviceColumn> cols;
  std::vector<std::string> order;
  auto col = [&](const std::string& d) -> DeviceColumn& {
    if (!cols.count(d)) {
      cols[d].device = d;
      order.push_back(d);
    }
    return cols[d];
  };
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) {
      section = trim(line.substr(3));
      header.clear();
      continue;
    }
    if (section == "Summary") {
      auto cells = split_row(line);
      if (cells.size() < 2 || cells[0] == "device" || cells[0].rfind("---", 0) == 0) continue;
      std::string counts;
      for (size_t i = 1; i < cells.size(); ++i) counts += (i > 1 ? " | " : "") + cells[i];
      col(cells[0]).counts = counts;
    } else if (section == "Matrix") {
      auto cells = split_row(line);
      if (cells.empty()) continue;
      if (header.empty()) {
        if (cells.size() < 2 || cells[0] != "op") return error(ErrorCode::parse_error, "ops.md: matrix header expected");
        header = cells;
        for (size_t i = 2; i < header.size(); ++i) col(header[i]);
        continue;
      }
      if (cells[0].rfind("---", 0) == 0) continue;
      if (cells.size() != header.size())
        return error(ErrorCode::parse_error, "ops.md: row '", cells[0], "' has ", cells.size(), " cells, the header ",
                     header.size());
      m.ops.push_back(cells[0]);
      m.family[cells[0]] = cells[1];
      for (size_t i = 2; i < cells.size(); ++i) col(header[i]).cells[cells[0]] = cells[i];
    } else if (section == "Notes") {
      if (line.rfind("### ", 0) == 0) {
        note_device = trim(line.substr(4));
        col(note_device);
      } else if (!note_device.empty() && line.rfind("[^", 0) == 0) {
        col(note_device).notes.push_back(line);
      }
    }
  }
  // column order: the matrix header's
  for (size_t i = 2; i < header.size(); ++i) m.columns.push_back(cols[header[i]]);
  for (const std::string& d : order)
    if (std::find(header.begin() + std::min<size_t>(2, header.size()), header.end(), d) == header.end())
      m.columns.push_back(cols[d]);
  for (const DeviceColumn& c : m.columns)
    if (c.device == "ref") m.accepted = c.cells;
  return m;
}

OpsMatrix project(const OpsMatrix& m, const std::vector<std::string>& devices) {
  OpsMatrix r = m;
  r.columns.clear();
  for (const DeviceColumn& c : m.columns)
    if (std::find(devices.begin(), devices.end(), c.device) != devices.end()) r.columns.push_back(c);
  return r;
}

OpsMatrix merge_unavailable(const OpsMatrix& fresh, const OpsMatrix& old) {
  OpsMatrix r = fresh;
  for (const DeviceColumn& c : old.columns) {
    bool have = false;
    for (const DeviceColumn& f : fresh.columns) have |= f.device == c.device;
    if (!have) r.columns.push_back(c);
  }
  // columns in one order whichever devices a run covered: ref, then the registry's order
  std::vector<std::string> order = device_names();
  order.insert(order.begin(), "ref");
  auto rank = [&](const DeviceColumn& c) {
    return std::find(order.begin(), order.end(), c.device) - order.begin();
  };
  std::stable_sort(r.columns.begin(), r.columns.end(), [&](const DeviceColumn& a, const DeviceColumn& b) { return rank(a) < rank(b); });
  return r;
}

}  // namespace rlx::conformance
