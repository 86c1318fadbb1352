#!/usr/bin/python3
"""Writes node tests for ONNX opsets 18 to 23 into OUT_DIR/node, with ONNX Runtime as the oracle.

Usage: /usr/bin/python3 tests/onnx/generate_opset_tests.py OUT_DIR NPM_DIR

Debian's python3-onnx (1.12) knows opsets up to 17 and cannot generate ONNX's own node tests
for the later ones, but its helper writes any node, so each case here is a small model at the
opset where an op was added or changed, with random inputs. ONNX Runtime for Node (NPM_DIR, from
scripts/install-npm.sh) computes the expected outputs. The layout is ONNX's node-test layout
(model.onnx, test_data_set_0/input_N.pb and output_N.pb), run by tests/onnx/node_tests.cpp.

When ONNX Runtime cannot be run, OUT_DIR/oracle_missing says why and no case is written (the
test then fails in CI and skips elsewhere, saying so). A case ONNX Runtime refuses is an error
of this file: generation stops, naming the case and ORT's message.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT, NPM = sys.argv[1], sys.argv[2]
NODE_DIR = os.path.join(OUT, "node")
INT4, UINT4 = 22, 21  # TensorProto.DataType values onnx 1.12 does not name
IR_FOR_OPSET = {9: 4, 11: 6, 13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11}

ORT_TYPES = {np.float32: "float32", np.float64: "float64", np.int8: "int8", np.uint8: "uint8",
             np.int16: "int16", np.uint16: "uint16", np.int32: "int32", np.int64: "int64",
             np.bool_: "bool", np.float16: "float16"}
FROM_ORT = {v: k for k, v in ORT_TYPES.items()}

rng = np.random.default_rng(2026)
cases = []


def f32(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def i64(*values):
    return np.array(values, dtype=np.int64)


def case(name, opset, nodes, inputs, outputs, inits=(), out_types=None, in_shapes=None):
    """One model: `inputs` are (name, array) fed at run time, `inits` (name, array or TensorProto);
    `in_shapes` declares an input's shape with symbolic dims (names) instead of the array's."""
    cases.append(dict(name=name, opset=opset, nodes=nodes, inputs=inputs, outputs=outputs, inits=list(inits),
                      out_types=out_types or {}, in_shapes=in_shapes or {}))


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def packed4(values, signed):
    """An INT4/UINT4 initializer's TensorProto from small integers (two per byte, low nibble first)."""
    v = np.asarray(values).astype(np.int64)
    flat = (v.reshape(-1) & 0xF).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    raw = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()
    t = TensorProto()
    t.data_type = INT4 if signed else UINT4
    t.dims.extend(v.shape)
    t.raw_data = raw
    return t


# --- opset 18 ------------------------------------------------------------------------------
x = f32(2, 3, 4)
for op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
           "ReduceProd", "ReduceSumSquare"):
    pos = np.abs(x) + 0.1 if op == "ReduceLogSum" else x
    case(f"{op.lower()}_axes_input", 18, [node(op, ["x", "axes"], ["y"], keepdims=0)], [("x", pos)], ["y"],
         [("axes", i64(0, -1))])
    case(f"{op.lower()}_noop_empty_axes", 18, [node(op, ["x"], ["y"], noop_with_empty_axes=1)], [("x", pos)], ["y"])
case("reducemean_axes_keepdims", 18, [node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)], [("x", x)], ["y"],
     [("axes", i64(1))])
case("split_num_outputs_even", 18, [node("Split", ["x"], ["a", "b"], axis=2, num_outputs=2)], [("x", x)], ["a", "b"])
case("split_num_outputs_uneven", 18, [node("Split", ["x"], ["a", "b", "c"], axis=-1, num_outputs=3)],
     [("x", f32(2, 7))], ["a", "b", "c"])
for mode in ("constant", "reflect", "edge"):
    case(f"pad_axes_{mode}", 18, [node("Pad", ["x", "pads", "", "axes"], ["y"], mode=mode)], [("x", f32(2, 3, 4))],
         ["y"], [("pads", i64(1, 2, 2, 1)), ("axes", i64(1, -1))])
case("pad_axes_constant_value", 18, [node("Pad", ["x", "pads", "v", "axes"], ["y"])], [("x", f32(3, 4))], ["y"],
     [("pads", i64(2, 1)), ("v", np.array(1.5, np.float32)), ("axes", i64(0))])
for red in ("max", "min"):
    case(f"scatterelements_{red}", 18,
         [node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=red)],
         [("x", f32(3, 5)), ("u", f32(3, 2))], ["y"], [("i", np.array([[0, 4], [2, 2], [1, 0]], np.int64))])
    case(f"scatternd_{red}", 18, [node("ScatterND", ["x", "i", "u"], ["y"], reduction=red)],
         [("x", f32(4, 3)), ("u", f32(3, 3))], ["y"], [("i", np.array([[1], [3], [1]], np.int64))])
# the same reductions (and mul) with the indices fed at run time: duplicates, negative indices,
# an int32 data tensor, ScatterND over 2-D index tuples with trailing row elements
for red in ("max", "min", "mul"):
    case(f"scatterelements_{red}_runtime_indices", 18,
         [node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=red)],
         [("x", f32(3, 5)), ("i", np.array([[0, -1, 4], [2, 2, 2], [1, 0, -5]], np.int64)), ("u", f32(3, 3, lo=-2, hi=2))],
         ["y"])
    case(f"scatternd_{red}_runtime_indices", 18, [node("ScatterND", ["x", "i", "u"], ["y"], reduction=red)],
         [("x", f32(2, 3, 4)), ("i", np.array([[1, 2], [0, -1], [1, 2], [1, -1]], np.int64)), ("u", f32(4, 4, lo=-2, hi=2))],
         ["y"])
xi = rng.integers(-50, 50, size=(6,)).astype(np.int32)
case("scatterelements_mul_runtime_indices_int32", 18,
     [node("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction="mul")],
     [("x", xi), ("i", np.array([5, 0, 5, 2], np.int64)), ("u", np.array([3, -2, 2, 7], np.int32))], ["y"],
     out_types={"y": TensorProto.INT32})
# 3-D convolution and transposed convolution (opset 11 semantics; rlx stacks the depth taps
# into one 2-D convolution): pads, strides, dilations, groups, bias, output_padding, auto_pad
case("conv3d_pads_strides_dilations_groups_bias", 11,
     [node("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 2, 0, 1, 1], strides=[2, 1, 2], dilations=[1, 2, 1], group=2)],
     [("x", f32(2, 4, 7, 6, 9))], ["y"], [("w", f32(6, 2, 3, 2, 3)), ("b", f32(6))])
case("conv3d_same_upper", 11, [node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2, 1])],
     [("x", f32(1, 3, 5, 6, 4))], ["y"], [("w", f32(2, 3, 2, 3, 3))])
case("convtranspose3d_strides_output_padding_groups_bias", 11,
     [node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 1, 3], output_padding=[1, 0, 2], pads=[1, 0, 1, 0, 1, 2],
           group=2)],
     [("x", f32(2, 4, 3, 4, 3))], ["y"], [("w", f32(4, 3, 3, 2, 3)), ("b", f32(6))])
case("convtranspose3d_dilations_output_shape", 11,
     [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2, 2], dilations=[2, 1, 1], output_shape=[8, 7, 6])],
     [("x", f32(1, 2, 3, 3, 3))], ["y"], [("w", f32(2, 2, 2, 3, 2))])
case("mish", 18, [node("Mish", ["x"], ["y"])], [("x", f32(3, 4, lo=-5, hi=5))], ["y"])
a = rng.integers(-100, 100, size=(3, 4)).astype(np.int32)
b = rng.integers(-100, 100, size=(3, 4)).astype(np.int32)
for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
    case(op.lower(), 18, [node(op, ["a", "b"], ["y"])], [("a", a), ("b", b)], ["y"], out_types={"y": TensorProto.INT32})
    case(op.lower() + "_u8_broadcast", 18, [node(op, ["a", "b"], ["y"])],
         [("a", rng.integers(0, 255, size=(2, 3), dtype=np.uint8)), ("b", rng.integers(0, 255, size=(3,), dtype=np.uint8))],
         ["y"], out_types={"y": TensorProto.UINT8})
case("bitwisenot", 18, [node("BitwiseNot", ["a"], ["y"])], [("a", a)], ["y"], out_types={"y": TensorProto.INT32})
case("centercroppad_crop_and_pad", 18, [node("CenterCropPad", ["x", "s"], ["y"])], [("x", f32(5, 4, 3))], ["y"],
     [("s", i64(3, 7, 3))])
case("centercroppad_axes", 18, [node("CenterCropPad", ["x", "s"], ["y"], axes=[-2])], [("x", f32(2, 5, 3))], ["y"],
     [("s", i64(2))])
case("col2im", 18, [node("Col2Im", ["x", "image", "block"], ["y"])], [("x", f32(1, 2 * 2 * 2, 12))], ["y"],
     [("image", i64(4, 5)), ("block", i64(2, 2))])
case("col2im_strides_pads_dilations", 18,
     [node("Col2Im", ["x", "image", "block"], ["y"], strides=[2, 1], pads=[1, 0, 1, 1], dilations=[1, 2])],
     [("x", f32(2, 3 * 2 * 2, 3 * 5))], ["y"], [("image", i64(5, 6)), ("block", i64(2, 2))])
for k, axes in ((18, None), (21, None)):
    c = 4
    scale = f32(2 if k == 18 else c, lo=0.5, hi=1.5)
    bias = f32(2 if k == 18 else c)
    case(f"groupnormalization_opset{k}", k,
         [node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-5)],
         [("x", f32(2, c, 3, 3))], ["y"], [("s", scale), ("b", bias)])
case("resize_axes_linear", 18,
     [node("Resize", ["x", "", "scales"], ["y"], mode="linear", axes=[2, 3])], [("x", f32(1, 2, 4, 4))], ["y"],
     [("scales", np.array([2.0, 1.5], np.float32))])
for policy in ("not_larger", "not_smaller"):
    case(f"resize_keep_aspect_{policy}", 18,
         [node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest", axes=[2, 3], keep_aspect_ratio_policy=policy)],
         [("x", f32(1, 1, 4, 6))], ["y"], [("sizes", i64(6, 6))])
case("resize_antialias_linear_down", 18,
     [node("Resize", ["x", "", "scales"], ["y"], mode="linear", antialias=1)], [("x", f32(1, 1, 8, 8))], ["y"],
     [("scales", np.array([1, 1, 0.5, 0.375], np.float32))])

# LpPool with opset 18's dilations, 1-D with auto_pad, p = 1, 2 and 3 (pow), and GlobalLpPool
case("lppool_2d_dilations_p2", 18,
     [node("LpPool", ["x"], ["y"], kernel_shape=[2, 3], dilations=[2, 1], strides=[1, 2], pads=[1, 0, 0, 1], p=2)],
     [("x", f32(2, 3, 7, 8))], ["y"])
case("lppool_1d_same_upper_p3", 18,
     [node("LpPool", ["x"], ["y"], kernel_shape=[3], strides=[2], auto_pad="SAME_UPPER", p=3)],
     [("x", f32(1, 2, 9))], ["y"])
case("lppool_2d_p1", 18, [node("LpPool", ["x"], ["y"], kernel_shape=[3, 3], p=1)], [("x", f32(1, 2, 5, 6))],
     ["y"])
case("globallppool_p3", 18, [node("GlobalLpPool", ["x"], ["y"], p=3)], [("x", f32(2, 3, 4, 5))], ["y"])

# --- opset 19 ------------------------------------------------------------------------------
case("pad_wrap", 19, [node("Pad", ["x", "pads"], ["y"], mode="wrap")], [("x", f32(3, 4))], ["y"],
     [("pads", i64(1, 2, 2, 3))])
case("averagepool_dilations", 19,
     [node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2], strides=[1, 1])],
     [("x", f32(1, 2, 6, 6))], ["y"])
case("resize_half_pixel_symmetric", 19,
     [node("Resize", ["x", "", "scales"], ["y"], mode="linear", coordinate_transformation_mode="half_pixel_symmetric")],
     [("x", f32(1, 1, 4, 4))], ["y"], [("scales", np.array([1, 1, 2.5, 1.5], np.float32))])
case("cast_saturate_ignored_f32_to_f16", 19, [node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16, saturate=1)],
     [("x", f32(3, 4))], ["y"], out_types={"y": TensorProto.FLOAT16})
case("reshape_shape_size_opset19", 19,
     [node("Shape", ["x"], ["s"], start=1), node("Reshape", ["x", "t"], ["r"]), node("Size", ["x"], ["n"])],
     [("x", f32(2, 3, 4))], ["s", "r", "n"], [("t", i64(6, -1))],
     out_types={"s": TensorProto.INT64, "n": TensorProto.INT64})

# DeformConv: offsets reaching outside the image (corners there add 0); pads, strides,
# dilations, a bias, a mask, two groups and two offset groups
case("deformconv_basic", 19, [node("DeformConv", ["x", "w", "off"], ["y"], kernel_shape=[3, 3])],
     [("x", f32(1, 2, 5, 5)), ("w", f32(3, 2, 3, 3)), ("off", f32(1, 18, 3, 3, lo=-2.5, hi=2.5))], ["y"])
oh, ow = (6 + 2 - 2) // 2 + 1, (7 + 2 - 5) // 1 + 1
case("deformconv_groups_mask_bias", 19,
     [node("DeformConv", ["x", "w", "off", "b", "mask"], ["y"], group=2, offset_group=2, pads=[1, 0, 1, 2],
           strides=[2, 1], dilations=[1, 2])],
     [("x", f32(2, 4, 6, 7)), ("w", f32(4, 2, 2, 3)), ("off", f32(2, 2 * 2 * 6, oh, ow, lo=-3, hi=3)),
      ("b", f32(4)), ("mask", f32(2, 2 * 6, oh, ow, lo=0, hi=1))], ["y"])

# --- opset 20 ------------------------------------------------------------------------------
for approx in ("none", "tanh"):
    case(f"gelu_{approx}", 20, [node("Gelu", ["x"], ["y"], approximate=approx)], [("x", f32(3, 5, lo=-4, hi=4))], ["y"])
for ac in (0, 1):
    case(f"affinegrid_2d_align{ac}", 20, [node("AffineGrid", ["theta", "size"], ["g"], align_corners=ac)],
         [("theta", f32(2, 2, 3))], ["g"], [("size", i64(2, 3, 4, 5))])
    case(f"affinegrid_3d_align{ac}", 20, [node("AffineGrid", ["theta", "size"], ["g"], align_corners=ac)],
         [("theta", f32(1, 3, 4))], ["g"], [("size", i64(1, 1, 2, 3, 4))])
for mode in ("linear", "nearest", "cubic"):
    for pad in ("zeros", "border", "reflection"):
        case(f"gridsample20_{mode}_{pad}", 20,
             [node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=pad, align_corners=0)],
             [("x", f32(1, 2, 4, 5)), ("g", f32(1, 3, 3, 2, lo=-1.2, hi=1.2))], ["y"])
signal = f32(2, 8, 1)
case("dft20_axis_input", 20, [node("DFT", ["x", "", "axis"], ["y"])], [("x", signal)], ["y"],
     [("axis", np.array(1, np.int64))])
case("dft20_default_axis_onesided", 20, [node("DFT", ["x"], ["y"], onesided=1)], [("x", f32(3, 6, 1))], ["y"])
case("dft20_length_inverse", 20, [node("DFT", ["x", "n", "axis"], ["y"], inverse=1)], [("x", f32(2, 5, 2))], ["y"],
     [("n", np.array(6, np.int64)), ("axis", np.array(-2, np.int64))])
xs = np.array([[1.0, np.inf, -np.inf], [np.nan, 0.0, -2.0]], np.float32)
case("isinf_isnan_opset20", 20, [node("IsInf", ["x"], ["a"], detect_negative=0), node("IsNaN", ["x"], ["b"])],
     [("x", xs)], ["a", "b"], out_types={"a": TensorProto.BOOL, "b": TensorProto.BOOL})
case("constantofshape_opset20", 20,
     [node("ConstantOfShape", ["s"], ["y"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.5]))], [], ["y"],
     [("s", i64(2, 3))])

# --- opset 21 ------------------------------------------------------------------------------
w = rng.integers(-128, 127, size=(4, 6)).astype(np.int8)
case("dequantizelinear_blocked", 21, [node("DequantizeLinear", ["w", "s", "z"], ["y"], axis=1, block_size=3)], [],
     ["y"], [("w", w), ("s", f32(4, 2, lo=0.01, hi=0.1)), ("z", rng.integers(-5, 5, size=(4, 2)).astype(np.int8))])
w4 = rng.integers(-8, 8, size=(6, 4))
case("dequantizelinear_int4_blocked", 21, [node("DequantizeLinear", ["w", "s"], ["y"], axis=0, block_size=2)], [],
     ["y"], [("w", packed4(w4, True)), ("s", f32(3, 4, lo=0.01, hi=0.1))])
case("dequantizelinear_uint4_per_axis", 21, [node("DequantizeLinear", ["w", "s", "z"], ["y"], axis=1)], [], ["y"],
     [("w", packed4(rng.integers(0, 16, size=(3, 4)), False)), ("s", f32(4, lo=0.01, hi=0.1)),
      ("z", packed4(rng.integers(0, 16, size=(4,)), False))])
case("quantizelinear_blocked", 21, [node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)],
     [("x", f32(3, 4, lo=-3, hi=3))], ["y"], [("s", f32(3, 2, lo=0.02, hi=0.05)), ("z", np.zeros((3, 2), np.int8))],
     out_types={"y": TensorProto.INT8})
case("quantizelinear_output_dtype_uint8", 21,
     [node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=TensorProto.UINT8)], [("x", f32(3, 4, lo=0, hi=3))],
     ["y"], [("s", np.array(0.02, np.float32))], out_types={"y": TensorProto.UINT8})
case("flatten_squeeze_transpose_opset21", 21,
     [node("Flatten", ["x"], ["f"], axis=2), node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
      node("Unsqueeze", ["x", "ax"], ["u"]), node("Squeeze", ["u", "ax"], ["s"])],
     [("x", f32(2, 3, 4))], ["f", "t", "s"], [("ax", i64(0))])

# --- opset 22 ------------------------------------------------------------------------------
case("conv_opset22", 22, [node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [("x", f32(1, 2, 5, 5))], ["y"],
     [("w", f32(3, 2, 3, 3))])
case("activations_opset22", 22,
     [node("Mish", ["x"], ["a"]), node("HardSwish", ["x"], ["b"]), node("Softplus", ["x"], ["c"]),
      node("Elu", ["x"], ["d"]), node("ThresholdedRelu", ["x"], ["e"], alpha=0.2)],
     [("x", f32(3, 4, lo=-3, hi=3))], ["a", "b", "c", "d", "e"])
case("pools_opset22", 22,
     [node("MaxPool", ["x"], ["a"], kernel_shape=[2, 2]), node("AveragePool", ["x"], ["b"], kernel_shape=[3, 3]),
      node("GlobalAveragePool", ["x"], ["c"]), node("InstanceNormalization", ["x", "s", "bb"], ["d"])],
     [("x", f32(1, 2, 5, 5))], ["a", "b", "c", "d"], [("s", f32(2)), ("bb", f32(2))])

# --- opset 23 ------------------------------------------------------------------------------
case("rmsnormalization_last_axis", 23, [node("RMSNormalization", ["x", "s"], ["y"], epsilon=1e-5)],
     [("x", f32(2, 3, 8))], ["y"], [("s", f32(8, lo=0.5, hi=1.5))])
case("rmsnormalization_axis1", 23, [node("RMSNormalization", ["x", "s"], ["y"], axis=1)],
     [("x", f32(2, 3, 4))], ["y"], [("s", f32(3, 4))])
B, S, H, D = 2, 5, 3, 8
pos = np.tile(np.arange(S, dtype=np.int64), (B, 1))
cos_cache = f32(S + 3, D // 2)
sin_cache = f32(S + 3, D // 2)
for inter in (0, 1):
    case(f"rotaryembedding_4d_interleaved{inter}", 23,
         [node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], interleaved=inter)],
         [("x", f32(B, H, S, D)), ("pos", pos + 1)], ["y"], [("cos", cos_cache), ("sin", sin_cache)])
case("rotaryembedding_3d_num_heads", 23,
     [node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], num_heads=H)],
     [("x", f32(B, S, H * D)), ("pos", pos)], ["y"], [("cos", cos_cache), ("sin", sin_cache)])
case("rotaryembedding_partial_no_position_ids", 23,
     [node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], rotary_embedding_dim=4)],
     [("x", f32(B, H, S, D)), ("cos", f32(B, S, 2)), ("sin", f32(B, S, 2))], ["y"])
Sq, Skv, Hq, Hkv, E = 4, 6, 4, 2, 8
q4, k4, v4 = f32(B, Hq, Sq, E), f32(B, Hkv, Skv, E), f32(B, Hkv, Skv, E)
case("attention_4d_gqa", 23, [node("Attention", ["q", "k", "v"], ["y"])], [("q", q4), ("k", k4), ("v", v4)], ["y"])
case("attention_4d_causal_scale", 23, [node("Attention", ["q", "k", "v"], ["y"], is_causal=1, scale=0.2)],
     [("q", f32(B, Hq, Sq, E)), ("k", f32(B, Hq, Sq, E)), ("v", f32(B, Hq, Sq, E))], ["y"])
case("attention_4d_float_mask_softcap", 23, [node("Attention", ["q", "k", "v", "m"], ["y"], softcap=2.0)],
     [("q", q4), ("k", k4), ("v", v4), ("m", f32(Sq, Skv, lo=-2, hi=0))], ["y"])
mask = rng.random((B, 1, Sq, Skv)) > 0.3
mask[..., 0] = True
case("attention_4d_bool_mask", 23, [node("Attention", ["q", "k", "v", "m"], ["y"])],
     [("q", q4), ("k", k4), ("v", v4), ("m", mask)], ["y"])
case("attention_3d_heads", 23, [node("Attention", ["q", "k", "v"], ["y"], q_num_heads=Hq, kv_num_heads=Hkv)],
     [("q", f32(B, Sq, Hq * E)), ("k", f32(B, Skv, Hkv * E)), ("v", f32(B, Skv, Hkv * 6))], ["y"])
case("attention_past_kv", 23,
     [node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "k_out", "v_out"], is_causal=1)],
     [("q", f32(B, Hq, 2, E)), ("k", f32(B, Hq, 2, E)), ("v", f32(B, Hq, 2, E)), ("pk", f32(B, Hq, 3, E)),
      ("pv", f32(B, Hq, 3, E))], ["y", "k_out", "v_out"])
case("reshape_identity_opset23", 23,
     [node("Reshape", ["x", "t"], ["r"]), node("Identity", ["r"], ["y"]), node("Cast", ["y"], ["c"], to=TensorProto.DOUBLE)],
     [("x", f32(2, 6))], ["c"], [("t", i64(3, 4))], out_types={"c": TensorProto.DOUBLE})


# --- control flow (any opset; compiled by rlx: both branches selected, or unrolled) ----------
def vi(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


# If on a run-time condition, branches reading outer-scope values
then_g = helper.make_graph([node("Mul", ["x", "two"], ["t"])], "then", [], [vi("t", shape=[3, 4])])
else_g = helper.make_graph([node("Add", ["x", "w"], ["e"])], "else", [], [vi("e", shape=[3, 4])])
for cv in (True, False):
    case(f"if_runtime_condition_{str(cv).lower()}", 18,
         [node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
         [("c", np.array(cv)), ("x", f32(3, 4))], ["y"], [("two", np.array(2.0, np.float32)), ("w", f32(3, 4))])
# If on a run-time condition whose branches make sequences of the same length (rlx selects them
# element by element), read back by ConcatFromSequence; and one whose branches make sequences of
# different lengths (rlx needs the condition at import: the run-time harness folds it in)
seq_t = helper.make_tensor_sequence_value_info
then_s = helper.make_graph([node("Mul", ["x", "two"], ["t"]), node("SequenceConstruct", ["t", "x"], ["ts"])],
                           "then_s", [], [seq_t("ts", TensorProto.FLOAT, [3, 4])])
else_s = helper.make_graph([node("Add", ["x", "w"], ["e"]), node("SequenceConstruct", ["x", "e"], ["es"])],
                           "else_s", [], [seq_t("es", TensorProto.FLOAT, [3, 4])])
else_s3 = helper.make_graph([node("Add", ["x", "w"], ["e"]), node("SequenceConstruct", ["x", "e", "x"], ["es"])],
                            "else_s3", [], [seq_t("es", TensorProto.FLOAT, [3, 4])])
for cv in (True, False):
    for tag, eg in (("same_length", else_s), ("other_length", else_s3)):
        case(f"if_runtime_condition_sequences_{tag}_{str(cv).lower()}", 18,
             [node("If", ["c"], ["s"], then_branch=then_s, else_branch=eg),
              node("ConcatFromSequence", ["s"], ["y"], axis=0)],
             [("c", np.array(cv)), ("x", f32(3, 4))], ["y"], [("two", np.array(2.0, np.float32)), ("w", f32(3, 4))])
# Loop: a known trip count, a loop-carried value, a scan output, an outer-scope weight, and an If
# nested in the body on the iteration number
inner_then = helper.make_graph([node("Mul", ["s_in", "w"], ["s_odd"])], "odd", [], [vi("s_odd", shape=[2, 3])])
inner_else = helper.make_graph([node("Add", ["s_in", "w"], ["s_even"])], "even", [], [vi("s_even", shape=[2, 3])])
body = helper.make_graph(
    [node("Identity", ["cond_in"], ["cond_out"]),
     node("Mod", ["i", "two_i"], ["parity"]), node("Cast", ["parity"], ["odd"], to=TensorProto.BOOL),
     node("If", ["odd"], ["s_next"], then_branch=inner_then, else_branch=inner_else),
     node("ReduceSum", ["s_next"], ["total"], keepdims=0)],
    "body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("s_in", shape=[2, 3])],
    [vi("cond_out", TensorProto.BOOL, []), vi("s_next", shape=[2, 3]), vi("total", shape=[])])
case("loop_state_scan_nested_if", 19, [node("Loop", ["M", "", "s0"], ["s", "totals"], body=body)],
     [("s0", f32(2, 3))], ["s", "totals"], [("M", np.array(5, np.int64)), ("w", f32(2, 3)), ("two_i", np.array(2, np.int64))])
# Loop that stops early: its condition comes from a counter known at import
body2 = helper.make_graph(
    [node("Add", ["k_in", "one"], ["k_out"]), node("Less", ["k_out", "three"], ["cond_out"]),
     node("Mul", ["x_in", "half"], ["x_out"])],
    "body2", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("k_in", TensorProto.INT64, []),
              vi("x_in", shape=[4])],
    [vi("cond_out", TensorProto.BOOL, []), vi("k_out", TensorProto.INT64, []), vi("x_out", shape=[4])])
case("loop_condition_ends_early", 21, [node("Loop", ["M", "c0", "k0", "x"], ["k", "y"], body=body2)],
     [("x", f32(4))], ["k", "y"],
     [("M", np.array(10, np.int64)), ("c0", np.array(True)), ("k0", np.array(0, np.int64)),
      ("one", np.array(1, np.int64)), ("three", np.array(3, np.int64)), ("half", np.array(0.5, np.float32))],
     out_types={"k": TensorProto.INT64})
# Loops whose trip count or condition is known only at run time ("runtime_loop" in the name:
# tests/onnx/node_tests.cpp also runs these without folding the inputs in, so the loop runs on
# the host iteration by iteration, besides the unrolled form rlx run gets by folding M)
rl_body = helper.make_graph(
    [node("Identity", ["cond_in"], ["cond_out"]), node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
     node("Mul", ["y_in", "w"], ["yw"]), node("Add", ["yw", "x"], ["yx"]), node("Add", ["yx", "fi"], ["y_out"]),
     node("ReduceSum", ["y_out"], ["total"], keepdims=0)],
    "rl_body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("y_in", shape=[2, 3])],
    [vi("cond_out", TensorProto.BOOL, []), vi("y_out", shape=[2, 3]), vi("total", shape=[])])
for trips in (0, 4):
    case(f"runtime_loop_trip_count_scan_outer_values_{trips}", 13,
         [node("Loop", ["M", "", "y0"], ["y", "totals"], body=rl_body)],
         [("M", np.array(trips, np.int64)), ("y0", f32(2, 3)), ("x", f32(2, 3))], ["y", "totals"],
         [("w", f32(2, 3))])
# a while loop: halve s until its L1 norm drops below the threshold (a condition of the data)
wl_body = helper.make_graph(
    [node("Mul", ["s_in", "half"], ["s_out"]), node("ReduceL1", ["s_out"], ["l1"], keepdims=0),
     node("Greater", ["l1", "thr"], ["cond_out"]), node("Identity", ["l1"], ["l1_scan"])],
    "wl_body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("s_in", shape=[5])],
    [vi("cond_out", TensorProto.BOOL, []), vi("s_out", shape=[5]), vi("l1_scan", shape=[])])
case("runtime_loop_while_condition_of_data", 13, [node("Loop", ["", "c0", "s0"], ["s", "norms"], body=wl_body)],
     [("c0", np.array(True)), ("s0", f32(5, lo=-40, hi=40)), ("thr", np.array(0.3, np.float32))], ["s", "norms"],
     [("half", np.array(0.5, np.float32))])
# a run-time loop inside a run-time loop (the inner trip count an input read from the outer
# scope), with an If on the iteration's parity in the inner body
par_then = helper.make_graph([node("Mul", ["t_in", "two"], ["t_odd"])], "odd2", [], [vi("t_odd", shape=[3])])
par_else = helper.make_graph([node("Sub", ["t_in", "one_f"], ["t_even"])], "even2", [], [vi("t_even", shape=[3])])
inner = helper.make_graph(
    [node("Identity", ["ic"], ["ic_out"]), node("Mod", ["j", "two_i"], ["jp"]),
     node("Cast", ["jp"], ["odd"], to=TensorProto.BOOL),
     node("If", ["odd"], ["t_out"], then_branch=par_then, else_branch=par_else)],
    "inner", [vi("j", TensorProto.INT64, []), vi("ic", TensorProto.BOOL, []), vi("t_in", shape=[3])],
    [vi("ic_out", TensorProto.BOOL, []), vi("t_out", shape=[3])])
outer = helper.make_graph(
    [node("Identity", ["oc"], ["oc_out"]), node("Loop", ["N", "", "u_in"], ["u_mid"], body=inner),
     node("Add", ["u_mid", "x"], ["u_out"]), node("ReduceMax", ["u_out"], ["peak"], keepdims=0)],
    "outer", [vi("k", TensorProto.INT64, []), vi("oc", TensorProto.BOOL, []), vi("u_in", shape=[3])],
    [vi("oc_out", TensorProto.BOOL, []), vi("u_out", shape=[3]), vi("peak", shape=[])])
case("runtime_loop_nested_with_if", 13, [node("Loop", ["M", "", "u0"], ["u", "peaks"], body=outer)],
     [("M", np.array(3, np.int64)), ("N", np.array(4, np.int64)), ("u0", f32(3)), ("x", f32(3))], ["u", "peaks"],
     [("two", np.array(2.0, np.float32)), ("one_f", np.array(1.0, np.float32)), ("two_i", np.array(2, np.int64))])
# recurrent layers over a sequence (and batch) length declared symbolic: unrolled when rlx run
# binds it from the input, a loop run by the host per direction when imported without inputs
Hh, Ii = 4, 3
case("lstm_runtime_loop_bidirectional_peepholes", 14,
     [node("LSTM", ["x", "w", "r", "b", "", "h0", "c0", "p"], ["y", "yh", "yc"], hidden_size=Hh,
           direction="bidirectional")],
     [("x", f32(5, 2, Ii)), ("h0", f32(2, 2, Hh)), ("c0", f32(2, 2, Hh))], ["y", "yh", "yc"],
     [("w", f32(2, 4 * Hh, Ii)), ("r", f32(2, 4 * Hh, Hh)), ("b", f32(2, 8 * Hh)), ("p", f32(2, 3 * Hh))],
     in_shapes={"x": ["seq", "batch", Ii], "h0": [2, "batch", Hh], "c0": [2, "batch", Hh]})
case("gru_runtime_loop_reverse_linear_before_reset", 14,
     [node("GRU", ["x", "w", "r", "b"], ["y", "yh"], hidden_size=Hh, direction="reverse", linear_before_reset=1)],
     [("x", f32(6, 3, Ii))], ["y", "yh"],
     [("w", f32(1, 3 * Hh, Ii)), ("r", f32(1, 3 * Hh, Hh)), ("b", f32(1, 6 * Hh))],
     in_shapes={"x": ["seq", 3, Ii]})
case("rnn_runtime_loop_clip_initial_state", 14,
     [node("RNN", ["x", "w", "r", "", "", "h0"], ["y", "yh"], hidden_size=Hh, clip=0.7)],
     [("x", f32(7, 2, Ii, lo=-3, hi=3)), ("h0", f32(1, 2, Hh))], ["y", "yh"],
     [("w", f32(1, Hh, Ii)), ("r", f32(1, Hh, Hh))],
     in_shapes={"x": ["seq", "batch", Ii], "h0": [1, "batch", Hh]})
# Scan: a running sum over axis 1 in reverse, a second scan input forwards, outputs on axis 1
sbody = helper.make_graph(
    [node("Add", ["acc_in", "a_t"], ["acc_out"]), node("Mul", ["acc_out", "b_t"], ["o_t"])],
    "sbody", [vi("acc_in", shape=[2]), vi("a_t", shape=[2]), vi("b_t", shape=[2])],
    [vi("acc_out", shape=[2]), vi("o_t", shape=[2])])
case("scan_reverse_axes", 21,
     [node("Scan", ["acc0", "a", "b"], ["acc", "o"], body=sbody, num_scan_inputs=2, scan_input_axes=[1, 0],
           scan_input_directions=[1, 0], scan_output_axes=[1], scan_output_directions=[0])],
     [("acc0", f32(2)), ("a", f32(2, 5)), ("b", f32(5, 2))], ["acc", "o"])

# --- sequences inside a graph (tensor inputs and outputs; lists compiled at import) ----------
case("split_to_sequence_at_length", 18,
     [node("SplitToSequence", ["x"], ["s"], axis=1, keepdims=0), node("SequenceAt", ["s", "last"], ["y"]),
      node("SequenceLength", ["s"], ["n"])],
     [("x", f32(2, 3, 4))], ["y", "n"], [("last", np.array(-1, np.int64))], out_types={"n": TensorProto.INT64})
case("split_to_sequence_sizes_stack", 18,
     [node("SplitToSequence", ["x", "sp"], ["s"], axis=-1), node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1)],
     [("x", f32(3, 4))], ["y"], [("sp", i64(2, 2))])
case("sequence_construct_insert_erase_concat", 19,
     [node("SequenceConstruct", ["a", "b", "c"], ["s0"]), node("SequenceInsert", ["s0", "d", "one"], ["s1"]),
      node("SequenceErase", ["s1", "zero"], ["s2"]), node("ConcatFromSequence", ["s2"], ["y"], axis=1)],
     [("a", f32(2, 3)), ("b", f32(2, 1)), ("c", f32(2, 2)), ("d", f32(2, 4))], ["y"],
     [("one", np.array(1, np.int64)), ("zero", np.array(0, np.int64))])
lbody = helper.make_graph(
    [node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT), node("Mul", ["x", "fi"], ["xi"]),
     node("SequenceInsert", ["seq_in", "xi"], ["seq_out"]), node("Identity", ["cond_in"], ["cond_out"])],
    "lbody", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
              helper.make_tensor_sequence_value_info("seq_in", TensorProto.FLOAT, None)],
    [vi("cond_out", TensorProto.BOOL, []), helper.make_tensor_sequence_value_info("seq_out", TensorProto.FLOAT, None)])
case("loop_builds_a_sequence", 20,
     [node("SequenceEmpty", [], ["e"], dtype=TensorProto.FLOAT), node("Loop", ["M", "", "e"], ["s"], body=lbody),
      node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1)],
     [("x", f32(3))], ["y"], [("M", np.array(3, np.int64))])
mbody = helper.make_graph([node("Add", ["el", "t"], ["out_el"])], "mbody", [vi("el", shape=[2, 2]), vi("t", shape=[2, 2])],
                          [vi("out_el", shape=[2, 2])])
case("sequence_map_add_tensor", 18,
     [node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0), node("SequenceMap", ["s", "t"], ["m"], body=mbody),
      node("ConcatFromSequence", ["m"], ["y"], axis=0)],
     [("x", f32(3, 2, 2)), ("t", f32(2, 2))], ["y"])

# --- ops of earlier opsets that ONNX 1.12's node tests cover only at batch 1 -----------------
for order in (0, 1):
    case(f"maxpool_indices_unpool_storage_order{order}", 18,
         [node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], storage_order=order),
          node("MaxUnpool", ["y", "i"], ["u"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1])]
         if order == 0 else
         [node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], storage_order=order)],
         [("x", f32(2, 3, 5, 5))], ["y", "i", "u"] if order == 0 else ["y", "i"], out_types={"i": TensorProto.INT64})
rois = np.array([[0.5, 1.0, 6.2, 5.5], [2.0, 0.0, 3.0, 7.9], [-1.0, -2.0, 9.5, 8.0], [4.0, 4.0, 4.5, 4.2]], np.float32)
case("roialign_batch2_half_pixel", 16,
     [node("RoiAlign", ["x", "rois", "bi"], ["y"], output_height=3, output_width=4, sampling_ratio=2, spatial_scale=0.9)],
     [("x", f32(2, 3, 8, 7)), ("rois", rois), ("bi", np.array([1, 0, 1, 0], np.int64))], ["y"])
case("maxpool3d_pads_strides_dilations_ceil", 18,
     [node("MaxPool", ["x"], ["y"], kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1],
           dilations=[1, 2, 1], ceil_mode=1)], [("x", f32(2, 3, 5, 6, 7))], ["y"])
for incl in (0, 1):
    case(f"averagepool3d_pads_count_include_pad{incl}", 19,
         [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 2, 2], strides=[2, 2, 1], pads=[1, 1, 0, 0, 1, 1],
               count_include_pad=incl)], [("x", f32(1, 2, 5, 4, 6))], ["y"])
case("batchnorm_training_mode_batch2", 15,
     [node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["y", "rm", "rv"], training_mode=1, momentum=0.8)],
     [("x", f32(2, 3, 4, 2))], ["y", "rm", "rv"],
     [("s", f32(3, lo=0.5, hi=1.5)), ("b", f32(3)), ("mean", f32(3)), ("var", f32(3, lo=0.5, hi=1.5))])
case("stft_two_sided_complex_hann", 17,
     [node("HannWindow", ["wl"], ["w"]), node("STFT", ["x", "step", "w"], ["y"], onesided=0)],
     [("x", f32(2, 40, 2))], ["y"], [("wl", np.array(8, np.int64)), ("step", np.array(5, np.int64))])

# --- output shapes that depend on the data (rlx stages the graph around them at run time) ---
I64 = TensorProto.INT64
case("nonzero_computed_then_gather_sum", 18,
     [node("Relu", ["x"], ["r"]), node("Reshape", ["r", "flat"], ["f"]), node("Greater", ["f", "zero"], ["m"]),
      node("NonZero", ["m"], ["nz"]), node("Squeeze", ["nz", "ax0"], ["idx"]), node("Gather", ["f", "idx"], ["g"]),
      node("Mul", ["g", "two"], ["g2"]), node("ReduceSum", ["g2"], ["y"], keepdims=0),
      node("NonZero", ["r"], ["nz2"])],
     [("x", f32(4, 6))], ["y", "idx", "nz2"],
     [("flat", i64(-1)), ("zero", np.array(0, np.float32)), ("ax0", i64(0)), ("two", np.array(2, np.float32))],
     out_types={"idx": I64, "nz2": I64})
case("compress_computed_condition", 18,
     [node("ReduceSum", ["x", "ax1"], ["s"], keepdims=0), node("Greater", ["s", "zero"], ["c"]),
      node("Compress", ["x", "c"], ["k"], axis=0), node("Mul", ["k", "three"], ["y"])],
     [("x", f32(7, 3))], ["y"], [("ax1", i64(1)), ("zero", np.array(0.3, np.float32)), ("three", np.array(3, np.float32))])
base = f32(3, 5)
dup_cols = np.concatenate([base, base[:, [1, 3, 0]]], axis=1)  # 8 columns, 3 repeated
for sorted_, axis in ((1, None), (0, None), (1, 1), (0, 1)):
    extra = {} if axis is None else {"axis": axis}
    case(f"unique_of_computed_sorted{sorted_}" + ("" if axis is None else f"_axis{axis}"), 18,
         [node("Mul", ["x", "three"], ["x3"]), node("Floor", ["x3"], ["q"]),
          node("Unique", ["q"], ["u", "i", "inv", "n"], sorted=sorted_, **extra), node("Add", ["u", "one"], ["y"])],
         [("x", f32(3, 8) if axis is None else dup_cols)], ["y", "i", "inv", "n"],
         [("three", np.array(3, np.float32)), ("one", np.array(1, np.float32))],
         out_types={"i": I64, "inv": I64, "n": I64})
boxes = np.concatenate([rng.uniform(0, 6, (2, 9, 2)), rng.uniform(4, 10, (2, 9, 2))], axis=2).astype(np.float32)
case("nms_of_computed_scores_then_gather", 18,
     [node("Sigmoid", ["logits"], ["sc"]),
      node("NonMaxSuppression", ["b", "sc", "maxn", "iou", "smin"], ["sel"]),
      node("Gather", ["sel", "col2"], ["box"], axis=1), node("Gather", ["b", "box"], ["picked"], axis=1),
      # the count through shape arithmetic: Range(0, rows of sel)
      node("Shape", ["sel"], ["shp"]), node("Gather", ["shp", "zero"], ["rows"]),
      node("Range", ["zero", "rows", "one"], ["iota"])],
     [("b", boxes), ("logits", f32(2, 3, 9, lo=-3, hi=3))], ["sel", "picked", "iota"],
     [("maxn", i64(5)), ("iou", np.array([0.3], np.float32)), ("smin", np.array([0.35], np.float32)),
      ("col2", i64(2)), ("zero", np.array(0, np.int64)), ("one", np.array(1, np.int64))],
     out_types={"sel": I64, "iota": I64})
lengths = np.array([3, 7, 2], np.int64)
case("range_of_computed_limit", 18,
     [node("ReduceMax", ["len"], ["lim"], keepdims=0), node("Range", ["start", "lim", "step"], ["r"]),
      node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT), node("Mul", ["rf", "scale"], ["y"]),
      node("Add", ["x", "one"], ["flim"]), node("Range", ["fstart", "flim", "fstep"], ["fr"])],
     [("len", lengths), ("x", np.array(2.3, np.float32))], ["r", "y", "fr"],
     [("start", np.array(1, np.int64)), ("step", np.array(2, np.int64)), ("scale", np.array(0.5, np.float32)),
      ("fstart", np.array(-1.0, np.float32)), ("fstep", np.array(0.7, np.float32)), ("one", np.array(1, np.float32))],
     out_types={"r": I64})
xt = f32(3, 10)
xt[1, 4] = xt[1, 7]  # a tie: the lower index first
for largest in (1, 0):
    case(f"topk_computed_k_largest{largest}", 18,
         # k: how many of row 0 exceed 0.2 (at most the row's 10)
         [node("Greater", ["x", "zero"], ["m"]), node("Cast", ["m"], ["mi"], to=TensorProto.INT64),
          node("Gather", ["mi", "row0"], ["m0"], axis=0), node("ReduceSum", ["m0"], ["ks"], keepdims=0),
          node("Reshape", ["ks", "shp1"], ["k"]), node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest)],
         [("x", xt)], ["v", "i"], [("zero", np.array(0.2, np.float32)), ("row0", np.array(0, np.int64)),
                                   ("shp1", i64(1))], out_types={"i": I64})
case("nonzero_then_unique_two_stages", 18,
     [node("Greater", ["x", "zero"], ["m"]), node("NonZero", ["m"], ["nz"]), node("Gather", ["nz", "one"], ["cols"], axis=0),
      node("Unique", ["cols"], ["u", "i", "inv", "n"]), node("Cast", ["u"], ["uf"], to=TensorProto.FLOAT),
      node("Mul", ["uf", "half"], ["y"])],
     [("x", f32(5, 7))], ["y", "n"], [("zero", np.array(0, np.float32)), ("one", i64(1)),
                                       ("half", np.array(0.5, np.float32))], out_types={"n": I64})

# TfIdfVectorizer over integer n-grams: the three modes with weights, trigrams at skips, int64
# input with N rows, a pool whose unigrams are below min_gram_length
tokens = rng.integers(0, 4, size=(3, 40)).astype(np.int64)
pool = [1, 2, 5,  1, 2, 2, 3, 0, 0,  1, 1, 2, 2, 3, 1]  # 3 unigrams (5 never occurs), 3 bigrams, 2 trigrams
for mode in ("TF", "IDF", "TFIDF"):
    case(f"tfidfvectorizer_{mode.lower()}_trigrams_skip2", 9,
         [node("TfIdfVectorizer", ["x"], ["y"], mode=mode, min_gram_length=1, max_gram_length=3, max_skip_count=2,
               ngram_counts=[0, 3, 9], ngram_indexes=[7, 0, 1, 2, 3, 4, 5, 6], pool_int64s=pool,
               weights=[0.5, 1.0, 2.0, 0.25, 3.0, 1.5, 0.75, 2.5])],
         [("x", tokens)], ["y"])
case("tfidfvectorizer_int32_row_bigrams_and_trigrams", 9,
     [node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=2, max_gram_length=3, max_skip_count=1,
           ngram_counts=[0, 3, 9], ngram_indexes=[0, 1, 2, 3, 4, 5, 6, 7], pool_int64s=pool)],
     [("x", tokens[0].astype(np.int32))], ["y"])

# --- writing -------------------------------------------------------------------------------
def ort_available():
    if not shutil.which("node"):
        return "node is not installed"
    if not os.path.isdir(os.path.join(NPM, "node_modules", "onnxruntime-node")):
        return f"onnxruntime-node is not installed in {NPM}/node_modules (scripts/install-npm.sh {NPM})"
    return None


def elem_type(a):
    return helper.np_dtype_to_tensor_dtype(a.dtype) if hasattr(helper, "np_dtype_to_tensor_dtype") else \
        onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype]


def write_case(c, jobs):
    d = os.path.join(NODE_DIR, "test_opset%d_%s" % (c["opset"], c["name"]))
    data = os.path.join(d, "test_data_set_0")
    os.makedirs(data)
    inputs = [helper.make_tensor_value_info(n, elem_type(a), c["in_shapes"].get(n, a.shape)) for n, a in c["inputs"]]
    outputs = [helper.make_tensor_value_info(n, c["out_types"].get(n, TensorProto.FLOAT), None) for n in c["outputs"]]
    inits = [t if isinstance(t, TensorProto) else numpy_helper.from_array(t, n) for n, t in c["inits"]]
    for (n, _), t in zip(c["inits"], inits):
        t.name = n
    graph = helper.make_graph(c["nodes"], c["name"], inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", c["opset"])],
                              producer_name="rlx generate_opset_tests.py")
    model.ir_version = IR_FOR_OPSET[c["opset"]]
    onnx.save(model, os.path.join(d, "model.onnx"))
    job = {"model": os.path.join(d, "model.onnx"), "inputs": [], "out_dir": data, "case": c}
    for k, (n, a) in enumerate(c["inputs"]):
        with open(os.path.join(data, "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
        raw = os.path.join(data, "ort_in_%d.bin" % k)
        np.ascontiguousarray(a).tofile(raw)
        job["inputs"].append({"name": n, "type": ORT_TYPES[a.dtype.type], "dims": list(a.shape), "file": raw})
    jobs.append(job)


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(NODE_DIR)
    why = ort_available()
    if why:
        for name in ("oracle_missing", "stamp"):
            with open(os.path.join(OUT, name), "w") as f:
                f.write(why + "\n")
        print("generate_opset_tests: " + why)
        return
    jobs = []
    for c in cases:
        write_case(c, jobs)
    jobs_file = os.path.join(OUT, "jobs.json")
    with open(jobs_file, "w") as f:
        json.dump([{k: v for k, v in j.items() if k != "case"} for j in jobs], f)
    env = dict(os.environ, NODE_PATH=os.path.join(NPM, "node_modules"))
    p = subprocess.run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_run.cjs"), jobs_file],
                       env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("generate_opset_tests: ort_run.cjs failed: " + p.stderr[-2000:])
    print(p.stdout.strip())
    errors = []
    for j in jobs:
        d = j["out_dir"]
        err = os.path.join(d, "ort_error.txt")
        if os.path.exists(err):
            errors.append("%s: %s" % (os.path.basename(os.path.dirname(d)), open(err).read().strip()[:500]))
            continue
        meta = json.load(open(os.path.join(d, "ort_outputs.json")))
        for k, m in enumerate(meta):
            raw = os.path.join(d, "ort_out_%d.bin" % k)
            a = np.fromfile(raw, dtype=FROM_ORT[m["type"]]).reshape(m["dims"])
            with open(os.path.join(d, "output_%d.pb" % k), "wb") as f:
                f.write(numpy_helper.from_array(a, m["name"]).SerializeToString())
            os.remove(raw)
        for k in range(len(j["inputs"])):
            os.remove(os.path.join(d, "ort_in_%d.bin" % k))
        os.remove(os.path.join(d, "ort_outputs.json"))
    if errors:
        sys.exit("generate_opset_tests: ONNX Runtime refused these cases (fix the case):\n" + "\n".join(errors))
    with open(os.path.join(OUT, "stamp"), "w") as f:
        f.write("%d cases, onnx %s, %s\n" % (len(jobs), onnx.__version__, p.stdout.strip()))


main()
