"""Rewrites of a causal LM's head before it is compiled: logits only for the positions a call
keeps, and scores for a subset of the vocabulary (a draft's most frequent tokens)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset13 as ops


def _lm_head(model: ov.Model) -> ov.Node | None:
    """The LM head's MatMul, or None when it is not where this expects it."""
    node = model.outputs[0].get_node().input_value(0).get_node()
    for _ in range(8):  # the head may be followed by a scale, a soft-cap or a convert
        if node.get_type_name() == "MatMul":
            return node
        node = node.input_value(0).get_node()
    return None


def compute_only_kept_logits(model: ov.Model) -> bool:
    """Add an input `logits_to_keep`: the LM head then runs on the last n positions only.

    A stateful IR computes logits for every input position: for a 500-token prompt that is 500 rows
    of a vocabulary-wide matmul, when only the last row is needed (only K+1 rows to verify a draft).
    openvino.genai slices before the head the same way. Returns False, leaving the model as it is,
    when the head is not where this expects it.
    """
    node = _lm_head(model)
    if node is None:
        return False
    hidden = node.input_value(0)
    if hidden.get_partial_shape().rank.is_dynamic or hidden.get_partial_shape().rank.get_length() != 3:
        return False
    keep = ops.parameter([1], ov.Type.i64, name="logits_to_keep")
    keep.output(0).get_tensor().set_names({"logits_to_keep"})
    end = ops.constant(np.array([np.iinfo(np.int64).max], dtype=np.int64))
    step_and_axis = ops.constant(np.array([1], dtype=np.int64))
    last_positions = ops.slice(hidden, ops.negative(keep), end, step_and_axis, step_and_axis)
    node.input(0).replace_source_output(last_positions.output(0))
    model.add_parameters([keep])
    model.validate_nodes_and_infer_types()
    return True


# The nodes a head's weight may pass through on its way from its constants (compressed or not) to
# the MatMul: decompression (Convert, Subtract, Multiply) and the reshape of group-wise scales.
_WEIGHT_PATH = {"Convert", "Subtract", "Multiply", "Reshape"}


def score_only(model: ov.Model, token_ids: np.ndarray, xml: Path) -> None:
    """Cut the LM head down to the rows of `token_ids`: its weight's constants are sliced in place,
    so compressed weights stay compressed and the plugin sees the same decompression pattern.

    A head tied to the embedding shares those constants: its path is copied first, so the
    embedding keeps every row.
    """
    head = _lm_head(model)
    if head is None or not head.get_attributes().get("transpose_b"):
        raise ValueError(f"{xml}: cannot find an LM head of the form hidden @ weight.T to restrict to {len(token_ids)} tokens")
    weight = head.input_value(1)
    vocab = weight.get_partial_shape()[0]
    if vocab.is_dynamic or token_ids.max() >= vocab.get_length():
        raise ValueError(f"{xml}: the head scores {vocab} tokens, which does not hold ids up to {token_ids.max()}")
    head.input(1).replace_source_output(_rows(weight, np.asarray(token_ids, dtype=np.int64), vocab.get_length(), xml))
    model.validate_nodes_and_infer_types()


def _rows(output: ov.Output, token_ids: np.ndarray, vocab: int, xml: Path) -> ov.Output:
    """`output` with only the rows `token_ids` of its first axis (vocab long), built anew from its constants."""
    node = output.get_node()
    kind = node.get_type_name()
    if kind == "Constant":
        shape = list(node.get_output_shape(0))
        if not shape or shape[0] != vocab:
            return output  # a scalar or a value broadcast over every row
        kept = ov.Tensor(node.get_element_type(), ov.Shape([len(token_ids), *shape[1:]]))
        # Sub-byte weights (INT4) come packed, a row's values in whole bytes: rows are still slices.
        kept.data[...] = node.get_data().reshape(vocab, -1)[token_ids].reshape(kept.data.shape)
        return ops.constant(kept).output(0)
    if kind not in _WEIGHT_PATH:
        raise ValueError(f"{xml}: the LM head's weight passes through a {kind} node, which cannot be restricted to some tokens")
    inputs = [_rows(node.input_value(i), token_ids, vocab, xml) for i in range(node.get_input_size())]
    if kind == "Convert":
        return ops.convert(inputs[0], node.get_output_element_type(0)).output(0)
    if kind == "Subtract":
        return ops.subtract(*inputs).output(0)
    if kind == "Multiply":
        return ops.multiply(*inputs).output(0)
    shape = node.input_value(1).get_node()  # Reshape: its target shape names the vocabulary first
    if shape.get_type_name() != "Constant" or shape.get_data()[0] != vocab:
        raise ValueError(f"{xml}: the LM head's weight is reshaped in a way that cannot be restricted to some tokens")
    target = shape.get_data().copy()
    target[0] = len(token_ids)
    return ops.reshape(inputs[0], ops.constant(target), special_zero=node.get_attributes()["special_zero"]).output(0)
