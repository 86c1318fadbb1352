// ONNX attributes to rten attribute tables (writing): for each operator, rten's table with
// ONNX's defaults filled in. An attribute rten has no field for, or a value it cannot say, is
// refused (naming the node) rather than dropped.
#include <climits>
#include <map>
#include <set>

#include "io/onnx/onnx_internal.h"
#include "rten_internal.h"

namespace rlx::rten_io {
namespace {

using ::onnx::AttributeProto;
using ::onnx::NodeProto;
using T = fb::OperatorType;
using A = fb::OperatorAttrs;
namespace fbs = flatbuffers;

// Reads a node's ONNX attributes with ONNX's defaults, remembering which were read so that
// an attribute rten has no field for is refused rather than dropped.
class Attrs {
 public:
  Attrs(const NodeProto& n, std::string where) : n_(n), where_(std::move(where)) {}
  const AttributeProto* find(const char* k) {
    read_.insert(k);
    for (const AttributeProto& a : n_.attribute())
      if (a.name() == k) return &a;
    return nullptr;
  }
  int64_t i(const char* k, int64_t def) {
    const AttributeProto* a = find(k);
    return a ? a->i() : def;
  }
  float f(const char* k, float def) {
    const AttributeProto* a = find(k);
    return a ? a->f() : def;
  }
  std::string s(const char* k, const std::string& def) {
    const AttributeProto* a = find(k);
    return a ? a->s() : def;
  }
  std::vector<int64_t> ints(const char* k) {
    const AttributeProto* a = find(k);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
  }
  bool has(const char* k) { return find(k) != nullptr; }
  // Every attribute of the node was read.
  Status all_read() const {
    for (const AttributeProto& a : n_.attribute())
      if (!read_.count(a.name()))
        return error(ErrorCode::unsupported, where_, ": attribute '", a.name(), "' has no rten form");
    return Status::ok();
  }
  const std::string& where() const { return where_; }

 private:
  const NodeProto& n_;
  std::string where_;
  std::set<std::string> read_;
};

// A list of ONNX ints as rten's [uint] (absent when empty); negative values are refused.
Expected<fbs::Offset<fbs::Vector<uint32_t>>> uints(fbs::FlatBufferBuilder& b, const std::vector<int64_t>& v,
                                                      const char* what, const std::string& where) {
  if (v.empty()) return fbs::Offset<fbs::Vector<uint32_t>>();
  std::vector<uint32_t> u;
  for (int64_t x : v) {
    if (x < 0 || x > UINT32_MAX) return error(ErrorCode::unsupported, where, ": ", what, " value ", x, " has no rten form");
    u.push_back(static_cast<uint32_t>(x));
  }
  return b.CreateVector(u);
}


// auto_pad and pads: SAME_UPPER is rten's Same, NOTSET and VALID explicit pads.
Expected<fb::AutoPad> auto_pad(Attrs& a) {
  const std::string p = a.s("auto_pad", "NOTSET");
  if (p == "SAME_UPPER") return fb::AutoPad::Same;
  if (p == "NOTSET" || p == "VALID") return fb::AutoPad::NotSet;
  return error(ErrorCode::unsupported, a.where(), ": auto_pad ", p, " has no rten form");
}

Status require_ones(Attrs& a, const char* k) {
  for (int64_t d : a.ints(k))
    if (d != 1) return error(ErrorCode::unsupported, a.where(), ": ", k, " other than 1 has no rten form");
  return Status::ok();
}

Status require_value(Attrs& a, const char* k, const std::string& want) {
  if (a.has(k) && a.s(k, want) != want)
    return error(ErrorCode::unsupported, a.where(), ": ", k, " '", a.s(k, want), "' has no rten form");
  return Status::ok();
}

Expected<fb::RNNDirection> direction(Attrs& a) {
  const std::string d = a.s("direction", "forward");
  if (d == "forward") return fb::RNNDirection::Forward;
  if (d == "reverse") return fb::RNNDirection::Reverse;
  if (d == "bidirectional") return fb::RNNDirection::Bidirectional;
  return error(ErrorCode::unsupported, a.where(), ": direction ", d);
}

Expected<fb::ScatterReduction> reduction(Attrs& a) {
  const std::string r = a.s("reduction", "none");
  if (r == "none") return fb::ScatterReduction::None;
  if (r == "add") return fb::ScatterReduction::Add;
  if (r == "mul") return fb::ScatterReduction::Mul;
  if (r == "min") return fb::ScatterReduction::Min;
  if (r == "max") return fb::ScatterReduction::Max;
  return error(ErrorCode::unsupported, a.where(), ": reduction ", r);
}

Expected<fb::ResizeMode> resize_mode(Attrs& a) {
  const std::string m = a.s("mode", "nearest");
  if (m == "nearest") return fb::ResizeMode::Nearest;
  if (m == "linear" || m == "bilinear") return fb::ResizeMode::Linear;
  return error(ErrorCode::unsupported, a.where(), ": mode ", m, " has no rten form");
}

template <class Tbl>
FbAttrs made(A type, fbs::Offset<Tbl> t) {
  return FbAttrs{type, t.Union()};
}

// The pools' shared fields.
struct Pool {
  fbs::Offset<fbs::Vector<uint32_t>> kernel, pads, strides;
  fb::AutoPad pad = fb::AutoPad::NotSet;
  bool ceil = false;
};
Expected<Pool> pool(Attrs& a, fbs::FlatBufferBuilder& b) {
  Pool p;
  RLX_ASSIGN_OR_RETURN(p.pad, auto_pad(a));
  RLX_TRY(require_ones(a, "dilations"));
  if (a.i("storage_order", 0) != 0) return error(ErrorCode::unsupported, a.where(), ": storage_order 1");
  p.ceil = a.i("ceil_mode", 0) != 0;
  RLX_ASSIGN_OR_RETURN(p.kernel, uints(b, a.ints("kernel_shape"), "kernel_shape", a.where()));
  if (p.kernel.IsNull()) return error(ErrorCode::format_error, a.where(), ": no kernel_shape");
  RLX_ASSIGN_OR_RETURN(p.pads, uints(b, a.ints("pads"), "pads", a.where()));
  RLX_ASSIGN_OR_RETURN(p.strides, uints(b, a.ints("strides"), "strides", a.where()));
  return p;
}

// The rten table for one node; reads every attribute the op has in rten.
Expected<FbAttrs> build(T t, Attrs& a, fbs::FlatBufferBuilder& b) {
  switch (t) {
    case T::ArgMax: case T::ArgMin:
      if (a.i("select_last_index", 0) != 0) return error(ErrorCode::unsupported, a.where(), ": select_last_index 1");
      return made(A::ArgMaxAttrs, fb::CreateArgMaxAttrs(b, a.i("axis", 0), a.i("keepdims", 1) != 0));
    case T::AveragePool: {
      RLX_ASSIGN_OR_RETURN(Pool p, pool(a, b));
      return made(A::AveragePoolAttrs, fb::CreateAveragePoolAttrs(b, p.kernel, p.pad, p.pads, p.strides,
                                                                   a.i("count_include_pad", 0) != 0, p.ceil));
    }
    case T::MaxPool: {
      RLX_ASSIGN_OR_RETURN(Pool p, pool(a, b));
      return made(A::MaxPoolAttrs, fb::CreateMaxPoolAttrs(b, p.kernel, p.pad, p.pads, p.strides, p.ceil));
    }
    case T::BatchNormalization: case T::InstanceNormalization:
      a.has("momentum");  // training only
      if (a.i("training_mode", 0) != 0) return error(ErrorCode::unsupported, a.where(), ": training_mode 1");
      return made(A::BatchNormalizationAttrs, fb::CreateBatchNormalizationAttrs(b, a.f("epsilon", 1e-5f)));
    case T::Cast: {
      RLX_ASSIGN_OR_RETURN(fb::DataType to, rten_dtype(a.i("to", 0), a.where()));
      return made(A::CastAttrs, fb::CreateCastAttrs(b, to));
    }
    case T::CastLike: return made(A::CastLikeAttrs, fb::CreateCastLikeAttrs(b));
    case T::Concat: return made(A::ConcatAttrs, fb::CreateConcatAttrs(b, a.i("axis", 0)));
    case T::ConstantOfShape: {
      const AttributeProto* v = a.find("value");
      if (!v) return made(A::ConstantOfShapeAttrs, fb::CreateConstantOfShapeAttrs(b, fb::Scalar::FloatScalar,
                                                                                 fb::CreateFloatScalar(b, 0.0f).Union()));
      RLX_ASSIGN_OR_RETURN(Tensor val, onnx_import::tensor_from_proto(v->t(), "", a.where() + ": value"));
      if (val.numel() != 1) return error(ErrorCode::format_error, a.where(), ": the value has ", val.numel(), " elements");
      if (val.dtype() == DType::f32)
        return made(A::ConstantOfShapeAttrs, fb::CreateConstantOfShapeAttrs(b, fb::Scalar::FloatScalar,
                                                                           fb::CreateFloatScalar(b, val.data<float>()[0]).Union()));
      if (val.dtype() == DType::i64 || val.dtype() == DType::i32) {
        const double x = val.get_f64(0);
        if (x < INT32_MIN || x > INT32_MAX) return error(ErrorCode::unsupported, a.where(), ": the value ", x, " is out of int32 range");
        return made(A::ConstantOfShapeAttrs, fb::CreateConstantOfShapeAttrs(b, fb::Scalar::IntScalar,
                                                                           fb::CreateIntScalar(b, static_cast<int32_t>(x)).Union()));
      }
      return error(ErrorCode::unsupported, a.where(), ": a ", dtype_name(val.dtype()), " value has no rten form");
    }
    case T::Conv: case T::ConvInteger: case T::ConvTranspose: {
      RLX_ASSIGN_OR_RETURN(fb::AutoPad pad, auto_pad(a));
      a.has("kernel_shape");  // the weights' shape says it
      RLX_ASSIGN_OR_RETURN(auto pads, uints(b, a.ints("pads"), "pads", a.where()));
      RLX_ASSIGN_OR_RETURN(auto strides, uints(b, a.ints("strides"), "strides", a.where()));
      RLX_ASSIGN_OR_RETURN(auto dil, uints(b, a.ints("dilations"), "dilations", a.where()));
      const int64_t group = a.i("group", 1);
      if (group < 1 || group > UINT32_MAX) return error(ErrorCode::unsupported, a.where(), ": group ", group);
      if (t != T::ConvTranspose) return made(A::ConvAttrs, fb::CreateConvAttrs(b, pad, pads, static_cast<uint32_t>(group), strides, dil));
      if (a.has("output_shape")) return error(ErrorCode::unsupported, a.where(), ": output_shape has no rten form");
      RLX_ASSIGN_OR_RETURN(auto outpad, uints(b, a.ints("output_padding"), "output_padding", a.where()));
      return made(A::ConvTransposeAttrs, fb::CreateConvTransposeAttrs(b, strides, pad, pads, static_cast<uint32_t>(group), outpad, dil));
    }
    case T::CumSum: return made(A::CumSumAttrs, fb::CreateCumSumAttrs(b, a.i("exclusive", 0) != 0, a.i("reverse", 0) != 0));
    case T::DepthToSpace: {
      const std::string m = a.s("mode", "DCR");
      if (m != "DCR" && m != "CRD") return error(ErrorCode::unsupported, a.where(), ": mode ", m);
      const int64_t bs = a.i("blocksize", 0);
      if (bs < 1 || bs > UINT32_MAX) return error(ErrorCode::format_error, a.where(), ": blocksize ", bs);
      return made(A::DepthToSpaceAttrs, fb::CreateDepthToSpaceAttrs(b, m == "DCR" ? fb::DepthToSpaceMode::DCR : fb::DepthToSpaceMode::CRD,
                                                                    static_cast<uint32_t>(bs)));
    }
    case T::DequantizeLinear: return made(A::DequantizeLinearAttrs, fb::CreateDequantizeLinearAttrs(b, a.i("axis", 1)));
    case T::QuantizeLinear:
      if (a.i("saturate", 1) != 1) return error(ErrorCode::unsupported, a.where(), ": saturate 0");
      return made(A::QuantizeLinearAttrs, fb::CreateQuantizeLinearAttrs(b, a.i("axis", 1)));
    case T::Dropout: {
      fb::DropoutAttrsBuilder d(b);
      if (a.has("seed")) d.add_seed(static_cast<int32_t>(a.i("seed", 0)));
      return made(A::DropoutAttrs, d.Finish());
    }
    case T::Einsum: return made(A::EinsumAttrs, fb::CreateEinsumAttrsDirect(b, a.s("equation", "").c_str()));
    case T::Elu: case T::Celu: case T::ThresholdedRelu:
      return made(A::EluAttrs, fb::CreateEluAttrs(b, a.f("alpha", 1.0f)));
    case T::Flatten: return made(A::FlattenAttrs, fb::CreateFlattenAttrs(b, a.i("axis", 1)));
    case T::Gather: case T::GatherElements: return made(A::GatherAttrs, fb::CreateGatherAttrs(b, a.i("axis", 0)));
    case T::GatherND: return made(A::GatherNDAttrs, fb::CreateGatherNDAttrs(b, a.i("batch_dims", 0)));
    case T::Gemm:
      return made(A::GemmAttrs, fb::CreateGemmAttrs(b, a.f("alpha", 1.0f), a.f("beta", 1.0f), a.i("transA", 0) != 0,
                                                    a.i("transB", 0) != 0));
    case T::GridSample:
      RLX_TRY(require_value(a, "mode", "bilinear"));
      RLX_TRY(require_value(a, "padding_mode", "zeros"));
      return made(A::GridSampleAttrs, fb::CreateGridSampleAttrs(b, a.i("align_corners", 0) != 0));
    case T::GRU: case T::LSTM: {
      RLX_ASSIGN_OR_RETURN(fb::RNNDirection d, direction(a));
      if (a.i("layout", 0) != 0) return error(ErrorCode::unsupported, a.where(), ": layout 1");
      const int64_t h = a.i("hidden_size", 0);
      if (h < 1 || h > UINT32_MAX) return error(ErrorCode::format_error, a.where(), ": hidden_size ", h);
      if (t == T::LSTM) return made(A::LSTMAttrs, fb::CreateLSTMAttrs(b, d, static_cast<uint32_t>(h)));
      return made(A::GRUAttrs, fb::CreateGRUAttrs(b, d, static_cast<uint32_t>(h), a.i("linear_before_reset", 0) != 0));
    }
    case T::HardSigmoid: return made(A::HardSigmoidAttrs, fb::CreateHardSigmoidAttrs(b, a.f("alpha", 0.2f), a.f("beta", 0.5f)));
    case T::LayerNormalization:
      a.has("stash_type");  // the precision of the statistics; rten computes in f32
      return made(A::LayerNormalizationAttrs, fb::CreateLayerNormalizationAttrs(b, a.i("axis", -1), a.f("epsilon", 1e-5f)));
    case T::LeakyRelu: return made(A::LeakyReluAttrs, fb::CreateLeakyReluAttrs(b, a.f("alpha", 0.01f)));
    case T::Mod: return made(A::ModAttrs, fb::CreateModAttrs(b, a.i("fmod", 0) != 0));
    case T::OneHot: return made(A::OneHotAttrs, fb::CreateOneHotAttrs(b, a.i("axis", -1)));
    case T::Pad: {
      const std::string m = a.s("mode", "constant");
      const fb::PadMode pm = m == "reflect" ? fb::PadMode::Reflect : m == "edge" ? fb::PadMode::Edge
                             : m == "wrap" ? fb::PadMode::Wrap : fb::PadMode::Constant;
      if (pm == fb::PadMode::Constant && m != "constant") return error(ErrorCode::unsupported, a.where(), ": mode ", m);
      return made(A::PadAttrs, fb::CreatePadAttrs(b, pm));
    }
    case T::ReduceMean: case T::ReduceL2: case T::ReduceProd: case T::ReduceSum: case T::ReduceMin:
    case T::ReduceMax: case T::ReduceSumSquare: case T::ReduceL1: case T::ReduceLogSum: case T::ReduceLogSumExp: {
      std::vector<int32_t> axes;
      for (int64_t x : a.ints("axes")) axes.push_back(static_cast<int32_t>(x));
      fbs::Offset<fbs::Vector<int32_t>> av;
      if (!axes.empty()) av = b.CreateVector(axes);
      return made(A::ReduceMeanAttrs, fb::CreateReduceMeanAttrs(b, av,
                                                                a.i("keepdims", 1) != 0, a.i("noop_with_empty_axes", 0) != 0));
    }
    case T::Reshape: return made(A::ReshapeAttrs, fb::CreateReshapeAttrs(b, a.i("allowzero", 0) != 0));
    case T::Resize: {
      RLX_ASSIGN_OR_RETURN(fb::ResizeMode m, resize_mode(a));
      const std::string c = a.s("coordinate_transformation_mode", "half_pixel"), r = a.s("nearest_mode", "round_prefer_floor");
      static const char* const coords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"};
      static const char* const nearests[] = {"floor", "ceil", "round_prefer_floor", "round_prefer_ceil"};
      int ci = -1, ri = -1;
      for (int k = 0; k < 4; ++k) {
        if (c == coords[k]) ci = k;
        if (r == nearests[k]) ri = k;
      }
      if (ci < 0 || ri < 0) return error(ErrorCode::unsupported, a.where(), ": coordinate or rounding mode ", c, "/", r);
      a.has("cubic_coeff_a");  // cubic mode only, refused above
      if (a.i("exclude_outside", 0) != 0) return error(ErrorCode::unsupported, a.where(), ": exclude_outside 1");
      a.has("extrapolation_value");  // tf_crop_and_resize only, refused above
      return made(A::ResizeAttrs, fb::CreateResizeAttrs(b, m, static_cast<fb::CoordTransformMode>(ci), static_cast<fb::NearestMode>(ri)));
    }
    case T::Upsample: {
      RLX_ASSIGN_OR_RETURN(fb::ResizeMode m, resize_mode(a));
      return made(A::UpsampleAttrs, fb::CreateUpsampleAttrs(b, m));
    }
    case T::ReverseSequence:
      return made(A::ReverseSequenceAttrs, fb::CreateReverseSequenceAttrs(b, a.i("batch_axis", 1), a.i("time_axis", 0)));
    case T::ScatterElements: case T::Scatter: {
      RLX_ASSIGN_OR_RETURN(fb::ScatterReduction r, reduction(a));
      return made(A::ScatterElementsAttrs, fb::CreateScatterElementsAttrs(b, a.i("axis", 0), r));
    }
    case T::ScatterND: {
      RLX_ASSIGN_OR_RETURN(fb::ScatterReduction r, reduction(a));
      return made(A::ScatterNDAttrs, fb::CreateScatterNDAttrs(b, r));
    }
    case T::Selu: return made(A::SeluAttrs, fb::CreateSeluAttrs(b, a.f("alpha", 1.67326319217681884765625f), a.f("gamma", 1.05070102214813232421875f)));
    case T::Shrink: return made(A::ShrinkAttrs, fb::CreateShrinkAttrs(b, a.f("bias", 0.0f), a.f("lambd", 0.5f)));
    case T::Shape: {
      fb::ShapeAttrsBuilder s(b);
      if (a.has("start")) s.add_start(static_cast<int32_t>(a.i("start", 0)));
      if (a.has("end")) s.add_end(static_cast<int32_t>(a.i("end", 0)));
      return made(A::ShapeAttrs, s.Finish());
    }
    case T::Softmax: case T::LogSoftmax: return made(A::SoftmaxAttrs, fb::CreateSoftmaxAttrs(b, a.i("axis", -1)));
    case T::Split: {
      if (a.has("split")) return error(ErrorCode::unsupported, a.where(), ": the split attribute (opset < 13)");
      fb::SplitAttrsBuilder s(b);
      s.add_axis(static_cast<int32_t>(a.i("axis", 0)));
      if (a.has("num_outputs")) s.add_num_outputs(static_cast<int32_t>(a.i("num_outputs", 0)));
      return made(A::SplitAttrs, s.Finish());
    }
    case T::TopK: return made(A::TopKAttrs, fb::CreateTopKAttrs(b, a.i("axis", -1), a.i("largest", 1) != 0, a.i("sorted", 1) != 0));
    case T::Transpose: {
      RLX_ASSIGN_OR_RETURN(auto perm, uints(b, a.ints("perm"), "perm", a.where()));
      return made(A::TransposeAttrs, fb::CreateTransposeAttrs(b, perm));
    }
    case T::Trilu: return made(A::TriluAttrs, fb::CreateTriluAttrs(b, a.i("upper", 1) != 0));
    case T::EyeLike: {
      fb::DataType dt = fb::DataType::Float;
      if (a.has("dtype")) { RLX_ASSIGN_OR_RETURN(dt, rten_dtype(a.i("dtype", 1), a.where())); }
      fb::EyeLikeAttrsBuilder e(b);
      if (a.has("dtype")) e.add_dtype(dt);
      e.add_k(static_cast<int32_t>(a.i("k", 0)));
      return made(A::EyeLikeAttrs, e.Finish());
    }
    default: return FbAttrs{};
  }
}

}  // namespace

Expected<fb::DataType> rten_dtype(int64_t onnx_t, const std::string& where) {
  switch (onnx_t) {
    case ::onnx::TensorProto::FLOAT: return fb::DataType::Float;
    case ::onnx::TensorProto::INT64: case ::onnx::TensorProto::INT32: return fb::DataType::Int32;
    case ::onnx::TensorProto::INT8: return fb::DataType::Int8;
    case ::onnx::TensorProto::UINT8: return fb::DataType::UInt8;
  }
  return error(ErrorCode::unsupported, where, ": ONNX dtype ", onnx_t, " has no rten form (f32, i32/i64, i8, u8)");
}

Expected<FbAttrs> attrs_from_onnx(const NodeProto& n, T type, fbs::FlatBufferBuilder& b, const std::string& where) {
  Attrs a(n, where);
  RLX_ASSIGN_OR_RETURN(FbAttrs r, build(type, a, b));
  RLX_TRY(a.all_read());
  return r;
}

std::optional<T> operator_type(const std::string& onnx_op) {
  // rten operators rlx reads back (the writer never writes what the reader refuses)
  static const std::map<std::string, T> table = [] {
    std::map<std::string, T> m;
    for (int i = 0; i <= static_cast<int>(T::MAX); ++i) {
      const T t = static_cast<T>(i);
      m[fb::EnumNameOperatorType(t)] = t;
    }
    for (const char* r : {"If", "Loop", "SequenceEmpty", "SequenceAt", "SequenceInsert", "ConcatFromSequence",
                          "SplitToSequence", "SequenceLength", "SequenceConstruct", "SequenceErase", "RandomUniform",
                          "RandomUniformLike", "RandomNormal", "RandomNormalLike", "Multinomial", "NonMaxSuppression",
                          "STFT", "DFT", "Gelu", "RotaryEmbedding", "Attention", "LpNormalization", "BitwiseNot"})
      m.erase(r);
    return m;
  }();
  auto it = table.find(onnx_op);
  if (it == table.end()) return std::nullopt;
  return it->second;
}

}  // namespace rlx::rten_io
