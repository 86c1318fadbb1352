// `rlx splat fit` and `rlx splat render` as a user runs them: the fit writes its PNGs and the
// fitted scene and reports a falling loss; render reads that scene back and writes a PNG of the
// requested size; bad arguments and files are errors with exit status 2 that name the culprit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "cli/run_rlx.h"

namespace {

using rlx_cli_test::rlx;

std::string temp(const std::string& name) {
  const std::string d = std::string(RLX_BINARY_DIR) + "/splat_cli_test";
  std::filesystem::create_directories(d);
  return d + "/" + name;
}

// width and height from a PNG's IHDR
std::pair<int, int> png_size(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  unsigned char b[24] = {};
  f.read(reinterpret_cast<char*>(b), 24);
  auto be = [&](int o) { return (b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]; };
  return {be(16), be(20)};
}

TEST(SplatCli, FitThenRender) {
  const std::string dir = temp("fit");
  std::filesystem::remove_all(dir);
  auto r = rlx("splat fit --out " + dir + " --steps 120 --size 32 --gaussians 24 --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(loss ([0-9.e+-]+) -> ([0-9.e+-]+))"))) << r.out;
  EXPECT_LT(std::stod(m[2]), std::stod(m[1]) / 10) << r.out;
  for (const char* f : {"target.png", "initial.png", "final.png", "fit.ply"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  EXPECT_EQ(png_size(dir + "/final.png"), std::make_pair(32, 32));
  const std::string png = temp("render.png");
  r = rlx("splat render " + dir + "/fit.ply --camera 0.5,0.2,-3,0,0,0,40 --width 40 --height 30 --out " + png +
          " --background 0.1,0.1,0.2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("24 Gaussians"), std::string::npos) << r.out;
  EXPECT_EQ(png_size(png), std::make_pair(40, 30));
}

TEST(SplatCli, ErrorsNameTheCulprit) {
  auto r = rlx("splat render " + temp("missing.ply") + " --camera 0,0,-3,0,0,0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("missing.ply"), std::string::npos) << r.out;
  const std::string bad = temp("bad.ply");
  std::ofstream(bad) << "ply\nformat ascii 1.0\nelement vertex 1\nend_header\n";
  r = rlx("splat render " + bad + " --camera 0,0,-3,0,0,0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("only binary_little_endian"), std::string::npos) << r.out;
  r = rlx("splat render " + bad + " --camera 0,0,-3,0,0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("camera spec"), std::string::npos) << r.out;
  r = rlx("splat fit");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--out"), std::string::npos) << r.out;
  r = rlx("splat paint");
  EXPECT_EQ(r.code, 2);
}

}  // namespace
