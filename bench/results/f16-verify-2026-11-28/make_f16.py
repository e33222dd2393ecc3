"""One-off (docs/cpu-classes.md): the INT8 IR's weights dequantized to f16, as Constant f16 ->
Convert -> MatMul (or Gather), the same values in floats.

Usage: python make_f16.py INT8_IR_FOLDER OUT_FOLDER (copy the tokenizer files beside it yourself).
"""
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops

src, out = sys.argv[1], sys.argv[2]
model = ov.Core().read_model(src + "/openvino_model.xml")
replaced = 0
for op in model.get_ordered_ops():
    if op.get_type_name() != "Multiply":
        continue
    sub, scale = op.input_value(0).get_node(), op.input_value(1).get_node()
    if sub.get_type_name() != "Subtract" or scale.get_type_name() != "Constant":
        continue
    values, zero = sub.input_value(0).get_node(), sub.input_value(1).get_node()
    if values.get_type_name() != "Convert" or values.input_value(0).get_node().get_type_name() != "Constant":
        continue
    w = values.input_value(0).get_node().get_data().astype(np.float32)
    z = (zero.input_value(0).get_node() if zero.get_type_name() == "Convert" else zero).get_data().astype(np.float32)
    s = scale.get_data().astype(np.float32)
    dequantized = ((w - z) * s).astype(np.float16).reshape(list(op.get_output_partial_shape(0).to_shape()))
    constant = ops.constant(dequantized, dtype=ov.Type.f16)
    constant.set_friendly_name(op.get_friendly_name() + "/f16")
    op.output(0).replace(constant.output(0))
    replaced += 1
print("replaced", replaced)
ov.save_model(model, out + "/openvino_model.xml", compress_to_fp16=False)
