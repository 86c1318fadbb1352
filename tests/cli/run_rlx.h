// Runs the built rlx program for the CLI tests: exit code and stdout+stderr together.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace rlx_cli_test {

struct Result {
  int code;
  std::string out;
};

inline Result rlx(const std::string& args) {
  std::string cmd = std::string(RLX_BINARY_DIR) + "/bin/rlx " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

}  // namespace rlx_cli_test
