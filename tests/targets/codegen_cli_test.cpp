// `rlx codegen cortex-m` as a user runs it: a checkpoint in the trainer's layout -> a project
// (checked in QEMU with --run when the toolchain is here), for the MLP and tinyconv.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/run_rlx.h"
#include "rlx/safetensors.h"
#include "targets/cortex_m/cortex_m.h"
#include "targets/hexagon/hexagon.h"
#include "train/data.h"
#include "train/models.h"

namespace {

using rlx_cli_test::Result;
using rlx_cli_test::rlx;

std::string temp(const std::string& name) {
  const std::string d = std::string(RLX_BINARY_DIR) + "/codegen_cli_test";
  std::filesystem::create_directories(d);
  return d + "/" + name;
}

// The model's seeded initial weights saved as `rlx train --save` does (one file per test:
// CTest may run the tests at the same time).
std::string save_model(const std::string& arch, const std::string& test) {
  auto m = rlx::train::mnist_model(arch, 4);
  std::vector<std::pair<std::string, rlx::Tensor>> ts;
  for (const auto& p : m->params) ts.push_back({p.name, p.init});
  const std::string path = temp(test + "_" + arch + ".safetensors");
  EXPECT_TRUE(rlx::safetensors::save(path, ts, {{"arch", arch}}).is_ok());
  return path;
}

TEST(CodegenCli, MlpProjectWithReport) {
  const std::string model = save_model("mlp", "project"), out = temp("mlp_out");
  std::filesystem::remove_all(out);
  const std::string why = rlx::targets::cortex_m::toolchain_missing();
  if (!why.empty()) std::printf("[ info ] not running the project in QEMU: %s\n", why.c_str());
  Result r = rlx("codegen cortex-m " + model + " --out " + out + " --calib 100 --eval 100 --inputs 3" +
                 (why.empty() ? " --run" : ""));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("compile-ready: yes (5 native"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("int8 vs float on 100 test images"), std::string::npos) << r.out;
  for (const char* f : {"model.c", "model.h", "main.c", "startup.c", "link.ld", "link_m0.ld", "Makefile",
                        "rlx_mcu_kernels.h", "test_inputs.h", "report.txt"})
    EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
  std::ifstream rep(out + "/report.txt");
  std::stringstream ss;
  ss << rep.rdbuf();
  EXPECT_NE(ss.str().find("dense_s8 784x128"), std::string::npos) << ss.str();
  if (why.empty()) {
    EXPECT_NE(ss.str().find("m3 (mps2-an385): flash"), std::string::npos) << ss.str();
    EXPECT_NE(ss.str().find("m0 (microbit): flash"), std::string::npos) << ss.str();
    EXPECT_NE(ss.str().find("bit-identical to the host reference on 3 of 3 inputs"), std::string::npos) << ss.str();
  }
}

// rlx codegen hexagon for the three MNIST architectures: each project builds with clang's Hexagon
// target with its dot products on HVX (vrmpy in the binary), runs in qemu-hexagon, and prints
// logits bit-identical to the host int8 reference.
TEST(CodegenCli, HexagonProjectsRunBitExactInQemu) {
  const std::string why = rlx::targets::hexagon::toolchain_missing();
  if (!why.empty()) {
    if (std::getenv("CI")) FAIL() << "CI installs the Hexagon toolchain (scripts/install-deps.sh), but: " << why;
    GTEST_SKIP() << why;
  }
  for (const char* arch : {"mlp", "tinyconv", "dsconv"}) {
    const std::string model = save_model(arch, "hexagon"), out = temp(std::string("hexagon_") + arch);
    std::filesystem::remove_all(out);
    Result r = rlx("codegen hexagon " + model + " --out " + out + " --calib 50 --eval 50 --inputs 3 --run");
    ASSERT_EQ(r.code, 0) << arch << ": " << r.out;
    EXPECT_NE(r.out.find("bit-identical to the host reference on 3 of 3 inputs"), std::string::npos) << arch << ": " << r.out;
    EXPECT_NE(r.out.find("HVX vrmpy instructions in the binary"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(" 0 HVX vrmpy"), std::string::npos) << arch << ": the dot products are not on HVX\n" << r.out;
    for (const char* f : {"model.c", "model.h", "main.c", "Makefile", "rlx_mcu_kernels.h", "test_inputs.h", "report.txt"})
      EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << arch << ": " << f;
  }
  Result bad = rlx("codegen hexagon " + save_model("mlp", "hexagon_lanes") + " --out " + temp("hexagon_lanes") + " --lanes 4");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--lanes is an option of the fpga target"), std::string::npos) << bad.out;
}

// --data DIR reads MNIST IDX files (here the synthetic set written in that format).
TEST(CodegenCli, CalibratesFromIdxFiles) {
  const std::string model = save_model("mlp", "idx"), data = temp("idx"), out = temp("idx_out");
  ASSERT_TRUE(rlx::train::write_mnist(data, rlx::train::synthetic_mnist(300, 40, 9)).is_ok());
  Result r = rlx("codegen cortex-m " + model + " --out " + out + " --data " + data + " --calib 300 --eval 40 --inputs 5");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("data: " + data + "; calibration on 300 training images"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("int8 vs float on 40 test images"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("main.c with 5 embedded inputs"), std::string::npos) << r.out;
  r = rlx("codegen cortex-m " + model + " --out " + out + " --data " + temp("no_such_dir"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no_such_dir"), std::string::npos) << r.out;
}

TEST(CodegenCli, TinyconvProject) {
  const std::string model = save_model("tinyconv", "project"), out = temp("tc_out");
  std::filesystem::remove_all(out);
  const bool run = rlx::targets::cortex_m::toolchain_missing().empty();
  Result r = rlx("codegen cortex-m " + model + " --out " + out + " --calib 50 --eval 50 --inputs 2" + (run ? " --run" : ""));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("compile-ready: yes (9 native"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.c (5 layers"), std::string::npos) << r.out;
  if (run) {
    EXPECT_NE(r.out.find("bit-identical to the host reference on 2 of 2 inputs"), std::string::npos) << r.out;
  }
}

// `rlx train --qat int8 --save` writes the sites' scales into the checkpoint, and `rlx codegen`
// quantizes with them instead of calibrating (and says so); --ptq calibrates anyway.
TEST(CodegenCli, QatCheckpointBringsItsScales) {
  const std::string ckpt = temp("qat_mlp.safetensors"), out = temp("qat_out");
  std::filesystem::remove_all(out);
  Result r = rlx("train mnist --arch mlp --synthetic --train-size 256 --test-size 64 --epochs 1 --batch 64 --quiet "
                 "--qat int8 --save " + ckpt);
  ASSERT_EQ(r.code, 0) << r.out;
  auto f = rlx::safetensors::load(ckpt);
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  EXPECT_EQ(f->metadata["qat"], "int8");
  for (const char* site : {"fc1.input", "fc2.input", "output"})
    for (const char* what : {"scale", "zero_point", "min", "max"})
      EXPECT_TRUE(f->tensors.count(std::string("qat.") + site + "." + what)) << site << " " << what;
  r = rlx("codegen cortex-m " + ckpt + " --out " + out + " --eval 50 --inputs 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("activation scales from quantization-aware training (3 sites in the checkpoint), no calibration"),
            std::string::npos) << r.out;
  {
    std::ifstream rep(out + "/report.txt");
    std::stringstream ss;
    ss << rep.rdbuf();
    EXPECT_NE(ss.str().find("policy: int8 (full-integer, activation scales from quantization-aware training)"),
              std::string::npos) << ss.str();
    EXPECT_NE(ss.str().find("quantization (full-integer int8, activation scales from quantization-aware training)"),
              std::string::npos) << ss.str();
  }
  r = rlx("codegen fpga " + ckpt + " --out " + out + "_ptq --eval 0 --inputs 2 --ptq --calib 100");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("calibration on 100 training images (--ptq: the checkpoint's QAT scales are not used)"),
            std::string::npos) << r.out;
  // a checkpoint whose QAT tensors are broken is an error naming the tensor
  std::vector<std::pair<std::string, rlx::Tensor>> ts;
  for (auto& [name, t] : f->tensors)
    if (name != "qat.fc2.input.zero_point") ts.push_back({name, t.clone()});
  const std::string broken = temp("qat_broken.safetensors");
  ASSERT_TRUE(rlx::safetensors::save(broken, ts, {{"arch", "mlp"}}).is_ok());
  r = rlx("codegen cortex-m " + broken + " --out " + out + "_broken");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("qat.fc2.input.zero_point"), std::string::npos) << r.out;
  r = rlx("train mnist --synthetic --epochs 0 --qat int4");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--qat supports int8"), std::string::npos) << r.out;
}

TEST(CodegenCli, BadUsage) {
  EXPECT_EQ(rlx("codegen cortex-m").code, 2);
  Result r = rlx("codegen nosuch x --out y");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown target 'nosuch'"), std::string::npos) << r.out;
  r = rlx("codegen cortex-m " + temp("missing.safetensors") + " --out " + temp("m"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("missing.safetensors"), std::string::npos) << r.out;
}

}  // namespace
