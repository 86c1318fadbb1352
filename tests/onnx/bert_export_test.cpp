// A tiny random BERT exported to ONNX by PyTorch (scripts/peers/bert_torch.py export-onnx,
// torch.onnx.export with dynamic batch and sequence axes) runs through rlx's ONNX importer on
// the CPU and matches PyTorch's own output. This is the path `rlx run MODEL.onnx` takes: shape
// subgraphs (Shape, Gather, Unsqueeze, Concat, Range) fold, or stay symbolic without inputs.
// Also a small module whose outputs' sizes depend on the data (x[mask], nonzero, topk).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "rlx/compile.h"
#include "rlx/npy.h"
#include "rlx/onnx.h"
#include "rlx/safetensors.h"

namespace rlx {
namespace {

bool have_torch() {
  static const bool ok = std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0;
  return ok;
}

struct TinyBert {
  std::string dir;
  TinyBert() {
    char tmpl[] = "/tmp/rlx_onnx_bert_XXXXXX";
    dir = mkdtemp(tmpl);
  }
  ~TinyBert() { std::filesystem::remove_all(dir); }
};

// Writes config.json and model.safetensors of a BERT with hidden 32, 2 layers, 4 heads.
void write_tiny_bert(const std::string& dir) {
  const int64_t V = 50, H = 32, I = 64, P = 40, L = 2;
  std::ofstream(dir + "/config.json") << R"({"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2,
    "intermediate_size": 64, "vocab_size": 50, "max_position_embeddings": 40, "type_vocab_size": 2,
    "layer_norm_eps": 1e-12, "model_type": "bert", "hidden_act": "gelu"})";
  std::mt19937 rng(7);
  std::normal_distribution<double> nd(0.0, 0.2);
  std::vector<std::pair<std::string, Tensor>> ts;
  auto add = [&](const std::string& name, Sizes s, double base = 0.0) {
    std::vector<double> v(static_cast<size_t>(numel(s)));
    for (double& x : v) x = base + nd(rng);
    ts.push_back({name, Tensor::from_f64(DType::f32, s, v)});
  };
  add("embeddings.word_embeddings.weight", {V, H});
  add("embeddings.position_embeddings.weight", {P, H});
  add("embeddings.token_type_embeddings.weight", {2, H});
  add("embeddings.LayerNorm.weight", {H}, 1.0);
  add("embeddings.LayerNorm.bias", {H});
  for (int64_t l = 0; l < L; ++l) {
    std::string p = "encoder.layer." + std::to_string(l) + ".";
    for (const char* n : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      add(p + n + ".weight", {H, H});
      add(p + n + ".bias", {H});
    }
    add(p + "attention.output.LayerNorm.weight", {H}, 1.0);
    add(p + "attention.output.LayerNorm.bias", {H});
    add(p + "intermediate.dense.weight", {I, H});
    add(p + "intermediate.dense.bias", {I});
    add(p + "output.dense.weight", {H, I});
    add(p + "output.dense.bias", {H});
    add(p + "output.LayerNorm.weight", {H}, 1.0);
    add(p + "output.LayerNorm.bias", {H});
  }
  ASSERT_TRUE(safetensors::save(dir + "/model.safetensors", ts).is_ok());
}

TEST(OnnxBertExport, MatchesPyTorchAtOtherShapes) {
  if (!have_torch()) GTEST_SKIP() << "python3-torch is not installed (scripts/install-deps.sh installs it)";
  TinyBert t;
  write_tiny_bert(t.dir);
  const std::string script = std::string(RLX_SOURCE_DIR) + "/scripts/peers/bert_torch.py";
  const std::string onnx_path = t.dir + "/model.onnx";
  std::string cmd = "OMP_NUM_THREADS=1 /usr/bin/python3 " + script + " export-onnx " + t.dir + " " + onnx_path +
                    " > " + t.dir + "/export.log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "export failed, see " << cmd;

  // without inputs: dynamic axes stay symbolic, the shape arithmetic imports symbolically
  auto sym = onnx::load(onnx_path);
  ASSERT_TRUE(sym.has_value()) << sym.status().to_string();
  ASSERT_EQ(sym->graph.inputs.size(), 3u);
  EXPECT_TRUE(sym->graph.type(sym->graph.inputs[0]).shape[0].is_symbol());
  EXPECT_TRUE(sym->graph.type(sym->graph.inputs[0]).shape[1].is_symbol());

  // a batch and sequence length other than the export's (2 x 16), with padding in the mask
  const int64_t B = 3, S = 5;
  std::vector<double> ids(B * S), mask(B * S, 1), types(B * S, 0);
  for (int64_t i = 0; i < B * S; ++i) ids[i] = static_cast<double>((i * 7 + 3) % 50);
  mask[S - 1] = mask[2 * S - 1] = mask[2 * S - 2] = 0;
  std::map<std::string, Tensor> inputs{{"input_ids", Tensor::from_f64(DType::i64, {B, S}, ids)},
                                       {"attention_mask", Tensor::from_f64(DType::i64, {B, S}, mask)},
                                       {"token_type_ids", Tensor::from_f64(DType::i64, {B, S}, types)}};
  ASSERT_TRUE(write_npy(t.dir + "/ids.npy", inputs["input_ids"]).is_ok());
  ASSERT_TRUE(write_npy(t.dir + "/mask.npy", inputs["attention_mask"]).is_ok());
  cmd = "OMP_NUM_THREADS=1 /usr/bin/python3 " + script + " embed " + t.dir + " " + t.dir + "/ids.npy " + t.dir +
        "/mask.npy " + t.dir + "/want.npy > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto want = read_npy(t.dir + "/want.npy");
  ASSERT_TRUE(want.has_value()) << want.status().to_string();

  auto r = onnx::load_and_run(onnx_path, inputs, "cpu");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  ASSERT_EQ(r->outputs.size(), 1u);
  const Tensor& got = r->outputs[0];
  ASSERT_EQ(got.sizes(), want->sizes());
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) worst = std::max(worst, std::fabs(got.get_f64(i) - want->get_f64(i)));
  EXPECT_LT(worst, 1e-5) << "max abs difference from PyTorch";
}

// Hugging Face's BERT exports slice position ids from a buffer up to the sequence length
// (position_ids[:, :seq], a Slice whose end comes from Shape -> Gather -> Unsqueeze). Imported
// without inputs, the graph keeps the sequence symbolic (rlx info, explain and bench work on
// it) and, bound at run time, gives PyTorch's output.
TEST(OnnxBertExport, PositionIdsSlicedToASymbolicLength) {
  if (!have_torch()) GTEST_SKIP() << "python3-torch is not installed (scripts/install-deps.sh installs it)";
  TinyBert t;
  const std::string script = t.dir + "/export.py";
  std::ofstream(script) << R"PY(import sys, numpy as np, torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("position_ids", torch.arange(64).expand((1, -1)))
        torch.manual_seed(3)
        self.emb = torch.nn.Embedding(64, 8)
    def forward(self, input_ids):
        pos = self.position_ids[:, :input_ids.shape[1]]
        return self.emb(pos) + input_ids.unsqueeze(-1).float()
m = M().eval()
torch.onnx.export(m, (torch.zeros(2, 7, dtype=torch.long),), sys.argv[1] + "/m.onnx", input_names=["input_ids"],
                  output_names=["out"], dynamic_axes={"input_ids": {0: "batch", 1: "seq"}}, opset_version=14)
ids = torch.arange(15, dtype=torch.long).reshape(3, 5) % 11
np.save(sys.argv[1] + "/want.npy", m(ids).detach().numpy())
)PY";
  const std::string cmd = "OMP_NUM_THREADS=1 /usr/bin/python3 " + script + " " + t.dir + " > " + t.dir + "/export.log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "export failed, see " << t.dir << "/export.log";
  auto sym = onnx::load(t.dir + "/m.onnx");
  ASSERT_TRUE(sym.has_value()) << sym.status().to_string();
  ASSERT_TRUE(sym->graph.type(sym->graph.inputs[0]).shape[1].is_symbol());
  auto model = Model::compile(sym->graph, {.device = "cpu"});
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  std::vector<double> ids(15);
  for (int i = 0; i < 15; ++i) ids[i] = i % 11;
  auto got = (*model)->run(std::vector<Tensor>{Tensor::from_f64(DType::i64, {3, 5}, ids)});
  ASSERT_TRUE(got.has_value()) << got.status().to_string();
  auto want = read_npy(t.dir + "/want.npy");
  ASSERT_TRUE(want.has_value()) << want.status().to_string();
  ASSERT_EQ((*got)[0].sizes(), want->sizes());
  for (int64_t i = 0; i < want->numel(); ++i) EXPECT_EQ((*got)[0].get_f64(i), want->get_f64(i)) << i;
}

// Data-dependent sizes as PyTorch's exporter writes them: x[mask] (NonZero, Transpose,
// GatherND), torch.nonzero, and topk, with dynamic axes; run at another shape through
// `rlx run`'s path (load_and_run: the graph is staged around NonZero) and compared with
// PyTorch's own outputs.
TEST(OnnxTorchExport, MaskedSelectAndNonZeroMatchPyTorch) {
  if (!have_torch()) {
    if (std::getenv("CI")) GTEST_FAIL() << "CI installs python3-torch (scripts/install-deps.sh), the oracle here";
    GTEST_SKIP() << "python3-torch is not installed (scripts/install-deps.sh installs it)";
  }
  TinyBert t;
  const std::string script = t.dir + "/export.py";
  std::ofstream(script) << R"PY(import sys, numpy as np, torch
class M(torch.nn.Module):
    def forward(self, x):
        y = x[x > 0.2] * 2
        return y.sum(), y, torch.nonzero(x > 0.5), torch.topk(x.flatten(), k=3)[0]
m = M()
torch.onnx.export(m, (torch.randn(4, 7),), sys.argv[1] + "/m.onnx", input_names=["x"], opset_version=17,
                  output_names=["s", "y", "idx", "t"], dynamic_axes={"x": {0: "b", 1: "n"}})
torch.manual_seed(5)
x = torch.randn(5, 9)
np.save(sys.argv[1] + "/x.npy", x.numpy())
for name, o in zip(["s", "y", "idx", "t"], m(x)):
    np.save(sys.argv[1] + "/" + name + ".npy", o.detach().numpy().copy(order="C"))
)PY";
  const std::string cmd = "OMP_NUM_THREADS=1 /usr/bin/python3 " + script + " " + t.dir + " > " + t.dir + "/export.log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "export failed, see " << t.dir << "/export.log";
  auto x = read_npy(t.dir + "/x.npy");
  ASSERT_TRUE(x.has_value()) << x.status().to_string();
  auto r = onnx::load_and_run(t.dir + "/m.onnx", {{"x", *x}}, "cpu");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  ASSERT_EQ(r->outputs.size(), 4u);
  const char* names[] = {"s", "y", "idx", "t"};
  for (int k = 0; k < 4; ++k) {
    auto want = read_npy(t.dir + "/" + names[k] + ".npy");
    ASSERT_TRUE(want.has_value()) << want.status().to_string();
    const Tensor& got = r->outputs[static_cast<size_t>(k)];
    ASSERT_EQ(got.sizes(), want->sizes()) << names[k];
    for (int64_t i = 0; i < want->numel(); ++i)
      EXPECT_NEAR(got.get_f64(i), want->get_f64(i), 1e-5 * (1 + std::fabs(want->get_f64(i)))) << names[k] << " " << i;
  }
}

}  // namespace
}  // namespace rlx
