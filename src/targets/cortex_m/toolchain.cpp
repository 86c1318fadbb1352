// Building an emitted project with arm-none-eabi-gcc and running it in qemu-system-arm.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "targets/shell.h"
#include "targets/cortex_m/cortex_m.h"

namespace rlx::targets::cortex_m {

std::string toolchain_missing() {
  std::string missing;
  for (const char* t : {"arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm", "make"})
    if (!on_path(t)) missing += (missing.empty() ? "" : ", ") + std::string(t);
  if (missing.empty()) return "";
  return missing + " not found on PATH (scripts/install-deps.sh installs gcc-arm-none-eabi, libnewlib-arm-none-eabi "
         "and qemu-system-arm)";
}

Expected<QemuRun> build_and_run(const std::string& dir, const std::string& cpu, int timeout_s) {
  QemuRun r;
  r.cpu = cpu;
  double ns_per_tick = 40.0;  // SysTick at the board's processor clock; QEMU runs 1 instruction per ns
  if (cpu == "m3") {
    r.machine = "mps2-an385";  // 25 MHz
  } else if (cpu == "m4") {
    r.machine = "mps2-an386";
  } else if (cpu == "m0") {
    r.machine = "microbit";    // nRF51, 16 MHz
    ns_per_tick = 62.5;
  } else {
    return error(ErrorCode::invalid_argument, "unknown Cortex-M cpu '", cpu, "' (expected m0, m3 or m4)");
  }
  if (std::string why = toolchain_missing(); !why.empty()) return error(ErrorCode::unavailable, why);
  const std::string elf = cpu + ".elf";
  std::string out;
  if (run_shell("make -s -C " + quote(dir) + " " + elf, &out) != 0)
    return error(ErrorCode::runtime_error, "building ", dir, "/", elf, " failed:\n", out);
  out.clear();
  if (run_shell("arm-none-eabi-size " + quote(dir + "/" + elf), &out) != 0)
    return error(ErrorCode::runtime_error, "arm-none-eabi-size failed:\n", out);
  {
    std::istringstream is(out);
    std::string header;
    std::getline(is, header);
    if (!(is >> r.text >> r.data >> r.bss)) return error(ErrorCode::runtime_error, "cannot read arm-none-eabi-size output:\n", out);
  }
  out.clear();
  const std::string cmd = "timeout " + std::to_string(timeout_s) + " qemu-system-arm -M " + r.machine +
                          " -nographic -monitor none -serial none -semihosting-config enable=on,target=native -icount shift=0 -kernel " +
                          quote(dir + "/" + elf);
  const int rc = run_shell(cmd, &out);
  r.output = out;
  if (rc != 0) return error(ErrorCode::runtime_error, elf, " in qemu-system-arm ", r.machine, " exited with ", rc, ":\n", out);
  std::istringstream is(out);
  std::string line;
  bool done = false;
  while (std::getline(is, line)) {
    std::istringstream ls(line);
    std::string w;
    ls >> w;
    if (w == "done") done = true;
    if (w != "input") continue;
    int64_t idx = 0, label = 0, pred = 0, ticks = 0;
    std::string a, b, t, c;
    if (!(ls >> idx >> a >> label >> b >> pred >> t >> ticks >> c) || a != "label" || b != "pred" || t != "ticks" ||
        c != "logits" ||
        idx != static_cast<int64_t>(r.preds.size()))
      return error(ErrorCode::runtime_error, "unexpected firmware output line: ", line);
    std::vector<int8_t> logits;
    int v;
    while (ls >> v) logits.push_back(static_cast<int8_t>(v));
    r.preds.push_back(static_cast<int32_t>(pred));
    r.instructions.push_back(std::llround(static_cast<double>(ticks) * ns_per_tick));
    r.logits.push_back(std::move(logits));
  }
  if (!done) return error(ErrorCode::runtime_error, elf, " did not finish (no 'done' line):\n", out);
  return r;
}

}  // namespace rlx::targets::cortex_m
