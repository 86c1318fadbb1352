// Running programs (the rlx program, test workers) under mpirun from the distributed tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace rlx_dist_test {

struct Proc {
  int code;
  std::string out;
};

inline Proc sh(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

inline const std::string kRlx = std::string(RLX_BINARY_DIR) + "/bin/rlx";

// mpirun as these machines need it (root, loopback, more ranks than cores), under a hard limit.
inline std::string mpirun(int ranks, const std::string& args, const std::string& extra = "") {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RLX_NUM_THREADS=1 timeout -k 5 240 mpirun "
         "--oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo " + extra + " -np " +
         std::to_string(ranks) + " " + kRlx + " " + args;
}

inline bool have_mpirun() { return sh("command -v mpirun").code == 0; }

inline std::string temp_dir(const std::string& name) {
  std::string d = std::string(RLX_BINARY_DIR) + "/dist-tests/" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace rlx_dist_test
