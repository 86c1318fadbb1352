// Simulating the emitted design with Verilator and synthesizing it with Yosys.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "targets/shell.h"
#include "targets/fpga/fpga.h"

namespace rlx::targets::fpga {
namespace {

// The number after `key` on the first line of `text` that contains it (-1 if none).
int64_t stat_number(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  const size_t eol = text.find('\n', at);
  std::istringstream is(text.substr(at + key.size(), eol == std::string::npos ? std::string::npos : eol - at - key.size()));
  int64_t v = -1;
  is >> v;
  return v;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::string verilator_missing() {
  if (on_path("verilator") && on_path("make")) return "";
  return "verilator (and make) not found on PATH (scripts/install-deps.sh installs verilator)";
}

std::string yosys_missing() {
  if (on_path("yosys")) return "";
  return "yosys not found on PATH (scripts/install-deps.sh installs yosys)";
}

Expected<SimRun> simulate(const std::string& dir, int timeout_s) {
  if (std::string why = verilator_missing(); !why.empty()) return error(ErrorCode::unavailable, why);
  std::string out;
  const std::string t = "timeout " + std::to_string(timeout_s) + " ";
  if (run_shell("cd " + quote(dir) + " && " + t + "make -s obj_dir/Vrlx_fpga_top", &out) != 0)
    return error(ErrorCode::runtime_error, "building ", dir, " with verilator failed:\n", out);
  SimRun r;
  const int st = run_shell("cd " + quote(dir) + " && " + t + "./obj_dir/Vrlx_fpga_top", &r.output);
  if (st != 0) return error(ErrorCode::runtime_error, "the simulation of ", dir, " exited with status ", st, ":\n", r.output);
  std::istringstream is(r.output);
  std::string line;
  bool done = false;
  while (std::getline(is, line)) {
    std::istringstream ls(line);
    std::string w, c, l;
    int idx = 0;
    long long cycles = 0;
    if (line.rfind("done", 0) == 0) done = true;
    if (!(ls >> w >> idx >> c >> cycles >> l) || w != "input" || c != "cycles" || l != "logits") continue;
    std::vector<int8_t> logits;
    int x;
    while (ls >> x) logits.push_back(static_cast<int8_t>(x));
    r.logits.push_back(std::move(logits));
    r.cycles.push_back(cycles);
  }
  if (!done) return error(ErrorCode::runtime_error, "the simulation of ", dir, " did not finish:\n", r.output);
  return r;
}

Expected<SynthStats> synthesize(const std::string& dir, int timeout_s) {
  if (std::string why = yosys_missing(); !why.empty()) return error(ErrorCode::unavailable, why);
  std::string out;
  const std::string script =
      "read_verilog -sv rlx_fpga_top.sv; synth -flatten -noalumacc -top rlx_fpga_top -run begin:fine; tee -q -o stat_coarse.txt stat; "
      "write_json coarse.json; "
      "opt -fast -full; techmap; opt -fast; abc -fast; opt -fast; tee -q -o stat.txt stat";
  if (run_shell("cd " + quote(dir) + " && timeout " + std::to_string(timeout_s) + " yosys -q -p " + quote(script), &out) != 0)
    return error(ErrorCode::runtime_error, "yosys failed on ", dir, "/rlx_fpga_top.sv:\n", out);
  const std::string coarse = read_text(dir + "/stat_coarse.txt");
  SynthStats s;
  s.stat = read_text(dir + "/stat.txt");
  // the top's (flattened) figures: the last "Number of cells" line is the design total
  const size_t top = s.stat.rfind("=== design hierarchy ===");
  const std::string total = top == std::string::npos ? s.stat : s.stat.substr(top);
  s.cells = stat_number(total, "Number of cells:");
  // memories are $mem_v2 cells after memory_collect (stat does not count their bits in this
  // yosys): WIDTH x SIZE from the coarse netlist; multipliers are the word-level $mul cells
  // (synth runs without alumacc, which would merge them into $macc cells)
  nlohmann::json j;
  try {
    std::ifstream jf(dir + "/coarse.json");
    j = nlohmann::json::parse(jf);
  } catch (const std::exception& e) {
    return error(ErrorCode::runtime_error, dir, "/coarse.json from yosys: ", e.what());
  }
  auto param = [](const nlohmann::json& c, const char* name) -> int64_t {
    if (!c.contains("parameters") || !c["parameters"].contains(name)) return 0;
    const auto& v = c["parameters"][name];
    if (v.is_number()) return v.get<int64_t>();
    return static_cast<int64_t>(std::stoull(v.get<std::string>(), nullptr, 2));  // yosys writes binary strings
  };
  s.memory_bits = 0;
  for (const auto& [mname, mod] : j["modules"].items())
    for (const auto& [cname, c] : mod["cells"].items()) {
      const std::string type = c.value("type", "");
      if (type == "$mem_v2" || type == "$mem") {
        ++s.memories;
        s.memory_bits += param(c, "WIDTH") * param(c, "SIZE");
        std::string id = c.contains("parameters") ? c["parameters"].value("MEMID", cname) : cname;
        if (!id.empty() && id[0] == '\\') id.erase(0, 1);
        s.memory_shapes[id] = cat(param(c, "WIDTH"), "x", param(c, "SIZE"));
      } else if (type == "$mul") {
        ++s.multipliers;
        s.multiplier_shapes[cat(param(c, "A_WIDTH"), "x", param(c, "B_WIDTH"))] += 1;
      }
    }
  if (s.cells < 0 || s.memory_bits < 0)
    return error(ErrorCode::runtime_error, "cannot read yosys' stat in ", dir, ":\n", s.stat, coarse);
  return s;
}

}  // namespace rlx::targets::fpga
