// Automatic mixed precision (AMP): the autocast policy, as a graph pass and as a Builder.
//
// Policy (the same split as torch.autocast):
//   - narrow (f16 or bf16): matrix products and convolutions: matmul, gemm, dot, conv2d. Their
//     floating operands are rounded to the narrow type and the products are summed in f32; the
//     result stays f32 unless AutocastOptions::narrow_output rounds it too (as torch's autocast
//     outputs are). Gemm's and conv2d's bias (input 2) is added in f32.
//   - attention (a fused composite): its q, k and v are rounded to the narrow type, so both of
//     its products see narrow operands; the scores, the softmax and the probabilities stay f32
//     inside the op, and the mask is used as it is. In the narrow form it is attention on
//     narrow operands with out_type f32 (a float mask, or narrow_output, keeps it f32).
//   - f32: everything else: softmax, layer/rms norms, losses, reductions, elementwise ops,
//     embeddings. The graph's
//     inputs, outputs and weights keep their dtypes: a training step keeps f32 master weights
//     and optimizer state and only the products see narrow values.
//
// How the narrow product is expressed (AutocastOptions::compute):
//   - widened (default): `matmul(cast(cast(x, narrow), f32), cast(cast(w, narrow), f32))` and
//     the output rounded through `cast(cast(y, narrow), f32)`. A product of two f16 (11-bit) or
//     bf16 (8-bit) significands is exact in f32, so the f32 GEMM's fused multiply-adds compute
//     exactly "narrow operands, f32 accumulation": what AVX-512 BF16 / AMX / tensor cores do,
//     here on the CPU's tuned f32 GEMM (the CPU has no native narrow GEMM; its generated
//     narrow dot loop is much slower, measured in docs/precision.md). Weights are converted once, not per call: the graph pass replaces an
//     operand that is a weight with data by a weight of its own, "<name>#bf16" (f32 storage
//     holding the rounded values, so the CPU packs it for its GEMM once), and other constant
//     operands fold (cast(cast(const)) becomes one constant in passes::fold_constants).
//     Gradients flow through the casts (the VJP of cast casts the gradient back), so the
//     backward's products also see narrow-rounded operands, as under torch autocast.
//   - narrow: the product node itself on narrow operands, for devices whose kernels take them
//     directly: a dot gets an f32 result (`dot(cast(x, bf16), cast(w, bf16)) {out_type = f32}
//     : f32`, the sums never rounded to the narrow type, as in the widened form). A matmul
//     that is a dot (a 2-D right operand, or equal batch axes: no broadcasting) is emitted as
//     that dot, with the f32 result, and a conv2d is conv2d on narrow operands with out_type
//     f32 (its im2col matrix narrow, its bias added in f32), unless narrow_conv2d is off. The
//     products with no such form (gemm, a broadcasting matmul) take the widened form: the
//     same values, where the narrow type would round their results, and on the f32 kernels,
//     where the device has no faster narrow ones. With narrow_output they compute in the
//     narrow dtype and are cast to f32.
//
// A node is converted only when all its floating operands are f32; f64, integer and already
// narrow products are left alone.
#pragma once

#include <string_view>

#include "rlx/device.h"
#include "rlx/graph.h"

namespace rlx::passes {

// --precision on the command line.
enum class Precision : uint8_t { f32, f16, bf16 };
// "f32" (also "fp32"), "f16" ("fp16"), "bf16"; anything else is invalid_argument naming it.
Expected<Precision> parse_precision(std::string_view name);
std::string_view precision_name(Precision p);
// The narrow dtype of p (f32 for Precision::f32).
DType precision_dtype(Precision p);
// x rounded to `narrow` (f16 or bf16, to nearest even) and widened back: what
// cast(cast(x, narrow), f32) computes, bit for bit.
float round_through(float x, DType narrow);

struct AutocastOptions {
  DType narrow = DType::bf16;  // f16 or bf16
  enum class Compute : uint8_t { widened, narrow } compute = Compute::widened;
  // Round the products' results to `narrow` (widened form) as torch's autocast does. Off by
  // default: the result is the f32 accumulator (as a GEMM with an f32 destination writes it),
  // and the values are rounded again where the next product reads them. Measured on the digits
  // MLP (docs/precision.md): rounding the outputs too cost bf16 training 0.55 points.
  bool narrow_output = false;
  // In the narrow form, conv2d as a narrow product with an f32 result (on) or in the widened
  // form (off: for a device whose narrow products pay only with many rows, which a
  // convolution's per-image products lack; narrow_conv2d below).
  bool narrow_conv2d = true;
};

// The form of the narrow products on `device` (inference, and training unless
// AmpConfig::compute says otherwise): Compute::narrow where the device lists `narrow` in
// DeviceInfo::fast_narrow_products (its native narrow kernels beat widening), else
// Compute::widened. In the narrow form dots (and matmuls that are dots) and attention keep f32
// results (out_type); the other products take the widened form (above). The environment
// variable RLX_AUTOCAST_FORM=widened|narrow overrides the choice (other values are ignored).
AutocastOptions::Compute inference_compute(const DeviceInfo& device, DType narrow);

// Whether the narrow form on `device` keeps convolutions narrow (AutocastOptions::narrow_conv2d):
// where it lists `narrow` in DeviceInfo::fast_narrow_convolutions, or RLX_AUTOCAST_FORM=narrow
// asks for every product in the narrow form.
bool narrow_conv2d(const DeviceInfo& device, DType narrow);

// Whether the policy runs `op` with narrow operands (matmul, gemm, dot, conv2d, attention).
bool autocast_narrow_op(Op op);

// Rewrites every node of `g` (graph level) that the policy runs in the narrow type, as above.
// Returns the number of nodes converted. Errors: `options.narrow` not f16/bf16
// (invalid_argument), or a node whose re-inference fails (names the node).
Expected<int> autocast(Graph& g, const AutocastOptions& options);

// A Builder that applies the policy to what is emitted through it and forwards everything to
// `inner` (model builders and the training step emit through it, so the casts sit in the
// forward graph that autodiff differentiates).
class AutocastBuilder : public Builder {
 public:
  AutocastBuilder(Builder& inner, AutocastOptions options) : inner_(inner), options_(options) {}
  Expected<std::vector<ValueId>> emit(Op op, std::vector<ValueId> inputs, Attrs attrs) override;
  const TensorType& type(ValueId v) const override { return inner_.type(v); }
  Expected<ValueId> param(const std::string& weight_name, TensorType type) override {
    return inner_.param(weight_name, type);
  }
  int converted() const { return converted_; }

 private:
  Builder& inner_;
  AutocastOptions options_;
  int converted_ = 0;
};

}  // namespace rlx::passes
