#!/usr/bin/env python3
"""Generates the model op lists in this directory (Python standard library only).

Each model is {"name", "description", "source", "ops": [descriptor, ...]}: the
operators a framework hands to the op compiler, one per node, in graph order.
Layers repeat, so many ops share one kernel; refcc dedupes them.

  python3 examples/models/generate.py          # rewrites the *.json next to this file

Shapes follow the published architectures:
  resnet50.json          ResNet-50 v1.5 inference (stride on the 3x3 conv, as in the
                         MindSpore model zoo), 224x224 float16, compiled for the dynamic
                         batch gears 1, 8, 16 and 32 (ATC --dynamic_batch_size="1,8,16,32"
                         compiles every gear).
  transformer_block.json One post-LN transformer encoder block, hidden 1024, 16 heads,
                         FFN 4096 (BERT-large geometry), float16, for (batch 8, seq 512),
                         (batch 8, seq 128) and (batch 1, seq 128).
  bert_base_layer.json   The 12 encoder layers of BERT-base (hidden 768, 12 heads,
                         FFN 3072), float32, batch 32, seq 128 and seq 384.
Reshapes and flattens are views, not kernels, and are not listed.
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def tensor(shape, dtype, fmt=None):
    t = {"shape": list(shape), "dtype": dtype}
    if fmt is None:
        fmt = "NCHW" if len(shape) == 4 else "ND"
    t["format"] = fmt
    return t


def op(name, op_type, inputs, outputs, attrs=None):
    d = {"name": name, "op_type": op_type, "inputs": inputs, "outputs": outputs}
    if attrs:
        d["attrs"] = attrs
    return d


# ---------------------------------------------------------------------------
# ResNet-50


class Net:
    def __init__(self, dtype):
        self.dtype = dtype
        self.ops = []

    def conv(self, name, x, out_c, k, stride, pad):
        n, c, h, w = x
        oh = (h + 2 * pad - k) // stride + 1
        ow = (w + 2 * pad - k) // stride + 1
        y = (n, out_c, oh, ow)
        attrs = {"kernel_size": [k, k], "out_channel": out_c, "stride": [1, 1, stride, stride],
                 "dilation": [1, 1, 1, 1], "pad_mode": "pad", "pad": [pad, pad, pad, pad], "group": 1,
                 "data_format": "NCHW"}
        self.ops.append(op(name, "Conv2D",
                           [tensor(x, self.dtype), tensor((out_c, c, k, k), self.dtype)],
                           [tensor(y, self.dtype)], attrs))
        return y

    def bn(self, name, x):
        c = x[1]
        params = [tensor((c,), self.dtype) for _ in range(4)]
        self.ops.append(op(name, "BatchNorm", [tensor(x, self.dtype)] + params, [tensor(x, self.dtype)],
                           {"epsilon": 1e-5, "is_training": False, "data_format": "NCHW"}))
        return x

    def relu(self, name, x):
        self.ops.append(op(name, "Relu", [tensor(x, self.dtype)], [tensor(x, self.dtype)]))
        return x

    def add(self, name, a, b):
        self.ops.append(op(name, "Add", [tensor(a, self.dtype), tensor(b, self.dtype)], [tensor(a, self.dtype)]))
        return a


def resnet50(net, batch, prefix):
    x = (batch, 3, 224, 224)
    x = net.conv(prefix + "conv1", x, 64, 7, 2, 3)
    x = net.bn(prefix + "bn1", x)
    x = net.relu(prefix + "relu", x)
    n, c, h, w = x
    y = (n, c, (h + 1) // 2, (w + 1) // 2)
    net.ops.append(op(prefix + "maxpool", "MaxPool", [tensor(x, net.dtype)], [tensor(y, net.dtype)],
                      {"kernel_size": [1, 1, 3, 3], "strides": [1, 1, 2, 2], "pad_mode": "same",
                       "data_format": "NCHW"}))
    x = y
    in_c = 64
    for stage, (blocks, mid, out_c, stride) in enumerate([(3, 64, 256, 1), (4, 128, 512, 2),
                                                          (6, 256, 1024, 2), (3, 512, 2048, 2)], start=1):
        for block in range(blocks):
            s = stride if block == 0 else 1
            p = "%slayer%d.%d." % (prefix, stage, block)
            identity = x
            y = net.conv(p + "conv1", x, mid, 1, 1, 0)
            y = net.relu(p + "relu1", net.bn(p + "bn1", y))
            y = net.conv(p + "conv2", y, mid, 3, s, 1)
            y = net.relu(p + "relu2", net.bn(p + "bn2", y))
            y = net.conv(p + "conv3", y, out_c, 1, 1, 0)
            y = net.bn(p + "bn3", y)
            if block == 0:
                identity = net.conv(p + "downsample.0", x, out_c, 1, s, 0)
                identity = net.bn(p + "downsample.1", identity)
            y = net.add(p + "add", y, identity)
            x = net.relu(p + "relu3", y)
            in_c = out_c
    n, c, h, w = x
    pooled = (n, c, 1, 1)
    net.ops.append(op(prefix + "avgpool", "ReduceMean", [tensor(x, net.dtype)], [tensor(pooled, net.dtype)],
                      {"axis": [2, 3], "keep_dims": True}))
    features = (n, c)  # flatten: a view
    logits = (n, 1000)
    net.ops.append(op(prefix + "fc.matmul", "MatMul",
                      [tensor(features, net.dtype), tensor((1000, c), net.dtype)], [tensor(logits, net.dtype)],
                      {"transpose_a": False, "transpose_b": True}))
    net.ops.append(op(prefix + "fc.bias_add", "BiasAdd", [tensor(logits, net.dtype), tensor((1000,), net.dtype)],
                      [tensor(logits, net.dtype)], {"data_format": "NCHW"}))
    net.ops.append(op(prefix + "softmax", "Softmax", [tensor(logits, net.dtype)], [tensor(logits, net.dtype)],
                      {"axis": -1}))


def make_resnet50():
    net = Net("float16")
    for batch in (1, 8, 16, 32):
        resnet50(net, batch, "gear_b%d/" % batch)
    return {"name": "resnet50",
            "description": "ResNet-50 v1.5 inference, 224x224 float16, dynamic batch gears 1, 8, 16, 32",
            "source": "examples/models/generate.py",
            "ops": net.ops}


# ---------------------------------------------------------------------------
# Transformer encoder layer (post-LN, BERT style; Dense = MatMul(transpose_b) + BiasAdd)


def encoder_layer(ops, dtype, batch, seq, hidden, heads, ffn, prefix):
    d = hidden // heads
    rows = batch * seq
    T = lambda shape: tensor(shape, dtype, "ND")

    def dense(name, x_shape, out_features):
        in_features = x_shape[-1]
        y = (x_shape[0], out_features)
        ops.append(op(name + ".matmul", "MatMul", [T(x_shape), T((out_features, in_features))], [T(y)],
                      {"transpose_a": False, "transpose_b": True}))
        ops.append(op(name + ".bias_add", "BiasAdd", [T(y), T((out_features,))], [T(y)]))
        return y

    x = (rows, hidden)
    q = dense(prefix + "attention.query", x, hidden)
    k = dense(prefix + "attention.key", x, hidden)
    v = dense(prefix + "attention.value", x, hidden)
    split = (batch, seq, heads, d)  # view of [rows, hidden]
    qh = (batch, heads, seq, d)
    kh = (batch, heads, d, seq)
    ops.append(op(prefix + "attention.query.transpose", "Transpose", [T(split)], [T(qh)], {"perm": [0, 2, 1, 3]}))
    ops.append(op(prefix + "attention.key.transpose", "Transpose", [T(split)], [T(kh)], {"perm": [0, 2, 3, 1]}))
    ops.append(op(prefix + "attention.value.transpose", "Transpose", [T(split)], [T(qh)], {"perm": [0, 2, 1, 3]}))
    scores = (batch, heads, seq, seq)
    ops.append(op(prefix + "attention.scores", "BatchMatMul", [T(qh), T(kh)], [T(scores)],
                  {"transpose_a": False, "transpose_b": False}))
    ops.append(op(prefix + "attention.scale", "Mul", [T(scores), T(())], [T(scores)]))
    ops.append(op(prefix + "attention.mask", "Add", [T(scores), T((batch, 1, seq, seq))], [T(scores)]))
    ops.append(op(prefix + "attention.softmax", "Softmax", [T(scores)], [T(scores)], {"axis": -1}))
    ops.append(op(prefix + "attention.context", "BatchMatMul", [T(scores), T(qh)], [T(qh)],
                  {"transpose_a": False, "transpose_b": False}))
    ops.append(op(prefix + "attention.context.transpose", "Transpose", [T(qh)], [T(split)], {"perm": [0, 2, 1, 3]}))
    o = dense(prefix + "attention.output", x, hidden)
    ops.append(op(prefix + "attention.output.residual", "Add", [T(o), T(x)], [T(x)]))
    ln = {"begin_norm_axis": -1, "begin_params_axis": -1, "epsilon": 1e-12}
    ops.append(op(prefix + "attention.output.layernorm", "LayerNorm", [T(x), T((hidden,)), T((hidden,))], [T(x)],
                  ln))
    h = dense(prefix + "intermediate", x, ffn)
    ops.append(op(prefix + "intermediate.gelu", "Gelu", [T(h)], [T(h)], {"approximate": "tanh"}))
    o = dense(prefix + "output", h, hidden)
    ops.append(op(prefix + "output.residual", "Add", [T(o), T(x)], [T(x)]))
    ops.append(op(prefix + "output.layernorm", "LayerNorm", [T(x), T((hidden,)), T((hidden,))], [T(x)], ln))


def make_transformer_block():
    ops = []
    for batch, seq in ((8, 512), (8, 128), (1, 128)):
        encoder_layer(ops, "float16", batch, seq, 1024, 16, 4096, "b%d_s%d/encoder.layer.0." % (batch, seq))
    return {"name": "transformer_block",
            "description": "One post-LN transformer encoder block: hidden 1024, 16 heads, FFN 4096, float16; "
                           "(batch 8, seq 512), (batch 8, seq 128), (batch 1, seq 128)",
            "source": "examples/models/generate.py",
            "ops": ops}


def make_bert_base():
    ops = []
    for seq in (128, 384):
        for layer in range(12):
            encoder_layer(ops, "float32", 32, seq, 768, 12, 3072, "s%d/bert.encoder.layer.%d." % (seq, layer))
    return {"name": "bert_base",
            "description": "BERT-base encoder (12 layers, hidden 768, 12 heads, FFN 3072), float32, batch 32, "
                           "seq 128 and 384",
            "source": "examples/models/generate.py",
            "ops": ops}


def write(model, file_name):
    # One op per line: readable diffs, still plain JSON.
    lines = ["{"]
    for key in ("name", "description", "source"):
        lines.append("  %s: %s," % (json.dumps(key), json.dumps(model[key])))
    lines.append('  "ops": [')
    body = [json.dumps(o, separators=(", ", ": ")) for o in model["ops"]]
    lines.append(",\n".join("    " + b for b in body))
    lines.append("  ]")
    lines.append("}")
    with open(os.path.join(HERE, file_name), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    write(make_resnet50(), "resnet50.json")
    write(make_transformer_block(), "transformer_block.json")
    write(make_bert_base(), "bert_base_layer.json")


if __name__ == "__main__":
    main()
