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
  RLX_ASSIGN_OR_RETURN(int8::FirmwareOutput fw, int8::parse_firmware_output(out, elf + " in qemu-system-arm"));
  r.preds = std::move(fw.preds);
  r.logits = std::move(fw.logits);
  for (int64_t t : fw.ticks) r.instructions.push_back(std::llround(static_cast<double>(t) * ns_per_tick));
  return r;
}

}  // namespace rlx::targets::cortex_m
