"""ONNX Runtime on the CPU: a small transformer encoder built with onnx.helper
(no torch needed) and saved in the warm-up, then per cycle one session made
with the strategy's arena settings (memrel.ort_session), requests with growing
batch sizes (each with memrel.ort_run_options: ort-shrink's run option), the
session deleted and the strategy's release.

ONNX Runtime's CPU arena keeps what the largest request needed until the
session goes; the ort- strategies change that (enable_cpu_mem_arena,
memory.enable_memory_arena_shrinkage, arena_extend_strategy). Every request's
latency goes into the forward phase's note and onto stdout, so what each knob
costs per request is in the run beside what it gives back.

Needs onnxruntime and onnx (pip install onnxruntime onnx); runs bare too.
"""

import argparse
import gc
import os
import sys
import tempfile
import time

try:
    import memrel
except ImportError:  # run bare from a checkout: use the module next to memrel's source
    sys.path.insert(
        0,
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"),
    )
    import memrel

import numpy as np  # noqa: E402  (after memrel, on purpose)
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def build(layers, dim, ffn, seed=0):
    """A pre-norm-free transformer encoder: per layer single-head attention
    (Q, K, V, softmax(QK^T/sqrt(d)) V, output projection, residual) and an
    MLP (dim -> ffn -> dim, ReLU, residual). Input x: [batch, seq, dim]."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def weight(name, shape):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.02).astype(np.float32), name))
        return name

    inits.append(numpy_helper.from_array(np.array(1.0 / np.sqrt(dim), dtype=np.float32), "scale"))
    x = "x"
    for i in range(layers):
        p = "l%d_" % i
        for w in ("q", "k", "v"):
            nodes.append(helper.make_node("MatMul", [x, weight(p + "w" + w, (dim, dim))], [p + w]))
        nodes.append(helper.make_node("Transpose", [p + "k"], [p + "kt"], perm=[0, 2, 1]))
        nodes.append(helper.make_node("MatMul", [p + "q", p + "kt"], [p + "scores"]))
        nodes.append(helper.make_node("Mul", [p + "scores", "scale"], [p + "scaled"]))
        nodes.append(helper.make_node("Softmax", [p + "scaled"], [p + "probs"], axis=-1))
        nodes.append(helper.make_node("MatMul", [p + "probs", p + "v"], [p + "att"]))
        nodes.append(helper.make_node("MatMul", [p + "att", weight(p + "wo", (dim, dim))], [p + "o"]))
        nodes.append(helper.make_node("Add", [x, p + "o"], [p + "x1"]))
        nodes.append(helper.make_node("MatMul", [p + "x1", weight(p + "w1", (dim, ffn))], [p + "h"]))
        nodes.append(helper.make_node("Relu", [p + "h"], [p + "hr"]))
        nodes.append(helper.make_node("MatMul", [p + "hr", weight(p + "w2", (ffn, dim))], [p + "m"]))
        out = "y" if i == layers - 1 else p + "out"
        nodes.append(helper.make_node("Add", [p + "x1", p + "m"], [out]))
        x = out
    graph = helper.make_graph(
        nodes,
        "memrel-encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", dim])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batches", default="1,8,64,1",
                    help="batch sizes, in order, comma-separated (the last request after the largest shows what the arena keeps)")
    ap.add_argument("--repeats", type=int, default=2, help="requests per batch size (latency: the median)")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    work = tempfile.mkdtemp(prefix="memrel-ort-")
    path = os.path.join(work, "encoder.onnx")

    with memrel.phase("warmup") as p:
        model = build(args.layers, args.dim, args.ffn)
        onnx.save(model, path)
        params = sum(int(np.prod(i.dims)) for i in model.graph.initializer)
        del model
        p.note = "onnx %s, onnxruntime %s: encoder %d layers x %d (ffn %d), %.1f M parameters, %.1f MiB file" % (
            onnx.__version__,
            ort.__version__,
            args.layers,
            args.dim,
            args.ffn,
            params / 1e6,
            os.path.getsize(path) / 1048576.0,
        )
    memrel.baseline(0.5)

    rng = np.random.default_rng(1)
    inputs = {b: rng.standard_normal((b, args.seq, args.dim)).astype(np.float32) for b in set(batches)}
    for cycle in range(memrel.cycles()):
        with memrel.phase("load", model="encoder") as p:
            session = memrel.ort_session(path, ort=ort)
            p.note = "InferenceSession(CPUExecutionProvider), strategy %s" % memrel.strategy()
        with memrel.phase("forward", model="encoder") as p:
            lines = []
            for b in batches:
                times = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    session.run(None, {"x": inputs[b]}, memrel.ort_run_options(ort))
                    times.append(time.perf_counter() - t0)
                times.sort()
                lines.append("batch %d: %.1f ms" % (b, times[len(times) // 2] * 1000.0))
            p.note = "median request latency x %d tokens, %s" % (args.seq, ", ".join(lines))
            print("memrel-ort cycle %d strategy %s: %s" % (cycle + 1, memrel.strategy(), p.note), flush=True)
        with memrel.phase("unload", model="encoder"):
            del session
            gc.collect()
        memrel.release()
    os.remove(path)
    os.rmdir(work)


if __name__ == "__main__":
    main()
