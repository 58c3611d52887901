"""torch's real CUDA autocast on whole models without a GPU, against ampref's CUDA lists.

A CUDA build of torch runs a model's forward pass on *fake* CUDA tensors
(``FakeTensorMode``: shapes and dtypes, no data) through the real ``AutocastCUDA``
kernels when CUDA autocast is switched on by hand (``torch.autocast`` itself refuses
without a device). So every cast CUDA autocast makes, and the dtype of every op the
policy decides, can be read on any machine, for any model that builds on CUDA. The same
forward pass runs on real CPU tensors under ``ampref.torch.autocast("cuda", dtype)``
(TRC-AUT-002); two things must be equal:

- the casts: every ``_to_copy`` between two floating dtypes (source dtype, shape,
  target dtype), in order (copies to the device keep their dtype and are left out);
- the policy's ops: every aten op the CUDA policy lists, with its floating inputs' and
  its outputs' dtypes.

Device kernels differ (cuDNN batch norm, fused dropout) and are not compared;
``F.scaled_dot_product_attention`` (CUDA's backends; fake tensors select the math one,
which computes float16 in float32) is logged as one entry. Two ops branch on the
device and are rewritten in the CPU's form: ``softmax`` / ``log_softmax`` of a float16
tensor with ``dtype=float32`` (autocast's fp32_set_opt_dtype) runs CUDA's
``_softmax(x, half_to_float=True)`` where the CPU casts first (``_to_copy``, then
``_softmax``; the same values, the cast is exact), and ``rms_norm`` runs as CUDA's
``_fused_rms_norm``. (Where the CPU decomposes ``rms_norm``, its inner ``pow`` and
``rsqrt`` are listed ops the CUDA log lacks: a kernel difference, reported.)
Backward passes cannot run on fake CUDA tensors (the autograd engine asks
the device); autocast acts in the forward pass. The oracle was checked against the
traces recorded on an H100 (``tests/data/autocast_traces_cuda_h100.json``).

Usage: ``python scripts/fake_cuda_autocast.py [--out F.json] [NAME ...]``; names are
``zoo:<model>``, ``torchvision:<model>``, ``timm:<model>``, ``hf:<Model>`` (see
``--list``). Needs a CUDA build of torch (no GPU); torchvision, timm and transformers
for their models. Results of a run are kept in ``docs/bridge-models.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ampref.common.atomicio import atomic_write

#: a builder makes (model, batch, loss) on the current default device
Build = Callable[[], tuple[Any, Any, Callable[[Any, Any], Any]]]
ROOT = Path(__file__).resolve().parents[1]


def _entry(name: str, ins: list[Any], out: Any) -> tuple[Any, ...]:
    outs = out if isinstance(out, (list, tuple)) else [out]
    return (name, tuple(str(a.dtype)[6:] for a in ins if a.is_floating_point()),
            tuple(str(o.dtype)[6:] for o in outs if isinstance(o, torch.Tensor)),
            tuple(ins[0].shape) if ins else ())


class OpLog(TorchDispatchMode):  # type: ignore[misc]
    """Each aten op: (name, floating inputs' dtypes, outputs' dtypes, first input's shape).
    ``prim::`` queries are left out (fake tensors answer them through the dispatcher), and
    so are the ops inside ``F.scaled_dot_product_attention``, logged as one entry by
    :func:`fused_as_one_entry`: its backends differ by device (CUDA's math backend, the one
    fake tensors select, computes float16 in float32)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[Any, ...]] = []
        self.muted = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func.namespace == "prim" or self.muted:
            return out
        ins = [a for a in args if isinstance(a, torch.Tensor)]
        self.ops.append(_entry(func.overloadpacket.__name__, ins, out))
        return out


#: functionals whose device backends differ inside (attention: fake tensors select CUDA's
#: math backend, which computes float16 in float32)
FUSED = ("scaled_dot_product_attention",)


@contextlib.contextmanager
def fused_as_one_entry(log: OpLog) -> Iterator[None]:
    """Each functional of :data:`FUSED` logged as one entry (its inputs as the caller
    passes them, before autocast; its output's dtype after), the ops inside it muted.
    The module attributes are swapped for the region (a measuring script's patch):
    ``nn.MultiheadAttention`` and timm look them up at each call."""
    functional = torch.nn.functional
    saved = {name: getattr(functional, name) for name in FUSED}

    def one_entry(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            log.muted += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                log.muted -= 1
            log.ops.append(_entry(name, [a for a in args if isinstance(a, torch.Tensor)], out))
            return out
        return call

    for name, fn in saved.items():
        setattr(functional, name, one_entry(name, fn))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(functional, name, fn)


def _cross_entropy(model: Any, x: Any, y: Any) -> Any:
    out = model(x)
    return torch.nn.functional.cross_entropy(out.float(), y.to(out.device))


def _image(kind: str, name: str, size: int, **kw: Any) -> Build:
    def build() -> tuple[Any, Any, Callable[[Any, Any], Any]]:
        if kind == "torchvision":
            import torchvision.models as tvm
            model = getattr(tvm, name)(num_classes=5, **kw)
        else:
            import timm
            model = timm.create_model(name, num_classes=5, **kw)
        x = torch.randn(2, 3, size, size)
        y = torch.tensor([1, 2])
        return model, x, lambda m, b: _cross_entropy(m, b, y)
    return build


def _dense(name: str, shape: tuple[int, ...]) -> Build:
    """A torchvision segmentation (output ``["out"]``) or video classification model."""
    def build() -> tuple[Any, Any, Callable[[Any, Any], Any]]:
        import torchvision.models as tvm
        import torchvision.models.segmentation as seg
        import torchvision.models.video as video
        x = torch.randn(*shape)
        if hasattr(seg, name):
            model = getattr(seg, name)(num_classes=3, weights_backbone=None, aux_loss=False)
            y = torch.randint(0, 3, (shape[0], *shape[2:]))
            return model, x, lambda m, b: torch.nn.functional.cross_entropy(
                m(b)["out"].float(), y.to(b.device))
        assert hasattr(video, name) or hasattr(tvm, name)
        return getattr(video, name)(num_classes=5), x, \
            lambda m, b: _cross_entropy(m, b, torch.tensor([1, 2]))
    return build


def _zoo(name: str) -> Build:
    def build() -> tuple[Any, Any, Callable[[Any, Any], Any]]:
        sys.path.insert(0, str(ROOT / "tests" / "bridge"))
        import zoo
        c = zoo.case(name)
        return c.model, c.inputs, lambda m, b: c.loss(m(b))
    return build


#: Hugging Face configurations: (config class, model class, keywords), small sizes
HF_SIZES = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 64, "vocab_size": 100, "max_position_embeddings": 64}
HF = [
    ("LlamaConfig", "LlamaForCausalLM", {"num_key_value_heads": 2}),
    ("BertConfig", "BertForMaskedLM", {}),
    ("GPT2Config", "GPT2LMHeadModel", {}),
    ("MistralConfig", "MistralForCausalLM", {"num_key_value_heads": 2}),
    ("Qwen2Config", "Qwen2ForCausalLM", {"num_key_value_heads": 2}),
    ("PhiConfig", "PhiForCausalLM", {}),
    ("GPTNeoXConfig", "GPTNeoXForCausalLM", {}),
    ("FalconConfig", "FalconForCausalLM", {}),
    ("BloomConfig", "BloomForCausalLM", {"n_head": 4}),
    ("RobertaConfig", "RobertaForMaskedLM", {}),
    ("DebertaV2Config", "DebertaV2ForMaskedLM", {}),
    ("T5Config", "T5ForConditionalGeneration", {"d_model": 32, "d_kv": 8, "d_ff": 64,
                                                "num_layers": 2, "num_heads": 4,
                                                "decoder_start_token_id": 0}),
    ("BartConfig", "BartForConditionalGeneration", {
        "d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
        "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64}),
    ("MixtralConfig", "MixtralForCausalLM", {"num_key_value_heads": 2, "num_local_experts": 4,
                                            "num_experts_per_tok": 2}),
    ("Gemma2Config", "Gemma2ForCausalLM", {"num_key_value_heads": 2, "head_dim": 8}),
    ("GemmaConfig", "GemmaForCausalLM", {"num_key_value_heads": 2, "head_dim": 8}),
]


def _hf(config: str, model: str, kw: dict[str, Any]) -> Build:
    def build() -> tuple[Any, Any, Callable[[Any, Any], Any]]:
        import transformers
        transformers.logging.set_verbosity_error()
        # eager attention: the fused attention backends differ by device (not autocast)
        cfg = getattr(transformers, config)(**{**HF_SIZES, **kw})
        cfg._attn_implementation = "eager"
        ids = torch.randint(0, 100, (2, 8))
        # a padded second row: without one, some models drop an all-ones mask after
        # reading its values, which fake tensors cannot do (their branch keeps it)
        mask = torch.ones(2, 8, dtype=torch.long)
        mask[1, 5:] = 0
        return getattr(transformers, model)(cfg), ids, \
            lambda m, b: m(input_ids=b, attention_mask=mask.to(b.device), labels=b).loss
    return build


TORCHVISION = [("resnet18", 64), ("mobilenet_v3_small", 64), ("convnext_tiny", 64),
               ("swin_t", 64), ("efficientnet_b0", 64), ("densenet121", 64),
               ("vit_b_16", 32), ("regnet_y_400mf", 64), ("shufflenet_v2_x0_5", 64),
               ("squeezenet1_0", 64), ("googlenet", 64), ("maxvit_t", 224)]
DENSE = [("fcn_resnet50", (2, 3, 32, 32)), ("deeplabv3_mobilenet_v3_large", (2, 3, 32, 32)),
         ("lraspp_mobilenet_v3_large", (2, 3, 32, 32)), ("r3d_18", (2, 3, 4, 32, 32)),
         ("r2plus1d_18", (2, 3, 4, 32, 32))]
TIMM = [("vit_tiny_patch16_224", 32, {"img_size": 32}), ("convnextv2_atto", 64, {}),
        ("levit_128s", 224, {}), ("mobilevit_xxs", 64, {}), ("nfnet_f0", 64, {}),
        ("eva02_tiny_patch14_224", 28, {"img_size": 28})]

MODELS: dict[str, Build] = {
    **{f"zoo:{n}": _zoo(n) for n in ("mlp", "cnn", "resnet", "transformer", "gpt", "lstm",
                                     "gru", "metric")},
    **{f"torchvision:{n}": _image("torchvision", n, s,
                                  **({"image_size": s} if n == "vit_b_16" else
                                     {"aux_logits": False, "init_weights": True}
                                     if n == "googlenet" else {}))
       for n, s in TORCHVISION},
    **{f"torchvision:{n}": _dense(n, shape) for n, shape in DENSE},
    **{f"timm:{n}": _image("timm", n, s, **kw) for n, s, kw in TIMM},
    **{f"hf:{m}": _hf(c, m, kw) for c, m, kw in HF},
}


def _forward(build: Build, region: Callable[[], Any],
             fake: Any = None) -> list[tuple[Any, ...]]:
    """The forward pass and loss of a model built on the CPU (seeded, outside any
    region: some initialisers read values), logged inside ``region``; with ``fake`` (a
    FakeTensorMode) its parameters, buffers and batch become fake CUDA tensors."""
    torch.manual_seed(0)
    model, batch, loss = build()
    with fake if fake is not None else contextlib.nullcontext():
        call = model
        if fake is not None:
            def to_fake(t: torch.Tensor) -> torch.Tensor:
                f = fake.from_tensor(t).to("cuda").detach()
                return f.requires_grad_(t.requires_grad) if t.is_floating_point() else f
            state = {k: to_fake(v) for k, v in [*model.named_parameters(),
                                                *model.named_buffers()]}
            batch = to_fake(batch)

            def call(*a: Any, **k: Any) -> Any:
                return torch.func.functional_call(model, state, a, k)
        torch.manual_seed(1)
        with region(), OpLog() as log, fused_as_one_entry(log):
            loss(call, batch)
    return log.ops


@contextlib.contextmanager
def cuda_autocast_on(dtype: torch.dtype) -> Iterator[None]:
    """torch's CUDA autocast state switched on by hand (torch.autocast refuses)."""
    prev = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
    torch.set_autocast_enabled("cuda", True)
    torch.set_autocast_dtype("cuda", dtype)
    torch.autocast_increment_nesting()
    try:
        yield
    finally:
        torch.autocast_decrement_nesting()
        torch.set_autocast_enabled("cuda", prev[0])
        torch.set_autocast_dtype("cuda", prev[1])


def on_fake_cuda(build: Build, dtype: torch.dtype) -> list[tuple[Any, ...]]:
    """The forward pass and loss under torch's CUDA autocast on fake CUDA tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    return _forward(build, lambda: cuda_autocast_on(dtype),
                    FakeTensorMode(allow_non_fake_inputs=True))


def on_ampref(build: Build, dtype: torch.dtype) -> list[tuple[Any, ...]]:
    """The forward pass and loss on CPU tensors under ``ampref.torch.autocast("cuda")``."""
    import ampref.torch as at

    return _forward(build, lambda: at.autocast("cuda", dtype))


def _cpu_form(ops: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """CUDA's half_to_float softmax written as the CPU's cast and softmax; CUDA's
    ``_fused_rms_norm`` (output and inverse rms) as the CPU's ``rms_norm`` (output), both
    with their input only (the weight may be passed by keyword)."""
    out = []
    for o in ops:
        if o[0] in ("_softmax", "_log_softmax") and o[1] == ("float16",) and \
                o[2] == ("float32",):
            out += [("_to_copy", o[1], o[2], o[3]), (o[0], o[2], o[2], o[3])]
        elif o[0] in ("rms_norm", "_fused_rms_norm"):  # CUDA's kernel and the CPU's op
            out.append(("rms_norm", o[1][:1], o[2][:1], o[3]))
        else:
            out.append(o)
    return out


def compared(ops: list[tuple[Any, ...]], listed: frozenset[str]) -> dict[str, list[Any]]:
    """What autocast decides: the casts in order, and the listed ops' output dtypes."""
    ops = _cpu_form(ops)
    # a copy to the device keeps its dtype; a float -> integer conversion is the model's
    floating = {"float16", "bfloat16", "float32", "float64"}
    return {"casts": [(o[1], o[3], o[2]) for o in ops if o[0] == "_to_copy" and o[1]
                      and o[2][0] in floating and o[2] != o[1]],
            "listed": [(o[0], o[1], o[2]) for o in ops
                       if o[0] in listed or o[0] in FUSED]}


def listed_ops() -> frozenset[str]:
    from ampref.policy.policies import load_policy

    return frozenset(n.partition(".")[0] for n in load_policy("torch-cuda").categories)


def check(name: str) -> dict[str, Any]:
    """One model in float16 and bfloat16: counts, and the first difference of each part."""
    row: dict[str, Any] = {"model": name}
    start = time.perf_counter()
    listed = listed_ops()
    for dtype in (torch.float16, torch.bfloat16):
        try:
            theirs = compared(on_fake_cuda(MODELS[name], dtype), listed)
        except ImportError as e:
            return {**row, "skipped": str(e)}
        except Exception as e:  # noqa: BLE001 - a model fake tensors cannot run is a finding
            row[str(dtype)] = {"fake_cuda_error": f"{type(e).__name__}: {e}"[:300]}
            continue
        ours = compared(on_ampref(MODELS[name], dtype), listed)
        part: dict[str, Any] = {}
        for key in ("casts", "listed"):
            a, b = theirs[key], ours[key]
            first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                         None if len(a) == len(b) else min(len(a), len(b)))
            part[key] = {"n": len(a), "first_difference": first,
                         "cuda": str(a[first]) if first is not None and first < len(a)
                         else None,
                         "ampref": str(b[first]) if first is not None and first < len(b)
                         else None}
        row[str(dtype)] = part
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def record(names: list[str], path: str) -> int:
    """torch's side of :func:`compared` for ``names`` in float16 and bfloat16, as JSON."""
    listed = listed_ops()
    models = {n: {str(d)[6:]: compared(on_fake_cuda(MODELS[n], d), listed)
                  for d in (torch.float16, torch.bfloat16)} for n in names}
    head = {"provenance": f"scripts/fake_cuda_autocast.py --record: torch "
                          f"{torch.__version__}'s CUDA autocast on fake CUDA tensors, no GPU "
                          f"(cuda available: {torch.cuda.is_available()})",
            "torch": torch.__version__}
    atomic_write(path, _one_entry_per_line(head, models))
    return 0


def _one_entry_per_line(head: dict[str, str], models: dict[str, Any]) -> str:
    """The record as JSON with one cast or op per line (readable, and diffs by entry)."""
    lines = ["{", *(f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()),
             ' "models": {']
    for i, (model, dtypes) in enumerate(models.items()):
        lines.append(f"  {json.dumps(model)}: {{")
        for j, (dtype, parts) in enumerate(dtypes.items()):
            lines.append(f"   {json.dumps(dtype)}: {{")
            for k, (part, entries) in enumerate(parts.items()):
                body = [f"     {json.dumps(e)}" for e in entries]
                lines += [f"    {json.dumps(part)}: [", ",\n".join(body),
                          "    ]" + ("," if k < len(parts) - 1 else "")]
            lines.append("   }" + ("," if j < len(dtypes) - 1 else ""))
        lines.append("  }" + ("," if i < len(models) - 1 else ""))
    return "\n".join([*lines, " }", "}"]) + "\n"


def _summary(row: dict[str, Any]) -> str:
    if "skipped" in row:
        return f"skipped ({row['skipped']})"
    out = []
    for d in ("torch.float16", "torch.bfloat16"):
        r = row.get(d, {})
        if "fake_cuda_error" in r:
            out.append(f"{d[6:]}: fake CUDA failed ({r['fake_cuda_error'][:80]})")
            continue
        out.append(f"{d[6:]}: " + ", ".join(
            f"{k} {r[k]['n']} " + ("equal" if r[k]["first_difference"] is None else
                                   f"differ at {r[k]['first_difference']}: cuda "
                                   f"{r[k]['cuda']} ampref {r[k]['ampref']}")
            for k in ("casts", "listed")))
    return "; ".join(out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="models (default all; see --list)")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--list", action="store_true", help="print the model names")
    parser.add_argument("--record", help="write torch's side only (what is compared, per "
                                         "model and dtype) as JSON here, for replay tests")
    opts = parser.parse_args(argv)
    if opts.list:
        print("\n".join(MODELS))
        return 0
    unknown = [n for n in opts.names if n not in MODELS]
    if unknown:
        print(f"fake_cuda_autocast: unknown model {unknown[0]!r}; see --list", file=sys.stderr)
        return 2
    if opts.record:
        return record(opts.names or list(MODELS), opts.record)
    rows = []
    for n in opts.names or MODELS:
        rows.append(check(n))
        print(f"{n}: {_summary(rows[-1])}", flush=True)
    if opts.out:  # written whole or not at all
        atomic_write(opts.out, json.dumps({"torch": torch.__version__, "models": rows},
                                          indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
