// Running the external tools of the ahead-of-time targets (cross compilers, QEMU, Verilator,
// Yosys) from rlx: shared by src/targets/cortex_m and src/targets/fpga.
#pragma once

#include <string>

namespace rlx::targets {

// Whether `tool` is on PATH.
bool on_path(const std::string& tool);
// Runs a shell command; returns its exit status (-1 if it did not exit normally) and appends
// everything it printed (stdout and stderr) to *out.
int run_shell(const std::string& cmd, std::string* out);
// `s` quoted for a POSIX shell.
std::string quote(const std::string& s);

}  // namespace rlx::targets
