#!/usr/bin/env bash
# cnntrain-data onnx-info: what it prints for files from PyTorch's default exporter (external data) and
# from ONNX's helper API, and the exit-2 refusals with their messages: an unsupported op, an unsupported
# opset, a cycle, a truncated or non-ONNX file, a missing or cut external-data file, an escaping data path.
# The files come from PyTorch 2 and onnx in the test venv (build/pyvenv, made once from PyPI).
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
VPY=$(bash tests/onnx/py_venv.sh "$BUILD/pyvenv") ||
  fail "the PyTorch/onnx venv could not be installed (message above); this test needs PyPI once"
"$VPY" - "$T" > "$T/make.log" 2>&1 <<'PYEOF' || { cat "$T/make.log"; fail "making the test models"; }
import sys, torch, torch.nn as nn, onnx
from onnx import helper, TensorProto as TP
d = sys.argv[1]
net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
torch.onnx.export(net.eval(), (torch.rand(1, 1, 8, 8),), f"{d}/net.onnx", external_data=True,
                  dynamic_shapes=({0: torch.export.Dim("N")},))
def graph(nodes, opset=17, name="g.onnx", inits=()):
    x = helper.make_tensor_value_info("x", TP.FLOAT, ["N", 2])
    y = helper.make_tensor_value_info("y", TP.FLOAT, ["N", 2])
    g = helper.make_graph(nodes, "g", [x], [y], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    open(f"{d}/{name}", "wb").write(m.SerializeToString())
graph([helper.make_node("Relu", ["x"], ["y"], name="r")], name="ok.onnx")
graph([helper.make_node("Resize", ["x"], ["y"], name="up")], name="resize.onnx")
graph([helper.make_node("Relu", ["x"], ["y"], name="r")], opset=21, name="opset21.onnx")
graph([helper.make_node("Add", ["x", "b"], ["a"], name="a1"), helper.make_node("Relu", ["a"], ["b"], name="r1"),
       helper.make_node("Relu", ["a"], ["y"], name="r2")], name="cycle.onnx")
w = helper.make_tensor("w", TP.FLOAT, [2], b"\0" * 8, raw=True)
onnx.external_data_helper.set_external_data(w, "../escape.data")
graph([helper.make_node("Add", ["x", "w"], ["y"], name="a1")], name="escape.onnx", inits=[w])
PYEOF
D="$BUILD/cnntrain-data"
out=$("$D" onnx-info "$T/net.onnx") || fail "onnx-info on the default exporter's file: $out"
echo "$out"
grep -q "opset 2[0-9]" <<<"$out" || fail "no opset 20+ line"
grep -q "^input  .* \[N,1,8,8\]" <<<"$out" || fail "the dynamic batch dim is not shown"
grep -q "Conv 1" <<<"$out" && grep -q "Gemm 1" <<<"$out" || fail "nodes by op type"
# Conv 4*1*3*3+4 (batch norm folded into it in eval mode), Linear 3*144+3.
grep -q "^parameters: 475 " <<<"$out" || fail "parameter count (want 475)"
[ -s "$T/net.onnx.data" ] || fail "the exporter wrote no external data"
"$D" onnx-info "$T/ok.onnx" | matches "Relu 1" || fail "a helper-built model"
expect_exit 2 "node 'up' (Resize): op type not supported. Supported: Conv," -- "$D" onnx-info "$T/resize.onnx"
"$D" onnx-info --any-op "$T/resize.onnx" | matches "Resize 1" || fail "--any-op describes an unsupported op"
expect_exit 2 "opset 21 is not supported (opsets 13-20 load)" -- "$D" onnx-info "$T/opset21.onnx"
expect_exit 2 "node 'a1' (Add): the graph has a cycle" -- "$D" onnx-info "$T/cycle.onnx"
expect_exit 2 "leaves the model's directory" -- "$D" onnx-info "$T/escape.onnx"
head -c 100 "$T/net.onnx" > "$T/cut.onnx"
expect_exit 2 "not an ONNX model, or truncated" -- "$D" onnx-info "$T/cut.onnx"
expect_exit 2 "not an ONNX model, or truncated" -- "$D" onnx-info "$T/make.log"
expect_exit 2 "no such ONNX file" -- "$D" onnx-info "$T/absent.onnx"
truncate -s 100 "$T/net.onnx.data"
expect_exit 2 "net.onnx.data' is too short" -- "$D" onnx-info "$T/net.onnx"
rm "$T/net.onnx.data"
expect_exit 2 "net.onnx.data' is missing" -- "$D" onnx-info "$T/net.onnx"
echo "test_onnx_info: OK"
