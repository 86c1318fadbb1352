// Running programs (the rlx program, test workers) under mpirun from the distributed tests.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// LSAN_OPTIONS for the ranks: in the sanitized build every rank's exit reports Open MPI's own
// allocations (MPI_Init's, its progress thread's, those of the plugins it unloads at
// MPI_Finalize) as leaks. tests/dist/openmpi.supp names Open MPI's libraries; full unwinding
// lets each such stack reach them (Open MPI is built without frame pointers, so the fast
// unwinder stops inside it), and a leak with no Open MPI frame is still reported. The caller's
// LSAN_OPTIONS come first; without the sanitizers the variable is unused.
inline std::string lsan_options_for_ranks() {
  const char* user = std::getenv("LSAN_OPTIONS");
  return "LSAN_OPTIONS='" + std::string(user && *user ? std::string(user) + ":" : "") +
         "suppressions=" RLX_SOURCE_DIR "/tests/dist/openmpi.supp:fast_unwind_on_malloc=0' ";
}

// mpirun as these machines need it (root, loopback, more ranks than cores), under a hard limit.
inline std::string mpirun(int ranks, const std::string& args, const std::string& extra = "") {
  return lsan_options_for_ranks() +
         "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RLX_NUM_THREADS=1 timeout -k 5 240 mpirun "
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

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f, nullptr, false);
}

// Greedy tokens of `model` for two prompts of different lengths, single process and on ranks.
inline void expect_same_tokens(const std::string& model, const std::string& dir, const std::string& flag, int ranks,
                               const std::string& rlx_extra = "", const std::string& mpi_extra = "") {
  const std::string gen = "generate " + model + " --tokens 5,17,300,42,7 --tokens 11,12 -n 12 --ignore-eos --quiet";
  Proc one = sh(kRlx + " " + gen + " --json " + dir + "/one.json");
  ASSERT_EQ(one.code, 0) << one.out;
  Proc par = sh(mpirun(ranks, gen + " " + flag + " " + std::to_string(ranks) + " " + rlx_extra + " --json " + dir +
                                  "/par.json",
                       mpi_extra));
  ASSERT_EQ(par.code, 0) << par.out;
  nlohmann::json a = read_json(dir + "/one.json"), b = read_json(dir + "/par.json");
  ASSERT_TRUE(a.contains("tokens") && b.contains("tokens")) << par.out;
  EXPECT_EQ(a["tokens"], b["tokens"]) << "single process " << a["tokens"].dump() << " vs " << flag << " " << ranks << " "
                                      << b["tokens"].dump();
  EXPECT_EQ(a["tokens"][0].size(), 12u);
}

// Sentence embeddings of three texts with the BERT folder `model`, one process and on `ranks`
// ranks with `flag` (--tp or --pp, plus `extra` options): equal within 1e-5.
inline void expect_same_embeddings(const std::string& model, const std::string& dir, const std::string& flag, int ranks,
                                   const std::string& extra = "") {
  const std::string texts = "\"the quick brown fox\" \"parallel embeddings, split by heads or layers\" \"a\"";
  Proc one = sh(kRlx + " embed " + model + " " + texts + " --quiet --out " + dir + "/one.json");
  ASSERT_EQ(one.code, 0) << one.out;
  Proc par = sh(mpirun(ranks, "embed " + model + " " + texts + " --quiet " + flag + " " + std::to_string(ranks) + " " +
                                  extra + " --out " + dir + "/par.json"));
  ASSERT_EQ(par.code, 0) << par.out;
  nlohmann::json a = read_json(dir + "/one.json"), b = read_json(dir + "/par.json");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), a.size()) << par.out;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (size_t j = 0; j < a[i].size(); ++j) worst = std::max(worst, std::abs(a[i][j].get<double>() - b[i][j].get<double>()));
  }
  EXPECT_LE(worst, 1e-5) << flag << " " << ranks;
}

}  // namespace rlx_dist_test
