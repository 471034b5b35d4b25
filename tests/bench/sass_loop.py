#!/usr/bin/env python3
"""Instruction counts of the tiled-GEMM kernels from a `cuobjdump -sass` listing: per kernel the total, the
k-tile loop (the body of the widest backward branch) and its FFMA count, and the runtime integer divisions
(each div/rem sequence starts with one I2F.RP). docs/gpu.md has the command line and the figures.
    cuobjdump -sass build/nvcc/kernels/cuda/conv2d.o > conv.sass; tests/bench/sass_loop.py conv.sass"""
import re
import sys

kernels, cur = {}, None
for line in open(sys.argv[1]):
    m = re.search(r"Function : (\S+)", line)
    if m:
        cur = m.group(1)
        kernels[cur] = []
        continue
    m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if m and cur:
        kernels[cur].append((int(m.group(1), 16), m.group(2)))
for name, code in kernels.items():
    loop = (0, -1)
    for addr, op in code:
        b = re.search(r"BRA (?:`?\()?(?:\S+ )?0x([0-9a-f]+)", op)
        if b and int(b.group(1), 16) < addr and addr - int(b.group(1), 16) > loop[1] - loop[0]:
            loop = (int(b.group(1), 16), addr)
    body = [op for addr, op in code if loop[0] <= addr <= loop[1]]
    divs = lambda ops: sum("I2F.RP" in op or "I2F.U32.RP" in op for op in ops)
    ffma = sum(op.startswith("FFMA") for op in body)
    loaders = re.search(r"gemm_tile_kernelI(.*?)EEEv", name)
    label = re.sub(r"N\d+_GLOBAL__N__\w+?_cu_\w{8}|NS\d_|\d+(?=[A-Z])", " ", loaders.group(1)) if loaders else name[:60]
    print(f"{len(code):5d} instr, {divs([op for _, op in code]):3d} int-div; k-tile loop {len(body):4d} instr "
          f"({ffma} FFMA), {divs(body):3d} int-div  {label}")
