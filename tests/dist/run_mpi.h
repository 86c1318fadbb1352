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

// The near-tie bound for models with block-quantized (q8_0) weights: their products quantize
// the activations to int8 per block of 32 (kernels/qgemm.h), so a sum-order difference that
// moves a value across a quantization boundary moves it by a whole quant step, and the logits
// by up to about 1e-2 (seen: 7.1e-3 on a random-weight Llama, --tp 2). A sharding bug moves
// them by far more (wrong tokens from the first step).
constexpr double kQ8Tie = 3e-2;

// Greedy tokens of two runs of `generate --json` (a: one process, b: on ranks, `label` says how):
// equal, except that past a near tie they may part. Sharding changes the order in which the
// all_reduce sums the partial products, so on random-weight models (whose logits sit close
// together) two candidates within `tie` of each other may swap; where the sequences part, each
// run's own logits (--json's top_logits) must put the other's token within `tie` of its choice.
inline void expect_same_tokens_up_to_near_ties(const nlohmann::json& a, const nlohmann::json& b, const std::string& label,
                                               double tie = 1e-3) {
  ASSERT_TRUE(a.contains("tokens") && b.contains("tokens") && a.contains("top_logits") && b.contains("top_logits"));
  ASSERT_EQ(a["tokens"].size(), b["tokens"].size());
  const std::string both = "single process " + a["tokens"].dump() + " vs " + label + " " + b["tokens"].dump();
  // how far below its own choice a run's logits put `token` at `step` (infinite: not in its top few)
  auto gap = [](const nlohmann::json& top, int64_t token) {
    for (const auto& p : top)
      if (p[0].get<int64_t>() == token) return top[0][1].get<double>() - p[1].get<double>();
    return HUGE_VAL;
  };
  for (size_t s = 0; s < a["tokens"].size(); ++s) {
    const auto &x = a["tokens"][s], &y = b["tokens"][s];
    EXPECT_EQ(x.size(), 12u);
    ASSERT_EQ(x.size(), y.size()) << both;
    size_t same = 0;
    while (same < x.size() && x[same] == y[same]) ++same;
    if (same == x.size()) continue;
    const int64_t tx = x[same].get<int64_t>(), ty = y[same].get<int64_t>();
    const double ga = gap(a["top_logits"][s][same], ty), gb = gap(b["top_logits"][s][same], tx);
    std::printf("sequence %zu parts at step %zu (%lld vs %lld) at logit gaps %.3g and %.3g (a near tie is at most %.3g)\n",
                s, same, static_cast<long long>(tx), static_cast<long long>(ty), ga, gb, tie);
    EXPECT_LE(ga, tie) << "step " << same << " of sequence " << s << " is no near tie: " << both;
    EXPECT_LE(gb, tie) << "step " << same << " of sequence " << s << " is no near tie: " << both;
  }
}

// Greedy tokens of `model` for two prompts of different lengths, single process and on `ranks`
// ranks with `flag` (--tp or --pp, plus `rlx_extra` options): the same up to near ties.
// `tie`: see expect_same_tokens_up_to_near_ties (kQ8Tie for block-quantized weights).
inline void expect_same_tokens(const std::string& model, const std::string& dir, const std::string& flag, int ranks,
                               const std::string& rlx_extra = "", const std::string& mpi_extra = "", double tie = 1e-3) {
  const std::string gen = "generate " + model + " --tokens 5,17,300,42,7 --tokens 11,12 -n 12 --ignore-eos --quiet";
  Proc one = sh(kRlx + " " + gen + " --json " + dir + "/one.json");
  ASSERT_EQ(one.code, 0) << one.out;
  Proc par = sh(mpirun(ranks, gen + " " + flag + " " + std::to_string(ranks) + " " + rlx_extra + " --json " + dir +
                                  "/par.json",
                       mpi_extra));
  ASSERT_EQ(par.code, 0) << par.out;
  nlohmann::json a = read_json(dir + "/one.json"), b = read_json(dir + "/par.json");
  ASSERT_TRUE(a.contains("tokens") && b.contains("tokens")) << par.out;
  EXPECT_EQ(a["tokens"].size(), 2u);
  expect_same_tokens_up_to_near_ties(a, b, flag + " " + std::to_string(ranks) + " " + rlx_extra, tie);
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
