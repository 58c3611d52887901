"""Record torch's autocast output dtypes for every engine op (tests/data/autocast_torch.json).

    python scripts/record_autocast_table.py      # needs torch (CPU build is enough)

For each op, input dtypes and autocast dtype (CPU: bfloat16 and float16) it runs the op
under ``torch.autocast("cpu", dtype)`` and records the output dtype. It also records
the op names registered for the AutocastCUDA and AutocastCPU dispatch keys, which the
tests compare with specs/policies/*.toml. CUDA output dtypes cannot be recorded on a
machine without a GPU; the torch-cuda expectations are checked against the registration
list and torch's documented op lists instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "autocast_torch.json"
DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
      "float64": torch.float64}


def t(shape: tuple[int, ...], dt: str, pos: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(shape, generator=g, dtype=torch.float64)
    return (x + 0.1 if pos else x - 0.5).to(DT[dt])


def cases() -> dict[str, tuple[int, object]]:
    """op -> (number of float inputs, function of the float inputs)."""
    tgt = torch.tensor([0, 2, 1, 3])
    return {
        "add": (2, lambda a, b: a + b), "sub": (2, lambda a, b: a - b),
        "mul": (2, lambda a, b: a * b), "div": (2, lambda a, b: a / b),
        "neg": (1, lambda a: -a), "pow": (1, lambda a: a ** 2.0),
        "matmul": (2, lambda a, b: a @ b.T), "linear": (2, lambda a, w: F.linear(a, w)),
        "exp": (1, torch.exp), "log": (1, torch.log), "tanh": (1, torch.tanh),
        "sigmoid": (1, torch.sigmoid), "relu": (1, F.relu), "gelu": (1, F.gelu),
        "softmax": (1, lambda a: F.softmax(a, -1)),
        "log_softmax": (1, lambda a: F.log_softmax(a, -1)),
        "layer_norm": (1, lambda a: F.layer_norm(a, a.shape[-1:])),
        "rms_norm": (1, lambda a: F.rms_norm(a, a.shape[-1:])),
        "sum": (1, torch.sum), "mean": (1, torch.mean), "reshape": (1, lambda a: a.reshape(-1)),
        "transpose": (1, lambda a: a.T), "index": (1, lambda a: a[1:3]),
        "embedding": (1, lambda w: F.embedding(torch.tensor([0, 1]), w)),
        "concat": (2, lambda a, b: torch.cat([a, b])),
        "dropout": (1, lambda a: F.dropout(a, 0.0, training=True)),
        "cross_entropy": (1, lambda a: F.cross_entropy(a, tgt)),
        "nll_loss": (1, lambda a: F.nll_loss(a, tgt)),
        "mse_loss": (2, F.mse_loss),
        "binary_cross_entropy": (
            2, lambda p, y: F.binary_cross_entropy(torch.sigmoid(p), torch.sigmoid(y))),
        "conv2d": (2, lambda x, w: F.conv2d(x[None, None], w[None, None])),
        "scaled_dot_product_attention": (2, lambda q, k: F.scaled_dot_product_attention(
            q[None], k[None], k[None])),
        "silu": (1, F.silu), "sqrt": (1, torch.sqrt), "rsqrt": (1, torch.rsqrt),
        "where": (2, lambda a, b: torch.where(a > 0, a, b)), "tril": (1, torch.tril),
        "permute": (1, lambda a: a.permute(1, 0)),
    }


def main() -> None:
    rows = []
    for ac in ("bfloat16", "float16"):
        for op, (n, fn) in cases().items():
            combos = [("float32",) * n, (ac,) * n]
            if n == 2:
                combos += [("float32", ac), (ac, "float32")]
            for dts in combos:
                args = [t((4, 4), d, pos=op in ("log",)) for d in dts]
                with torch.autocast("cpu", dtype=DT[ac]):
                    try:
                        out = str(fn(*args).dtype).replace("torch.", "")
                    except RuntimeError as e:
                        out = f"error: {str(e).splitlines()[0][:80]}"
                rows.append({"policy": "torch-cpu", "dtype": ac, "op": op, "inputs": list(dts),
                             "output": out})
    reg = {k: sorted(torch._C._dispatch_get_registrations_for_dispatch_key(k))
           for k in ("AutocastCUDA", "AutocastCPU")}
    OUT.write_text(json.dumps({"torch": torch.__version__, "rows": rows, "registrations": reg},
                              indent=1) + "\n")
    print(f"wrote {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
