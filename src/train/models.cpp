#include "models.h"

#include "init.h"

namespace rlx::train {
namespace {

Tensor zeros(Sizes s) { return Tensor::zeros(DType::f32, std::move(s)); }

ModelDef mlp(uint64_t seed) {
  ModelDef m;
  m.name = "mlp";
  m.example_shape = {784};
  m.params = {
      {"fc1.weight", kaiming_uniform(DType::f32, {784, 128}, fans_linear(784, 128), seed * 4 + 1)},
      {"fc1.bias", zeros({128})},
      {"fc2.weight", kaiming_uniform(DType::f32, {128, 10}, fans_linear(128, 10), seed * 4 + 2, 1.0)},
      {"fc2.bias", zeros({10})},
  };
  m.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>* ends) {
    ValueId h = o.relu(o.add(o.matmul(x, p[0]), p[1]));
    if (ends) ends->push_back(h);
    return o.add(o.matmul(h, p[2]), p[3]);
  };
  return m;
}

ModelDef tinyconv(uint64_t seed) {
  ModelDef m;
  m.name = "tinyconv";
  m.example_shape = {1, 28, 28};
  m.params = {
      {"conv1.weight", kaiming_uniform(DType::f32, {8, 1, 3, 3}, fans_conv({8, 1, 3, 3}), seed * 8 + 1)},
      {"conv1.bias", zeros({8})},
      {"conv2.weight", kaiming_uniform(DType::f32, {16, 8, 3, 3}, fans_conv({16, 8, 3, 3}), seed * 8 + 2)},
      {"conv2.bias", zeros({16})},
      {"fc.weight", kaiming_uniform(DType::f32, {400, 10}, fans_linear(400, 10), seed * 8 + 3, 1.0)},
      {"fc.bias", zeros({10})},
  };
  m.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>* ends) {
    const Attrs pool{{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}};
    ValueId h = o.relu(o.op(Op::Conv2d, {x, p[0], p[1]}));  // [B, 8, 26, 26]
    h = o.op(Op::MaxPool2d, {h}, pool);                     // [B, 8, 13, 13]
    if (ends) ends->push_back(h);
    h = o.relu(o.op(Op::Conv2d, {h, p[2], p[3]}));          // [B, 16, 11, 11]
    h = o.op(Op::MaxPool2d, {h}, pool);                     // [B, 16, 5, 5]
    if (ends) ends->push_back(h);
    h = o.reshape(h, {-1, 400});
    return o.add(o.matmul(h, p[4]), p[5]);
  };
  return m;
}

// A depthwise-separable block with a residual connection and both kinds of padded pooling (the
// layers of small mobile networks); see models.h for the shapes.
ModelDef dsconv(uint64_t seed) {
  ModelDef m;
  m.name = "dsconv";
  m.example_shape = {1, 28, 28};
  m.params = {
      {"stem.weight", kaiming_uniform(DType::f32, {16, 1, 3, 3}, fans_conv({16, 1, 3, 3}), seed * 8 + 1)},
      {"stem.bias", zeros({16})},
      {"dw.weight", kaiming_uniform(DType::f32, {16, 1, 3, 3}, fans_conv({16, 1, 3, 3}), seed * 8 + 2)},
      {"dw.bias", zeros({16})},
      {"pw.weight", kaiming_uniform(DType::f32, {16, 16, 1, 1}, fans_conv({16, 16, 1, 1}), seed * 8 + 3)},
      {"pw.bias", zeros({16})},
      {"fc.weight", kaiming_uniform(DType::f32, {256, 10}, fans_linear(256, 10), seed * 8 + 4, 1.0)},
      {"fc.bias", zeros({10})},
  };
  m.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>* ends) {
    const Attrs stem{{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    const Attrs dw{{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{16}}};
    ValueId s = o.relu(o.op(Op::Conv2d, {x, p[0], p[1]}, stem));     // [B, 16, 14, 14]
    ValueId h = o.relu(o.op(Op::Conv2d, {s, p[2], p[3]}, dw));       // depthwise 3x3
    h = o.op(Op::Conv2d, {h, p[4], p[5]});                           // pointwise 1x1
    h = o.relu(o.add(s, h));                                         // residual
    if (ends) ends->push_back(h);
    h = o.op(Op::MaxPool2d, {h}, Attrs{{"kernel", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                                       {"pads", std::vector<int64_t>{1, 1, 1, 1}}});  // [B, 16, 7, 7]
    h = o.op(Op::AvgPool2d, {h}, Attrs{{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}},
                                       {"pads", std::vector<int64_t>{0, 0, 1, 1}}});  // [B, 16, 4, 4]
    if (ends) ends->push_back(h);
    h = o.reshape(h, {-1, 256});
    return o.add(o.matmul(h, p[6]), p[7]);
  };
  return m;
}

}  // namespace

Expected<ModelDef> mnist_model(std::string_view arch, uint64_t seed) {
  if (arch == "mlp") return mlp(seed);
  if (arch == "tinyconv") return tinyconv(seed);
  if (arch == "dsconv") return dsconv(seed);
  return error(ErrorCode::invalid_argument, "unknown architecture '", arch, "' (expected mlp, tinyconv or dsconv)");
}

}  // namespace rlx::train
