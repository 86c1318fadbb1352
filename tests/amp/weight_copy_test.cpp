// Weight copies under mixed precision (AmpConfig::weight_copies, amp.h): the step carries the
// rounded weights from one step to the next instead of rounding the f32 master weights each
// time. Training with them must give the same parameters, bit for bit, as rounding every step,
// in both compute forms, for both narrow types, with and without loss scaling, through a
// skipped step, and after the caller changed the parameters between steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "train/data.h"
#include "train/trainer.h"

namespace rlx::train {
namespace {

using Compute = passes::AutocastOptions::Compute;

std::unique_ptr<Trainer> make(const char* arch, passes::Precision p, Compute compute, bool copies, OptimizerConfig opt,
                              double init_scale = 65536.0) {
  auto m = mnist_model(arch, 7);
  EXPECT_TRUE(m.has_value());
  AmpConfig amp{.precision = p, .scaler = {.init_scale = init_scale}, .compute = compute, .weight_copies = copies};
  auto t = Trainer::create(*m, {.optimizer = opt, .amp = amp});
  EXPECT_TRUE(t.has_value()) << t.status().to_string();
  return t.has_value() ? std::move(*t) : nullptr;
}

void expect_same_parameters(Trainer& a, Trainer& b, const std::string& when) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    ASSERT_EQ(pa[i].second.nbytes(), pb[i].second.nbytes());
    EXPECT_EQ(std::memcmp(pa[i].second.bytes(), pb[i].second.bytes(), pa[i].second.nbytes()), 0)
        << pa[i].first << " differs " << when;
  }
}

struct Case {
  const char* arch;
  passes::Precision precision;
  Compute compute;
  OptimizerConfig opt;
  double init_scale = 65536.0;
};

void run_case(const Case& c) {
  const std::string what = std::string(c.arch) + " " + std::string(passes::precision_name(c.precision)) +
                           (c.compute == Compute::narrow ? " narrow" : " widened");
  SCOPED_TRACE(what);
  auto with = make(c.arch, c.precision, c.compute, true, c.opt, c.init_scale);
  auto without = make(c.arch, c.precision, c.compute, false, c.opt, c.init_scale);
  ASSERT_TRUE(with && without);
  const int64_t batch = 16;
  auto layout = with->step_variant(batch);
  ASSERT_TRUE(layout.has_value()) << layout.status().to_string();
  MnistData d = synthetic_mnist(96, 16, 11);
  const bool conv = std::string(c.arch) == "tinyconv";
  BatchLoader la(d.train, batch, conv ? Sizes{1, 28, 28} : Sizes{784}, 3), lb(d.train, batch, conv ? Sizes{1, 28, 28} : Sizes{784}, 3);
  la.start_epoch(0);
  lb.start_epoch(0);
  int skipped = 0;
  for (int s = 0; s < 5; ++s) {
    Tensor xa, ya, xb, yb;
    ASSERT_TRUE(la.next(xa, ya) && lb.next(xb, yb));
    auto ra = with->step(xa, ya, 0.05), rb = without->step(xb, yb, 0.05);
    ASSERT_TRUE(ra.has_value()) << ra.status().to_string();
    ASSERT_TRUE(rb.has_value()) << rb.status().to_string();
    EXPECT_EQ(std::memcmp(&*ra, &*rb, sizeof(float)), 0) << "loss of step " << s;
    EXPECT_EQ(with->last_step().skipped, without->last_step().skipped);
    skipped += with->last_step().skipped;
    if (s == 2) {
      // the caller changes the weights between steps: the copies follow
      for (auto* t : {with.get(), without.get()})
        for (auto& [name, p] : t->named_parameters()) {
          float* v = p.data<float>();
          for (int64_t i = 0; i < p.numel(); ++i) v[i] = v[i] * 0.75f + 1e-3f;
        }
    }
    expect_same_parameters(*with, *without, "after step " + std::to_string(s));
  }
  if (c.init_scale > 1e10) EXPECT_GT(skipped, 0) << "the huge loss scale skips a step";
}

// The copies replace the rounding of each weight read by a product: one per parameter that a
// product reads, of the narrow type or its f32 round trip.
TEST(WeightCopies, StepCarriesOneCopyPerRoundedWeight) {
  auto m = mnist_model("mlp", 1);
  ASSERT_TRUE(m.has_value());
  for (Compute compute : {Compute::narrow, Compute::widened}) {
    AmpConfig amp{.precision = passes::Precision::bf16, .compute = compute};
    auto sg = build_step_graph(*m, {}, 8, {}, {}, amp);
    ASSERT_TRUE(sg.has_value()) << sg.status().to_string();
    const StepLayout& L = sg->layout;
    ASSERT_EQ(L.copies.size(), 2u) << "fc1.weight and fc2.weight";
    for (size_t i = 0; i < L.copies.size(); ++i) {
      const WeightCopy& c = L.copies[i];
      EXPECT_EQ(c.widened, compute == Compute::widened);
      const TensorType& in = sg->graph.type(sg->graph.inputs[static_cast<size_t>(L.first_copy) + i]);
      const TensorType& out = sg->graph.type(sg->graph.outputs[static_cast<size_t>(L.first_new_copy) + i]);
      EXPECT_EQ(in, out);
      EXPECT_EQ(in.dtype, compute == Compute::widened ? DType::f32 : DType::bf16);
      EXPECT_EQ(in.shape, m->params[static_cast<size_t>(c.param)].init.type().shape);
    }
    // no cast of a parameter to bf16 is left for the forward: only the new copies' casts
    int param_casts = 0;
    for (const Node& n : sg->graph.nodes)
      if (n.op == Op::Cast)
        for (int i = 0; i < L.num_params; ++i) param_casts += n.inputs[0] == sg->graph.inputs[static_cast<size_t>(L.first_param + i)];
    EXPECT_EQ(param_casts, 0);
    AmpConfig off = amp;
    off.weight_copies = false;
    auto plain = build_step_graph(*m, {}, 8, {}, {}, off);
    ASSERT_TRUE(plain.has_value());
    EXPECT_TRUE(plain->layout.copies.empty());
    EXPECT_EQ(plain->graph.inputs.size() + 2, sg->graph.inputs.size());
  }
}

TEST(WeightCopies, Bf16TrainingEqualsRoundingEveryStep) {
  run_case({"mlp", passes::Precision::bf16, Compute::narrow, {.kind = OptimizerKind::adam}});
  run_case({"mlp", passes::Precision::bf16, Compute::widened, {.momentum = 0.9}});
  run_case({"tinyconv", passes::Precision::bf16, Compute::narrow, {}});
}

TEST(WeightCopies, F16TrainingWithLossScalingEqualsRoundingEveryStep) {
  run_case({"mlp", passes::Precision::f16, Compute::widened, {.kind = OptimizerKind::adam}});
  run_case({"mlp", passes::Precision::f16, Compute::narrow, {.momentum = 0.9}});
  // a scale that overflows f16 at first: skipped steps leave the weights and their copies alone
  run_case({"mlp", passes::Precision::f16, Compute::widened, {}, 1e12});
}

}  // namespace
}  // namespace rlx::train
