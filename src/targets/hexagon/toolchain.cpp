// Building an emitted project with clang's Hexagon target and running it in qemu-hexagon.
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "targets/hexagon/hexagon.h"
#include "targets/shell.h"

namespace rlx::targets::hexagon {
namespace {

// The first clang on PATH whose targets include Hexagon (Debian's clang-15 does), or "".
std::string hexagon_clang() {
  for (const char* cc : {"clang-15", "clang", "clang-16", "clang-14"}) {
    if (!on_path(cc)) continue;
    std::string out;
    if (run_shell(std::string(cc) + " --print-targets", &out) == 0 && out.find("hexagon") != std::string::npos) return cc;
  }
  return "";
}

// The llvm tool `name` beside that clang ("llvm-objdump-15" for clang-15), or "".
std::string llvm_tool(const std::string& cc, const std::string& name) {
  const size_t dash = cc.rfind('-');
  const std::string versioned = dash == std::string::npos ? name : name + cc.substr(dash);
  if (on_path(versioned)) return versioned;
  return on_path(name) ? name : "";
}

}  // namespace

std::string toolchain_missing() {
  std::string missing;
  const std::string cc = hexagon_clang();
  if (cc.empty()) missing = "a clang with the Hexagon target";
  // clang finds ld.lld beside itself (Debian's lld-15 puts it in /usr/lib/llvm-15/bin)
  if (!cc.empty() && llvm_tool(cc, "ld.lld").empty()) missing += (missing.empty() ? "" : ", ") + std::string("ld.lld");
  for (const char* t : {"qemu-hexagon", "make"})
    if (!on_path(t)) missing += (missing.empty() ? "" : ", ") + std::string(t);
  if (missing.empty()) return "";
  return missing + " not found on PATH (scripts/install-deps.sh installs clang-15, lld-15, llvm-15 and qemu-user)";
}

Expected<QemuRun> build_and_run(const std::string& dir, int timeout_s) {
  if (std::string why = toolchain_missing(); !why.empty()) return error(ErrorCode::unavailable, why);
  const std::string cc = hexagon_clang();
  std::string out;
  if (run_shell("make -s -C " + quote(dir) + " CC=" + cc + " model.elf", &out) != 0)
    return error(ErrorCode::runtime_error, "building ", dir, "/model.elf failed:\n", out);
  QemuRun r;
  const std::string elf = dir + "/model.elf";
  if (const std::string objdump = llvm_tool(cc, "llvm-objdump"); !objdump.empty()) {
    out.clear();
    // (the disassembler decodes HVX only when told the core has it)
    if (run_shell(objdump + " -d --mcpu=hexagonv66 --mattr=+hvxv66,+hvx-length128b " + quote(elf), &out) == 0)
      for (size_t at = 0; (at = out.find("vrmpy", at)) != std::string::npos; at += 5) ++r.hvx_packets;
  }
  if (const std::string size = llvm_tool(cc, "llvm-size"); !size.empty()) {
    out.clear();
    if (run_shell(size + " " + quote(elf), &out) == 0) {
      std::istringstream is(out);
      std::string header;
      std::getline(is, header);
      is >> r.text;
    }
  }
  out.clear();
  const int rc = run_shell("timeout " + std::to_string(timeout_s) + " qemu-hexagon " + quote(elf), &out);
  r.output = out;
  if (rc != 0) return error(ErrorCode::runtime_error, "model.elf in qemu-hexagon exited with ", rc, ":\n", out);
  RLX_ASSIGN_OR_RETURN(int8::FirmwareOutput fw, int8::parse_firmware_output(out, "model.elf in qemu-hexagon"));
  r.preds = std::move(fw.preds);
  r.logits = std::move(fw.logits);
  // packets: again, one packet per translation block, each logged with its function's name
  const std::string log = dir + "/qemu_exec.log";
  out.clear();
  if (run_shell("timeout " + std::to_string(timeout_s) + " qemu-hexagon -singlestep -d exec,nochain -D " + quote(log) + " " +
                    quote(elf) + " > /dev/null",
                &out) == 0 &&
      !r.logits.empty()) {
    std::ifstream f(log);
    std::string line;
    int64_t model = 0;
    static const std::set<std::string> kReporting = {"main", "_start", "rlx_write", "rlx_syscall3", "rlx_report_line",
                                                     "rlx_done_line", "put_str", "put_int"};
    while (std::getline(f, line)) {
      if (line.rfind("Trace ", 0) != 0) continue;
      const size_t sp = line.find_last_of(' ');
      if (!kReporting.count(line.substr(sp + 1))) ++model;
    }
    r.packets_per_inference = model / static_cast<int64_t>(r.logits.size());
  }
  std::remove(log.c_str());
  return r;
}

}  // namespace rlx::targets::hexagon
