#!/usr/bin/python3
"""Numerical parity with PyTorch: loads the weights, input and labels that parity_dump wrote (one training batch of
a cnntrain zoo model) into the same network in PyTorch (tests/bench/torch_zoo.py), runs it in float64, and
compares cnntrain's logits, mean cross-entropy, every parameter gradient and the batch-norm running statistics
(all computed in float32 by cnntrain) with it. Tolerance, per tensor: max|cnntrain - torch| <= RTOL * max|torch|
(RTOL 1e-4). The batch must be well-conditioned: PyTorch's own float32 gradients within 2e-5 of its float64 ones
(ResNet-50 at plain initialisation is not: 20-30%; parity.mk starts its residual branches small).

ReLU kinks: a deep net at random initialisation has a few ReLU inputs within float32 rounding of 0 (about one in
10^5 is within 1e-5). Where float32 and float64 land on different sides of such a kink, the gradients really
differ (one element's whole downstream gradient is switched). When the comparison fails, the script looks for
the ReLU inputs closest to 0 (|z| < 1e-4, at most 8) and reruns PyTorch with one decision flipped at a time (then
pairs of them): if cnntrain then matches everywhere, the difference is that rounding, and the report names the
element. A flip elsewhere cannot explain a real bug away: only decisions on inputs within 1e-4 of 0 are tried.
Usage: torch_parity.py DUMP.h5 [--rtol 1e-4]   exit 0 when everything agrees, 1 with the first differences."""
import itertools
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from torch_zoo import ZOO  # noqa: E402

KINK = 1e-4  # ReLU inputs this close to 0 may be decided differently by float32
CONDITION = 2e-5  # PyTorch's own float32 gradients must be this close to float64 for the batch to test 1e-4


def to_torch(name, a, like):
    """A cnntrain tensor in the PyTorch parameter's layout: KRSC -> OIHW; others as they are."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 4:
        a = a.transpose(0, 3, 1, 2)
    if a.shape != tuple(like.shape):
        raise ValueError(f"{name}: shape {a.shape} in cnntrain's layout vs PyTorch's {tuple(like.shape)}")
    return a


class Dump:
    def __init__(self, path):
        f = h5py.File(path, "r")
        name = f.attrs["model"]
        self.model = name.decode() if isinstance(name, bytes) else name
        x = np.asarray(f["input"], dtype=np.float64)  # [N, H, W, C]
        self.n, self.h, self.w, self.c = x.shape
        self.x = torch.from_numpy(x.transpose(0, 3, 1, 2).copy())
        self.labels = torch.from_numpy(np.asarray(f["labels"]).astype(np.int64))
        self.classes = f["logits"].shape[1]
        self.logits = np.asarray(f["logits"])
        self.loss = float(f.attrs["loss"])
        self.params = {k: np.asarray(v) for k, v in f["params"].items()}
        self.grads = {k: np.asarray(v) for k, v in f["grads"].items()}
        self.buffers = {k: np.asarray(v) for k, v in f["buffers"].items()} if "buffers" in f else {}


class TorchRun:
    """The PyTorch network with the dump's weights: one forward and backward in float64. `flips` forces the
    decision of single ReLU elements: {(call, flat index): on?}, call counting ReLU applications in order."""

    def __init__(self, d, flips=None, dtype=torch.float64):
        self.d, self.flips = d, flips or {}
        model = ZOO[d.model](in_ch=d.c, classes=d.classes, hw=d.h).to(dtype)
        model.train()
        relus = [m for m in model.modules() if isinstance(m, torch.nn.ReLU)]
        for m in relus:
            m.inplace = False  # the hooks need the input next to the output
        state = model.state_dict()
        self.perm, self.after_flatten = None, None
        fin = self._flatten_input(model)
        if fin:
            self.after_flatten = [k for k, m in model.named_modules() if isinstance(m, torch.nn.Linear)][0] + ".weight"
            fc, fh, fw = fin
            # cnntrain flattens an NHWC map as (h, w, c), PyTorch an NCHW one as (c, h, w).
            self.perm = np.arange(fh * fw * fc).reshape(fh, fw, fc).transpose(2, 0, 1).reshape(-1)
        only_cn = sorted(set(d.params) - set(state))
        only_torch = sorted(k for k, _ in model.named_parameters() if k not in d.params)
        if only_cn or only_torch:
            sys.exit(f"{d.model}: parameters only in cnntrain: {only_cn}; only in PyTorch: {only_torch}")
        with torch.no_grad():
            for k, a in d.params.items():
                state[k].copy_(torch.from_numpy(np.ascontiguousarray(self.convert(k, a, state))).to(dtype))
        self.near = []  # (|z|, call, flat index, z > 0) of ReLU inputs within KINK of 0
        self.calls = 0
        for m in relus:
            m.register_forward_hook(self._relu_hook)
        logits = model(d.x.to(dtype))
        loss = F.cross_entropy(logits, d.labels)
        loss.backward()
        self.logits, self.loss = logits.detach().double().numpy(), loss.item()
        self.grads = {k: p.grad.double().numpy() for k, p in model.named_parameters()}
        self.buffers = {k: v.double().numpy() for k, v in model.state_dict().items() if k in d.buffers}
        self.state = state

    def _flatten_input(self, model):
        seen = []
        hooks = [m.register_forward_hook(lambda mod, inp, out: seen.append(tuple(inp[0].shape[1:])))
                 for m in model.modules() if isinstance(m, torch.nn.Flatten)]
        model.eval()  # the probe must not move the running statistics
        with torch.no_grad():
            model(torch.zeros(1, self.d.c, self.d.h, self.d.w, dtype=next(model.parameters()).dtype))
        model.train()
        for hk in hooks:
            hk.remove()
        return seen[0] if seen and len(seen[0]) == 3 and seen[0][1:] != (1, 1) else None

    def _relu_hook(self, mod, inp, out):
        z = inp[0]
        call = self.calls
        self.calls += 1
        zf = z.detach().flatten()
        for i in (zf.abs() < KINK).nonzero().flatten().tolist():
            self.near.append((abs(zf[i].item()), call, i, zf[i].item() > 0))
        mine = [(i, on) for (c, i), on in self.flips.items() if c == call]
        if not mine:
            return out
        mask_on = torch.zeros(z.numel(), dtype=torch.bool)
        mask_off = torch.zeros(z.numel(), dtype=torch.bool)
        for i, on in mine:
            (mask_on if on else mask_off)[i] = True
        flat = torch.where(mask_on, z.flatten(), out.flatten())
        flat = torch.where(mask_off, torch.zeros_like(flat), flat)
        return flat.view_as(out)

    def convert(self, name, a, state=None):
        if name == self.after_flatten:
            return np.asarray(a, dtype=np.float64)[:, self.perm]
        return to_torch(name, a, (state or self.state)[name])


def compare(d, t, rtol):
    """Failures (strings) and the worst error per kind."""
    failures, worst = [], {}

    def check(kind, what, got, want):
        got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
        scale = np.abs(want).max()
        err = np.abs(got - want).max() / scale if scale > 0 else np.abs(got).max()
        worst[kind] = max(worst.get(kind, 0.0), err)
        if not err <= rtol:
            i = np.unravel_index(np.abs(got - want).argmax(), got.shape)
            failures.append(f"{what}: max error {err:.3g} of its scale {scale:.3g} (at {i}: cnntrain {got[i]:.9g}, "
                            f"PyTorch {want[i]:.9g})")

    check("logits", "logits", d.logits, t.logits)
    check("loss", "loss", [d.loss], [t.loss])
    for k, a in d.grads.items():
        check("gradients", "gradient " + k, t.convert(k, a), t.grads[k])
    for k, a in d.buffers.items():
        check("running statistics", "buffer " + k, a, t.buffers[k])
    return failures, worst


def conditioning(t, t32):
    """How far PyTorch's float32 gradients are from its float64 ones (worst tensor, relative to its scale)."""
    return max(np.abs(t32.grads[k] - g).max() / max(np.abs(g).max(), 1e-300) for k, g in t.grads.items())


def main():
    d = Dump(sys.argv[1])
    rtol = float(sys.argv[sys.argv.index("--rtol") + 1]) if "--rtol" in sys.argv else 1e-4
    t = TorchRun(d)
    cond = conditioning(t, TorchRun(d, dtype=torch.float32))
    if cond > CONDITION:
        print(f"FAIL {d.model}: an ill-conditioned batch: PyTorch's own float32 gradients differ from its float64 "
              f"ones by {cond:.2g} of a tensor's scale (> {CONDITION:g}), so a 1e-4 comparison means nothing; choose "
              "another seed or initialisation (tests/parity/parity.mk)")
        sys.exit(1)
    failures, worst = compare(d, t, rtol)
    note = ""
    if failures:
        # Each ReLU input near its kink decided as float32 might have: first alone, then in pairs.
        near = sorted(t.near)[:8]
        tries = [(e,) for e in near] + list(itertools.combinations(near[:4], 2))
        for combo in tries:
            flips = {(c, i): not positive for _, c, i, positive in combo}
            f2, w2 = compare(d, TorchRun(d, flips), rtol)
            if not f2:
                failures, worst = f2, w2
                note = "; explained by " + ", ".join(
                    f"ReLU application {c} element {i} (input {'+' if positive else '-'}{z:.2g} in float64) taken "
                    f"{'off' if positive else 'on'}, as float32 rounding did" for z, c, i, positive in combo)
                break
    summary = ", ".join(f"{k} {v:.1e}" for k, v in worst.items())
    if failures:
        print(f"FAIL {d.model}: " + "\n  ".join(failures[:10]))
        sys.exit(1)
    print(f"ok: {d.model} ({len(d.params)} parameter tensors) matches PyTorch within {rtol:g} of each tensor's "
          f"scale; worst: {summary} (PyTorch float32 vs float64: {cond:.1e}){note}")


main()
