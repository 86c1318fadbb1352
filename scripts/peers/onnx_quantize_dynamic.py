#!/usr/bin/python3
"""Dynamic int8 quantization of an ONNX model in the form ONNX Runtime's quantize_dynamic writes,
built with the onnx package alone (Debian's python3-onnx; onnxruntime's Python tools are not in
Debian), so that ONNX Runtime runs the same int8 weights as `rlx quantize --scheme int8`:

    /usr/bin/python3 scripts/peers/onnx_quantize_dynamic.py IN.onnx OUT.onnx

Every MatMul whose B is a 2-D float initializer [K, N] (a Linear layer's transposed weight)
becomes

    x_q, x_scale, x_zp = DynamicQuantizeLinear(x)              # u8, per tensor, asymmetric
    y = Cast(MatMulInteger(x_q, B_q, x_zp, B_zp), float) * (x_scale * B_scale)

with B_q int8 symmetric per output channel (column n: scale = max |B[:, n]| / 127, 1 for an
all-zero column; q = round half to even of B / scale, clamped to +-127: the rows of
quant/int8_weights.h quantize_int8_rows), B_zp = 0 [N]. ONNX Runtime fuses this pattern into its
DynamicQuantizeMatMul kernel (MLAS, VNNI where the CPU has it). Activations differ from rlx's:
ONNX Runtime's are asymmetric u8 per tensor, rlx's symmetric per token. Prints the number of
MatMuls converted.
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


def quantize_columns(b):
    amax = np.max(np.abs(b.astype(np.float64)), axis=0)
    scale = np.where(amax > 0, (amax / 127.0).astype(np.float32), np.float32(1.0)).astype(np.float32)
    q = np.rint(b.astype(np.float64) / scale.astype(np.float64))
    return np.clip(q, -127, 127).astype(np.int8), scale


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    model = onnx.load(sys.argv[1])
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    nodes, converted = [], 0
    for node in g.node:
        b = inits.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if b is None or len(b.dims) != 2 or b.data_type != TensorProto.FLOAT:
            nodes.append(node)
            continue
        k = "%s_dq%d" % (node.name or "matmul", converted)
        q, scale = quantize_columns(numpy_helper.to_array(b))
        g.initializer.extend([numpy_helper.from_array(q, k + "_Bq"), numpy_helper.from_array(scale, k + "_Bscale"),
                              numpy_helper.from_array(np.zeros(q.shape[1], np.int8), k + "_Bzp")])
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [node.input[0]], [k + "_xq", k + "_xscale", k + "_xzp"], name=k + "_quant"),
            helper.make_node("MatMulInteger", [k + "_xq", k + "_Bq", k + "_xzp", k + "_Bzp"], [k + "_i32"], name=k + "_mmi"),
            helper.make_node("Cast", [k + "_i32"], [k + "_f"], to=TensorProto.FLOAT, name=k + "_cast"),
            helper.make_node("Mul", [k + "_xscale", k + "_Bscale"], [k + "_scale"], name=k + "_scale_mul"),
            helper.make_node("Mul", [k + "_f", k + "_scale"], [node.output[0]], name=k + "_out_mul"),
        ]
        converted += 1
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    onnx.checker.check_model(model)
    onnx.save(model, sys.argv[2])
    print("%s: %d MatMuls as DynamicQuantizeLinear + MatMulInteger (int8 weights per channel)" % (sys.argv[2], converted))


main()
