// The rlx program as a user runs it: verbs, exit codes (0 ok, 1 failed, 2 bad input) and
// error messages that name what is wrong. Runs build/bin/rlx in a shell.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "cli/run_rlx.h"

namespace {

using rlx_cli_test::Result;
using rlx_cli_test::rlx;

std::string write_temp(const std::string& name, const std::string& text) {
  std::string path = std::string(RLX_BINARY_DIR) + "/cli_test_" + name;
  std::ofstream(path) << text;
  return path;
}

const std::string kExample = std::string(RLX_SOURCE_DIR) + "/examples/three_paths.rlx";

TEST(Cli, HelpAndDevices) {
  Result h = rlx("help");
  EXPECT_EQ(h.code, 0);
  for (const char* verb : {"devices", "info", "explain", "run", "bench"}) EXPECT_NE(h.out.find(verb), std::string::npos);
  Result d = rlx("devices");
  EXPECT_EQ(d.code, 0);
  EXPECT_NE(d.out.find("cpu"), std::string::npos);
  EXPECT_NE(d.out.find("available"), std::string::npos);
  EXPECT_EQ(rlx("frobnicate").code, 2);
}

// The directx device's D3D12 runtime is compiled (CI installs directx-headers-dev) and, asked
// for on a machine without D3D12, says why it is unavailable instead of failing; where D3D12
// and DXC are present (WSL2) it opens them.
TEST(Cli, DirectxD3d12RuntimeIsBuiltAndSaysWhyItIsUnavailable) {
  setenv("RLX_DIRECTX_RUNTIME", "d3d12", 1);
  Result d = rlx("devices");
  unsetenv("RLX_DIRECTX_RUNTIME");
  EXPECT_EQ(d.code, 0) << d.out;
  const size_t at = d.out.find("\ndirectx");
  ASSERT_NE(at, std::string::npos) << d.out;
  const std::string line = d.out.substr(at + 1, d.out.find('\n', at + 1) - at - 1);
  if (line.find("built without the D3D12 headers") != std::string::npos) {
    if (std::getenv("CI")) FAIL() << "CI installs directx-headers-dev, but: " << line;
    GTEST_SKIP() << line;
  }
  const bool here = line.find("D3D12 device") != std::string::npos;
  const bool why = line.find("unavailable") != std::string::npos &&
                   (line.find("libd3d12.so") != std::string::npos || line.find("libdxcompiler.so") != std::string::npos ||
                    line.find("D3D12CreateDevice") != std::string::npos);
  EXPECT_TRUE(here || why) << line;
}

TEST(Cli, RunPrintsDispatchOutputsAndTime) {
  Result r = rlx("run " + kExample + " --dims batch=2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("compile-ready: yes (1 native, 1 common-ir, 1 rewritten, 0 illegal)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output"), std::string::npos);
  EXPECT_NE(r.out.find("time:"), std::string::npos);
}

TEST(Cli, ExplainExitsOneOnIllegalAndNamesNodes) {
  Result ok = rlx("explain " + kExample);
  EXPECT_EQ(ok.code, 0) << ok.out;
  Result bad = rlx("explain " + kExample + " --device null");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("/proj/MatMul"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("hint:"), std::string::npos) << bad.out;
  std::string json = std::string(RLX_BINARY_DIR) + "/cli_test_report.json";
  Result j = rlx("explain " + kExample + " --json " + json);
  EXPECT_EQ(j.code, 0);
  std::ifstream f(json);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"compile_ready\": true"), std::string::npos) << text;
}

TEST(Cli, BadInputGetsExitTwoAndALocation) {
  std::string bad = write_temp("bad.rlx", "graph @g(%x: f32[4]) -> (f32[4]) {\n  %y = frobnicate(%x)\n  return %y\n}\n");
  Result r = rlx("run " + bad);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(":2:"), std::string::npos) << r.out;  // the line of the unknown op
  EXPECT_NE(r.out.find("frobnicate"), std::string::npos) << r.out;
  std::string mismatch = write_temp("mismatch.rlx",
                                    "graph @g(%x: f32[4], %y: f32[5]) -> (f32[4]) {\n  %z = add(%x, %y)\n  return %z\n}\n");
  Result m = rlx("explain " + mismatch);
  EXPECT_EQ(m.code, 2) << m.out;
  EXPECT_NE(m.out.find("broadcast"), std::string::npos) << m.out;
  EXPECT_EQ(rlx("run /nonexistent/model.rlx").code, 2);
  EXPECT_EQ(rlx("run " + kExample + " --device warp9").code, 2);
  EXPECT_EQ(rlx("run " + kExample + " --policy sideways").code, 2);
  EXPECT_EQ(rlx("bench " + kExample + " --batch 0").code, 2);
  EXPECT_EQ(rlx("run " + kExample + " --input nothere=x.npy").code, 2);
}

TEST(Cli, BenchJsonHasOneRecordPerConfiguration) {
  Result r = rlx("bench " + kExample + " --batch 1,4 --seq 8 --runs 3 --warmup 1 --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* key : {"\"device\"", "\"batch\"", "\"seq\"", "\"p50_ms\"", "\"p90_ms\"", "\"runs\""})
    EXPECT_NE(r.out.find(key), std::string::npos) << key;
  size_t n = 0, pos = 0;
  while ((pos = r.out.find("\"p50_ms\"", pos)) != std::string::npos) ++n, ++pos;
  EXPECT_EQ(n, 2u);
}

}  // namespace
