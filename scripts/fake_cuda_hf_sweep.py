"""Every Hugging Face causal-LM architecture through the fake-CUDA autocast oracle.

For each model type of ``transformers``' causal-LM mapping, one small configuration
(``fake_cuda_autocast.HF_SIZES``, with 2 key/value heads and head size 8 where the
configuration takes them) runs through ``fake_cuda_autocast.check``: the forward pass and
loss (a padded second row in the attention mask) under torch's real CUDA autocast on fake
CUDA tensors, and on CPU tensors under ``ampref.torch.autocast("cuda")``, in float16 and
bfloat16; casts and policy-listed ops compared. Each model runs in its own process with
a 10 GB address-space limit and a 200 s timeout (one architecture's default vocabulary
once took 24 GB). Many architectures refuse the generic sizes or cannot run on fake
tensors (kernels that ask the driver): they are counted, not compared.

Usage: ``python scripts/fake_cuda_hf_sweep.py --out F.jsonl`` (results appended, one JSON
line per model type; a summary printed at the end). Needs a CUDA build of torch (no GPU)
and transformers. The figures in ``docs/bridge-models.md`` came from torch 2.14.1+cu130
and transformers 5.24.0.
"""

from __future__ import annotations

import argparse
import collections
import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

LIMIT_BYTES = 10 * 2**30
TIMEOUT_S = 200


def one(model_type: str) -> dict[str, Any]:
    """Check one model type (in this process)."""
    import transformers
    from transformers.models.auto import configuration_auto, modeling_auto

    import fake_cuda_autocast as fc

    transformers.logging.set_verbosity_error()
    model = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]
    config = configuration_auto.CONFIG_MAPPING_NAMES.get(model_type)
    if not isinstance(model, str) or not hasattr(transformers, model) or \
            not hasattr(transformers, config or ""):
        return {"type": model_type, "skipped": "not exported by transformers"}
    for kw in ({"num_key_value_heads": 2, "head_dim": 8}, {}):
        try:
            getattr(transformers, str(config))(**{**fc.HF_SIZES, **kw})
            break
        except Exception as e:  # noqa: BLE001 - a refused configuration is counted
            refused = f"{type(e).__name__}: {e}"[:200]
    else:
        return {"type": model_type, "config_error": refused}
    name = f"hf:{model}"
    fc.MODELS[name] = fc._hf(str(config), model, kw)
    return {"type": model_type, **fc.check(name)}


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def category(row: dict[str, Any]) -> str:
    """equal, differs, or why the model was not compared."""
    for key in ("skipped", "config_error", "crash"):
        if key in row:
            return key
    parts = [row.get(f"torch.{d}", {}) for d in ("float16", "bfloat16")]
    if any("fake_cuda_error" in p for p in parts):
        return "fake tensors cannot run it"
    same = all(p[k]["first_difference"] is None for p in parts for k in ("casts", "listed"))
    return "equal" if same else "differs"


def sweep(out: Path) -> int:
    from transformers.models.auto import modeling_auto

    counts: collections.Counter[str] = collections.Counter()
    for model_type in sorted(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        try:
            run = subprocess.run([sys.executable, __file__, "--one", model_type],
                                 capture_output=True, text=True, timeout=TIMEOUT_S,
                                 preexec_fn=_limit)
            lines = run.stdout.strip().splitlines()
            row = json.loads(lines[-1]) if run.returncode == 0 and lines else \
                {"type": model_type, "crash": run.returncode}
        except subprocess.TimeoutExpired:
            row = {"type": model_type, "crash": "timeout"}
        counts[category(row)] += 1
        if category(row) == "differs":
            print(f"{model_type} differs: {json.dumps(row)[:400]}", flush=True)
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
    print(dict(counts))
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--one", help="check one model type and print its JSON row")
    args = ap.parse_args(argv)
    if args.one:
        from transformers.models.auto import modeling_auto

        known = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        if args.one not in known:
            ap.error(f"--one {args.one!r} is not a causal-LM model type of transformers "
                     f"(choose from its {len(known)}, e.g. {', '.join(sorted(known)[:3])})")
        print(json.dumps(one(args.one)))
        return 0
    if args.out is None:
        ap.error("--out is required for a sweep")
    return sweep(args.out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
