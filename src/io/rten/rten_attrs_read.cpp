// rten operator attributes to ONNX attributes (reading). rten keeps one attribute table per
// operator family (ReduceMeanAttrs for every Reduce*, ConvAttrs for Conv and ConvInteger...),
// with ONNX's meaning under rten's field names; this file renames, converts enums and refuses
// the operators whose rten attributes rlx does not map.
#include <vector>

#include "rten_internal.h"

namespace rlx::rten_io {
namespace {

using ::onnx::AttributeProto;
using ::onnx::NodeProto;
using T = fb::OperatorType;
using A = fb::OperatorAttrs;

void set_i(NodeProto& n, const char* k, int64_t v) {
  AttributeProto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::INT);
  a->set_i(v);
}
void set_f(NodeProto& n, const char* k, float v) {
  AttributeProto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::FLOAT);
  a->set_f(v);
}
void set_s(NodeProto& n, const char* k, const std::string& v) {
  AttributeProto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::STRING);
  a->set_s(v);
}
template <class V>
void set_ints(NodeProto& n, const char* k, const flatbuffers::Vector<V>* v) {
  if (!v) return;
  AttributeProto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::INTS);
  for (V x : *v) a->add_ints(static_cast<int64_t>(x));
}

// The attribute table rten writes for an operator type; NONE where it writes none. `refused`
// is set for operators whose attributes the schema keeps only as placeholders, or that have
// no ONNX form at opset 17.
A expected_attrs(T t, bool& refused) {
  refused = false;
  switch (t) {
    case T::ArgMax: case T::ArgMin: return A::ArgMaxAttrs;
    case T::AveragePool: return A::AveragePoolAttrs;
    case T::BatchNormalization: case T::InstanceNormalization: return A::BatchNormalizationAttrs;
    case T::Cast: return A::CastAttrs;
    case T::CastLike: return A::CastLikeAttrs;
    case T::Concat: return A::ConcatAttrs;
    case T::ConstantOfShape: return A::ConstantOfShapeAttrs;
    case T::Conv: case T::ConvInteger: return A::ConvAttrs;
    case T::ConvTranspose: return A::ConvTransposeAttrs;
    case T::CumSum: return A::CumSumAttrs;
    case T::DepthToSpace: return A::DepthToSpaceAttrs;
    case T::DequantizeLinear: return A::DequantizeLinearAttrs;
    case T::Dropout: return A::DropoutAttrs;
    case T::Einsum: return A::EinsumAttrs;
    case T::Elu: case T::Celu: case T::ThresholdedRelu: return A::EluAttrs;
    case T::EyeLike: return A::EyeLikeAttrs;
    case T::Flatten: return A::FlattenAttrs;
    case T::Gather: case T::GatherElements: return A::GatherAttrs;
    case T::GatherND: return A::GatherNDAttrs;
    case T::Gemm: return A::GemmAttrs;
    case T::GridSample: return A::GridSampleAttrs;
    case T::GRU: return A::GRUAttrs;
    case T::HardSigmoid: return A::HardSigmoidAttrs;
    case T::IsInf: return A::IsInfAttrs;
    case T::LayerNormalization: return A::LayerNormalizationAttrs;
    case T::LeakyRelu: return A::LeakyReluAttrs;
    case T::LSTM: return A::LSTMAttrs;
    case T::MaxPool: return A::MaxPoolAttrs;
    case T::Mod: return A::ModAttrs;
    case T::OneHot: return A::OneHotAttrs;
    case T::Pad: return A::PadAttrs;
    case T::QuantizeLinear: return A::QuantizeLinearAttrs;
    case T::ReduceMean: case T::ReduceL2: case T::ReduceProd: case T::ReduceSum: case T::ReduceMin:
    case T::ReduceMax: case T::ReduceSumSquare: case T::ReduceL1: case T::ReduceLogSum:
    case T::ReduceLogSumExp:
      return A::ReduceMeanAttrs;
    case T::Reshape: return A::ReshapeAttrs;
    case T::Resize: return A::ResizeAttrs;
    case T::ReverseSequence: return A::ReverseSequenceAttrs;
    case T::ScatterElements: case T::Scatter: return A::ScatterElementsAttrs;
    case T::ScatterND: return A::ScatterNDAttrs;
    case T::Selu: return A::SeluAttrs;
    case T::Shape: return A::ShapeAttrs;
    case T::Shrink: return A::ShrinkAttrs;
    case T::Softmax: case T::LogSoftmax: return A::SoftmaxAttrs;
    case T::Split: return A::SplitAttrs;
    case T::TopK: return A::TopKAttrs;
    case T::Transpose: return A::TransposeAttrs;
    case T::Trilu: return A::TriluAttrs;
    case T::Upsample: return A::UpsampleAttrs;
    // subgraphs, sequences, random ops, ops newer than opset 17, and DFT (whose axis rten takes
    // as an input, opset 20's form)
    case T::If: case T::Loop: case T::SequenceEmpty: case T::SequenceAt: case T::SequenceInsert:
    case T::ConcatFromSequence: case T::SplitToSequence: case T::SequenceLength: case T::SequenceConstruct:
    case T::SequenceErase: case T::RandomUniform: case T::RandomUniformLike: case T::RandomNormal:
    case T::RandomNormalLike: case T::Multinomial: case T::NonMaxSuppression: case T::STFT: case T::DFT: case T::Gelu:
    case T::RotaryEmbedding: case T::Attention: case T::LpNormalization: case T::BitwiseNot:
      refused = true;
      return A::NONE;
    default: return A::NONE;
  }
}

// Operators whose rten attribute table came later than the operator: a file may lack it, and
// then ONNX's defaults are rten's.
bool attrs_optional(T t) {
  return t == T::Shape || t == T::CastLike || t == T::IsInf || t == T::Dropout || t == T::CumSum || t == T::Pad ||
         t == T::Split;
}

Expected<int32_t> onnx_dtype(fb::DataType t, const std::string& where) {
  switch (t) {
    case fb::DataType::Int32: return ::onnx::TensorProto::INT64;  // rten's one integer type (rlx/rten.h)
    case fb::DataType::Float: return ::onnx::TensorProto::FLOAT;
    case fb::DataType::Int8: return ::onnx::TensorProto::INT8;
    case fb::DataType::UInt8: return ::onnx::TensorProto::UINT8;
  }
  return error(ErrorCode::format_error, where, ": unknown dtype code ", static_cast<int>(t));
}

// auto_pad and pads of Conv, ConvTranspose and the pools.
Status set_padding(NodeProto& n, fb::AutoPad mode, const flatbuffers::Vector<uint32_t>* pads, const std::string& where) {
  if (mode == fb::AutoPad::Same) {
    set_s(n, "auto_pad", "SAME_UPPER");
    return Status::ok();
  }
  if (mode != fb::AutoPad::NotSet)
    return error(ErrorCode::format_error, where, ": unknown auto_pad code ", static_cast<int>(mode));
  set_ints(n, "pads", pads);
  return Status::ok();
}

Expected<const char*> rnn_direction(fb::RNNDirection d, const std::string& where) {
  switch (d) {
    case fb::RNNDirection::Forward: return "forward";
    case fb::RNNDirection::Reverse: return "reverse";
    case fb::RNNDirection::Bidirectional: return "bidirectional";
  }
  return error(ErrorCode::format_error, where, ": unknown RNN direction code ", static_cast<int>(d));
}

Expected<const char*> reduction(fb::ScatterReduction r, const std::string& where) {
  switch (r) {
    case fb::ScatterReduction::None: return "none";
    case fb::ScatterReduction::Add: return "add";
    case fb::ScatterReduction::Mul: return "mul";
    case fb::ScatterReduction::Min: return "min";
    case fb::ScatterReduction::Max: return "max";
  }
  return error(ErrorCode::format_error, where, ": unknown reduction code ", static_cast<int>(r));
}

Expected<const char*> resize_mode(fb::ResizeMode m, const std::string& where) {
  if (m == fb::ResizeMode::Nearest) return "nearest";
  if (m == fb::ResizeMode::Linear) return "linear";
  return error(ErrorCode::format_error, where, ": unknown resize mode code ", static_cast<int>(m));
}

Status resize_attrs(NodeProto& n, const fb::ResizeAttrs& a, const std::string& where) {
  RLX_ASSIGN_OR_RETURN(const char* mode, resize_mode(a.mode(), where));
  set_s(n, "mode", mode);
  static const char* const coord[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"};
  static const char* const nearest[] = {"floor", "ceil", "round_prefer_floor", "round_prefer_ceil"};
  const auto c = static_cast<size_t>(a.coord_mode()), r = static_cast<size_t>(a.nearest_mode());
  if (c >= 4 || r >= 4) return error(ErrorCode::format_error, where, ": unknown Resize coordinate or rounding mode code");
  set_s(n, "coordinate_transformation_mode", coord[c]);
  if (a.mode() == fb::ResizeMode::Nearest) set_s(n, "nearest_mode", nearest[r]);
  return Status::ok();
}

// The attributes of one table, by union type (the caller checked it against the operator).
Status map_table(const fb::OperatorNode& op, NodeProto& n, const std::string& where) {
  switch (op.attrs_type()) {
    case A::ArgMaxAttrs: {
      auto* a = op.attrs_as_ArgMaxAttrs();
      set_i(n, "axis", a->axis());
      set_i(n, "keepdims", a->keep_dims());
      return Status::ok();
    }
    case A::AveragePoolAttrs: {
      auto* a = op.attrs_as_AveragePoolAttrs();
      set_ints(n, "kernel_shape", a->kernel_size());
      RLX_TRY(set_padding(n, a->auto_pad(), a->pads(), where));
      set_ints(n, "strides", a->strides());
      if (a->count_include_pad()) set_i(n, "count_include_pad", 1);
      if (a->ceil_mode()) set_i(n, "ceil_mode", 1);
      return Status::ok();
    }
    case A::MaxPoolAttrs: {
      auto* a = op.attrs_as_MaxPoolAttrs();
      set_ints(n, "kernel_shape", a->kernel_size());
      RLX_TRY(set_padding(n, a->auto_pad(), a->pads(), where));
      set_ints(n, "strides", a->strides());
      if (a->ceil_mode()) set_i(n, "ceil_mode", 1);
      return Status::ok();
    }
    case A::BatchNormalizationAttrs: set_f(n, "epsilon", op.attrs_as_BatchNormalizationAttrs()->epsilon()); return Status::ok();
    case A::CastAttrs: {
      RLX_ASSIGN_OR_RETURN(int32_t t, onnx_dtype(op.attrs_as_CastAttrs()->to(), where));
      set_i(n, "to", t);
      return Status::ok();
    }
    case A::ConcatAttrs: set_i(n, "axis", op.attrs_as_ConcatAttrs()->axis()); return Status::ok();
    case A::ConstantOfShapeAttrs: {
      auto* a = op.attrs_as_ConstantOfShapeAttrs();
      AttributeProto* at = n.add_attribute();
      at->set_name("value");
      at->set_type(AttributeProto::TENSOR);
      ::onnx::TensorProto* t = at->mutable_t();
      t->add_dims(1);
      if (a->value_type() == fb::Scalar::IntScalar && a->value_as_IntScalar()) {
        t->set_data_type(::onnx::TensorProto::INT64);
        t->add_int64_data(a->value_as_IntScalar()->value());
      } else if (a->value_type() == fb::Scalar::FloatScalar && a->value_as_FloatScalar()) {
        t->set_data_type(::onnx::TensorProto::FLOAT);
        t->add_float_data(a->value_as_FloatScalar()->value());
      } else {
        return error(ErrorCode::format_error, where, ": the fill value is neither an int nor a float scalar");
      }
      return Status::ok();
    }
    case A::ConvAttrs: {
      auto* a = op.attrs_as_ConvAttrs();
      RLX_TRY(set_padding(n, a->auto_pad(), a->pads(), where));
      set_i(n, "group", a->groups());
      set_ints(n, "strides", a->strides());
      set_ints(n, "dilations", a->dilations());
      return Status::ok();
    }
    case A::ConvTransposeAttrs: {
      auto* a = op.attrs_as_ConvTransposeAttrs();
      RLX_TRY(set_padding(n, a->auto_pad(), a->pads(), where));
      set_i(n, "group", a->groups());
      set_ints(n, "strides", a->strides());
      set_ints(n, "dilations", a->dilations());
      set_ints(n, "output_padding", a->output_padding());
      return Status::ok();
    }
    case A::CumSumAttrs: {
      auto* a = op.attrs_as_CumSumAttrs();
      if (a->exclusive()) set_i(n, "exclusive", 1);
      if (a->reverse()) set_i(n, "reverse", 1);
      return Status::ok();
    }
    case A::DepthToSpaceAttrs: {
      auto* a = op.attrs_as_DepthToSpaceAttrs();
      if (a->mode() != fb::DepthToSpaceMode::DCR && a->mode() != fb::DepthToSpaceMode::CRD)
        return error(ErrorCode::format_error, where, ": unknown DepthToSpace mode code ", static_cast<int>(a->mode()));
      set_s(n, "mode", a->mode() == fb::DepthToSpaceMode::DCR ? "DCR" : "CRD");
      set_i(n, "blocksize", a->block_size());
      return Status::ok();
    }
    case A::DequantizeLinearAttrs: set_i(n, "axis", op.attrs_as_DequantizeLinearAttrs()->axis()); return Status::ok();
    case A::QuantizeLinearAttrs: {
      auto* a = op.attrs_as_QuantizeLinearAttrs();
      // opset 17 takes the output type from the zero point: without one it is u8
      if (a->output_dtype() && *a->output_dtype() != fb::DataType::UInt8 && n.input_size() < 3)
        return error(ErrorCode::unsupported, where, ": an output dtype other than u8 without a zero point");
      set_i(n, "axis", a->axis());
      return Status::ok();
    }
    case A::DropoutAttrs:
      if (auto s = op.attrs_as_DropoutAttrs()->seed()) set_i(n, "seed", *s);
      return Status::ok();
    case A::EinsumAttrs: {
      auto* e = op.attrs_as_EinsumAttrs()->equation();
      if (!e) return error(ErrorCode::format_error, where, ": no equation");
      set_s(n, "equation", e->str());
      return Status::ok();
    }
    case A::EluAttrs: set_f(n, "alpha", op.attrs_as_EluAttrs()->alpha()); return Status::ok();
    case A::EyeLikeAttrs: {
      auto* a = op.attrs_as_EyeLikeAttrs();
      if (a->dtype()) {
        RLX_ASSIGN_OR_RETURN(int32_t t, onnx_dtype(*a->dtype(), where));
        set_i(n, "dtype", t);
      }
      set_i(n, "k", a->k());
      return Status::ok();
    }
    case A::FlattenAttrs: set_i(n, "axis", op.attrs_as_FlattenAttrs()->axis()); return Status::ok();
    case A::GatherAttrs: set_i(n, "axis", op.attrs_as_GatherAttrs()->axis()); return Status::ok();
    case A::GatherNDAttrs: set_i(n, "batch_dims", op.attrs_as_GatherNDAttrs()->batch_dims()); return Status::ok();
    case A::GemmAttrs: {
      auto* a = op.attrs_as_GemmAttrs();
      set_f(n, "alpha", a->alpha());
      set_f(n, "beta", a->beta());
      set_i(n, "transA", a->transpose_a());
      set_i(n, "transB", a->transpose_b());
      return Status::ok();
    }
    case A::GridSampleAttrs: set_i(n, "align_corners", op.attrs_as_GridSampleAttrs()->align_corners()); return Status::ok();
    case A::GRUAttrs: {
      auto* a = op.attrs_as_GRUAttrs();
      RLX_ASSIGN_OR_RETURN(const char* d, rnn_direction(a->direction(), where));
      set_s(n, "direction", d);
      set_i(n, "hidden_size", a->hidden_size());
      set_i(n, "linear_before_reset", a->linear_before_reset());
      return Status::ok();
    }
    case A::LSTMAttrs: {
      auto* a = op.attrs_as_LSTMAttrs();
      RLX_ASSIGN_OR_RETURN(const char* d, rnn_direction(a->direction(), where));
      set_s(n, "direction", d);
      set_i(n, "hidden_size", a->hidden_size());
      return Status::ok();
    }
    case A::HardSigmoidAttrs: {
      auto* a = op.attrs_as_HardSigmoidAttrs();
      set_f(n, "alpha", a->alpha());
      set_f(n, "beta", a->beta());
      return Status::ok();
    }
    case A::LayerNormalizationAttrs: {
      auto* a = op.attrs_as_LayerNormalizationAttrs();
      set_i(n, "axis", a->axis());
      set_f(n, "epsilon", a->epsilon());
      return Status::ok();
    }
    case A::LeakyReluAttrs: set_f(n, "alpha", op.attrs_as_LeakyReluAttrs()->alpha()); return Status::ok();
    case A::ModAttrs: set_i(n, "fmod", op.attrs_as_ModAttrs()->fmod()); return Status::ok();
    case A::OneHotAttrs: set_i(n, "axis", op.attrs_as_OneHotAttrs()->axis()); return Status::ok();
    case A::PadAttrs: {
      static const char* const modes[] = {"constant", "reflect", "edge", "wrap"};
      const auto m = static_cast<size_t>(op.attrs_as_PadAttrs()->mode());
      if (m >= 4) return error(ErrorCode::format_error, where, ": unknown pad mode code ", m);
      set_s(n, "mode", modes[m]);
      return Status::ok();
    }
    case A::ReduceMeanAttrs: {
      auto* a = op.attrs_as_ReduceMeanAttrs();
      if (a->axes() && a->axes()->size() > 0) set_ints(n, "axes", a->axes());
      set_i(n, "keepdims", a->keep_dims());
      if (a->noop_with_empty_axes()) set_i(n, "noop_with_empty_axes", 1);
      return Status::ok();
    }
    case A::ReshapeAttrs:
      if (op.attrs_as_ReshapeAttrs()->allow_zero()) set_i(n, "allowzero", 1);
      return Status::ok();
    case A::ResizeAttrs: return resize_attrs(n, *op.attrs_as_ResizeAttrs(), where);
    case A::UpsampleAttrs: {
      RLX_ASSIGN_OR_RETURN(const char* mode, resize_mode(op.attrs_as_UpsampleAttrs()->mode(), where));
      set_s(n, "mode", mode);
      return Status::ok();
    }
    case A::ReverseSequenceAttrs: {
      auto* a = op.attrs_as_ReverseSequenceAttrs();
      set_i(n, "batch_axis", a->batch_axis());
      set_i(n, "time_axis", a->time_axis());
      return Status::ok();
    }
    case A::ScatterElementsAttrs: {
      auto* a = op.attrs_as_ScatterElementsAttrs();
      set_i(n, "axis", a->axis());
      RLX_ASSIGN_OR_RETURN(const char* r, reduction(a->reduction(), where));
      if (a->reduction() != fb::ScatterReduction::None) set_s(n, "reduction", r);
      return Status::ok();
    }
    case A::ScatterNDAttrs: {
      auto* a = op.attrs_as_ScatterNDAttrs();
      RLX_ASSIGN_OR_RETURN(const char* r, reduction(a->reduction(), where));
      if (a->reduction() != fb::ScatterReduction::None) set_s(n, "reduction", r);
      return Status::ok();
    }
    case A::SeluAttrs: {
      auto* a = op.attrs_as_SeluAttrs();
      set_f(n, "alpha", a->alpha());
      set_f(n, "gamma", a->gamma());
      return Status::ok();
    }
    case A::ShapeAttrs: {
      auto* a = op.attrs_as_ShapeAttrs();
      if (a->start()) set_i(n, "start", *a->start());
      if (a->end()) set_i(n, "end", *a->end());
      return Status::ok();
    }
    case A::ShrinkAttrs: {
      auto* a = op.attrs_as_ShrinkAttrs();
      set_f(n, "bias", a->bias());
      set_f(n, "lambd", a->lambd());
      return Status::ok();
    }
    case A::SoftmaxAttrs: set_i(n, "axis", op.attrs_as_SoftmaxAttrs()->axis()); return Status::ok();
    // num_outputs (opset 18) is the number of outputs, which the node already has
    case A::SplitAttrs: set_i(n, "axis", op.attrs_as_SplitAttrs()->axis()); return Status::ok();
    case A::TopKAttrs: {
      auto* a = op.attrs_as_TopKAttrs();
      set_i(n, "axis", a->axis());
      set_i(n, "largest", a->largest());
      set_i(n, "sorted", a->sorted());
      return Status::ok();
    }
    case A::TransposeAttrs: set_ints(n, "perm", op.attrs_as_TransposeAttrs()->perm()); return Status::ok();
    case A::TriluAttrs: set_i(n, "upper", op.attrs_as_TriluAttrs()->upper()); return Status::ok();
    case A::CastLikeAttrs: case A::IsInfAttrs: return Status::ok();
    default: return error(ErrorCode::unsupported, where, ": attribute table ", fb::EnumNameOperatorAttrs(op.attrs_type()),
                          " is not mapped");
  }
}

}  // namespace

Status attrs_to_onnx(const fb::OperatorNode& op, NodeProto& n, const std::string& where) {
  bool refused = false;
  const A want = expected_attrs(op.type(), refused);
  if (refused)
    return error(ErrorCode::unsupported, where, ": rlx does not read this rten operator (subgraphs, sequences, "
                 "random ops, DFT and ops newer than ONNX opset 17 are refused)");
  const A have = op.attrs_type();
  if (have != A::NONE && !op.attrs())
    return error(ErrorCode::format_error, where, ": the attribute table has a type but no contents");
  if (have == A::NONE) {
    if (want == A::NONE || attrs_optional(op.type())) return Status::ok();
    return error(ErrorCode::format_error, where, ": no attribute table (rten writes ", fb::EnumNameOperatorAttrs(want),
                 " for this operator)");
  }
  if (have != want) {
    const char* h = fb::EnumNameOperatorAttrs(have);
    return error(ErrorCode::format_error, where, ": attribute table ", *h ? h : "of unknown type",
                 want == A::NONE ? std::string(", but the operator takes none")
                                 : cat(", expected ", fb::EnumNameOperatorAttrs(want)));
  }
  return map_table(op, n, where);
}

}  // namespace rlx::rten_io
