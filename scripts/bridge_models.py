"""Check the torch bridge on real models (torchvision, timm, Hugging Face transformers):
one training step of each, once under ``torch.autocast("cpu", dtype)`` and once under
``ampref.torch.emulate`` + ``ampref.torch.autocast("cpu", dtype)``, logged aten op by
aten op below autograd with every output's dtype and strides (strides of size-1
dimensions left out: they address nothing). The two logs must be equal (TRC-AUT-001,
TRC-EMU-005). Then the same step under ``emulate(fallback="error")`` with torch's CUDA
autocast lists in float16 (TRC-AUT-002), which fails on any op without a reference.

Usage: ``python scripts/bridge_models.py [--out results.json] [NAME ...]``. Needs
torchvision, timm and transformers installed (not ampref's dependencies); models whose
package is missing are reported as skipped. Results of a run are kept in
``docs/bridge-models.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import ampref.torch as at
from ampref.common.atomicio import atomic_write

Build = Callable[[], tuple[Any, Any, Callable[[Any, Any], Any]]]


class OpLog(TorchDispatchMode):  # type: ignore[misc]
    """Each aten op's name (``full``: with its overload) and its strided outputs' (dtype,
    strides of dimensions > 1)."""

    def __init__(self, full: bool = False) -> None:
        super().__init__()
        self.ops: list[Any] = []
        self.full = full

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (list, tuple)) else [out]
        self.ops.append((str(func) if self.full else func.overloadpacket.__name__, [
            (str(o.dtype), [s for s, n in zip(o.stride(), o.shape, strict=True) if n > 1])
            for o in outs if isinstance(o, torch.Tensor) and o.layout == torch.strided]))
        return out


def _image(size: int) -> Any:
    return torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0))


def _classify(model: Any, x: Any) -> Any:
    return torch.nn.functional.cross_entropy(model(x).float(), torch.tensor([1, 2]))


def _lm(model: Any, ids: Any) -> Any:
    """The loss of a language model (causal or masked) that predicts its own ids."""
    return model(input_ids=ids, labels=ids).loss


def _vision(module: str, name: str, size: int, **kw: Any) -> Build:
    def build() -> tuple[Any, Any, Callable[[Any, Any], Any]]:
        if module == "torchvision":
            import torchvision.models as tvm
            return getattr(tvm, name)(**kw), _image(size), _classify
        import timm
        return timm.create_model(name, num_classes=5, **kw), _image(size), _classify
    return build


# The size every BERT-shaped transformers config is built at (a causal LM's keywords
# override or extend it); token ids stay below its vocabulary.
_BERT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 64, "vocab_size": 100, "max_position_embeddings": 64}


def _ids(n: int = 8) -> Any:
    return torch.randint(0, _BERT["vocab_size"], (2, n),
                         generator=torch.Generator().manual_seed(0))


def _hf(config: str, model: str, **kw: Any) -> Build:
    def build() -> tuple[Any, Any, Callable[[Any, Any], Any]]:
        import transformers
        transformers.logging.set_verbosity_error()
        cfg = getattr(transformers, config)(**{**_BERT, **kw})
        return getattr(transformers, model)(cfg), _ids(), _lm
    return build


def _hf_task(config: str, model: str, batch: Callable[[], Any], loss: Callable[[Any, Any], Any],
             **cfg: Any) -> Build:
    """A transformers model that is not a causal LM: its config spelled out in full (the
    size names differ by family), a batch maker and a loss on the model's output."""
    def build() -> tuple[Any, Any, Callable[[Any, Any], Any]]:
        import transformers
        transformers.logging.set_verbosity_error()
        return getattr(transformers, model)(getattr(transformers, config)(**cfg)), batch(), loss
    return build


def _lm(model: Any, ids: Any) -> Any:
    return model(input_ids=ids, labels=ids).loss


def _seq2seq(model: Any, ids: Any) -> Any:
    return model(input_ids=ids, decoder_input_ids=ids, labels=ids).loss


def _image_labels(model: Any, x: Any) -> Any:
    return model(pixel_values=x, labels=torch.tensor([0, 1])).loss


def _ctc(model: Any, x: Any) -> Any:
    labels = torch.randint(1, 20, (2, 3), generator=torch.Generator().manual_seed(1))
    return model(input_values=x, labels=labels).loss


def _whisper(model: Any, x: Any) -> Any:
    return model(input_features=x, labels=_ids(6)).loss


_ENC_DEC = {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
            "encoder_attention_heads": 4, "decoder_attention_heads": 4,
            "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "vocab_size": 100}
_VIT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 64, "image_size": 32, "patch_size": 8, "num_labels": 3}
_SPEECH = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 64, "conv_dim": [16, 16], "conv_stride": [5, 4],
           "conv_kernel": [10, 8], "num_conv_pos_embeddings": 16,
           "num_conv_pos_embedding_groups": 4, "vocab_size": 20, "mask_time_prob": 0.0}


#: name -> builder of (model, batch, loss)
MODELS: dict[str, Build] = {
    "torchvision resnet18": _vision("torchvision", "resnet18", 64),
    "torchvision mobilenet_v3_small": _vision("torchvision", "mobilenet_v3_small", 64),
    "torchvision convnext_tiny": _vision("torchvision", "convnext_tiny", 64),
    "torchvision swin_t": _vision("torchvision", "swin_t", 64),
    "torchvision efficientnet_b0": _vision("torchvision", "efficientnet_b0", 64),
    "torchvision densenet121": _vision("torchvision", "densenet121", 64),
    "timm vit_tiny_patch16_224": _vision("timm", "vit_tiny_patch16_224", 32, img_size=32),
    "timm convnextv2_atto": _vision("timm", "convnextv2_atto", 64),
    "timm eva02_tiny_patch14_224": _vision("timm", "eva02_tiny_patch14_224", 28, img_size=28),
    "timm levit_128s": _vision("timm", "levit_128s", 224),
    "timm mobilevit_xxs": _vision("timm", "mobilevit_xxs", 64),
    "timm nfnet_f0": _vision("timm", "nfnet_f0", 64),
    "transformers Llama": _hf("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=2),
    "transformers BERT": _hf("BertConfig", "BertForMaskedLM"),
    "transformers Mixtral": _hf("MixtralConfig", "MixtralForCausalLM", num_key_value_heads=2,
                                num_local_experts=4, num_experts_per_tok=2),
    "transformers Gemma2": _hf("Gemma2Config", "Gemma2ForCausalLM", num_key_value_heads=2,
                               head_dim=8, layer_types=["sliding_attention",
                                                        "full_attention"]),
    "transformers GPT-2": _hf("GPT2Config", "GPT2LMHeadModel", n_embd=32, n_layer=2, n_head=4,
                              n_positions=64),
    "transformers BLOOM (ALiBi)": _hf("BloomConfig", "BloomForCausalLM", n_layer=2, n_head=4),
    "transformers Mamba": _hf("MambaConfig", "MambaForCausalLM", state_size=4),
    "transformers RWKV": _hf("RwkvConfig", "RwkvForCausalLM", attention_hidden_size=32,
                             context_length=64),
    "transformers XLNet": _hf_task("XLNetConfig", "XLNetLMHeadModel", _ids, _lm, d_model=32,
                                   n_layer=2, n_head=4, d_inner=64, vocab_size=100),
    "transformers DeBERTa-v2": _hf_task("DebertaV2Config", "DebertaV2ForMaskedLM", _ids,
                                        _lm, **_BERT),
    "transformers Longformer": _hf_task("LongformerConfig", "LongformerForMaskedLM", _ids,
                                        _lm, attention_window=4, **_BERT),
    "transformers FNet (FFT)": _hf_task("FNetConfig", "FNetForMaskedLM", _ids, _lm,
                                        hidden_size=32, num_hidden_layers=2,
                                        intermediate_size=64, vocab_size=100),
    "transformers T5": _hf_task("T5Config", "T5ForConditionalGeneration", _ids, _seq2seq,
                                d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                vocab_size=100),
    "transformers BART": _hf_task("BartConfig", "BartForConditionalGeneration", _ids, _seq2seq,
                                  **_ENC_DEC),
    "transformers Whisper": _hf_task(
        "WhisperConfig", "WhisperForConditionalGeneration",
        lambda: torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(0)), _whisper,
        **_ENC_DEC, num_mel_bins=16, max_source_positions=16, max_target_positions=16,
        decoder_start_token_id=1, pad_token_id=0),
    "transformers wav2vec 2.0 (CTC)": _hf_task(
        "Wav2Vec2Config", "Wav2Vec2ForCTC",
        lambda: torch.randn(2, 1600, generator=torch.Generator().manual_seed(0)), _ctc,
        **_SPEECH),
    "transformers BEiT": _hf_task("BeitConfig", "BeitForImageClassification", lambda: _image(32),
                                  _image_labels, use_relative_position_bias=True, **_VIT),
    "transformers Swin v2": _hf_task("Swinv2Config", "Swinv2ForImageClassification",
                                     lambda: _image(32), _image_labels, image_size=32,
                                     patch_size=4, embed_dim=16, depths=[1, 1],
                                     num_heads=[2, 2], window_size=4, num_labels=3),
}


def _step(build: Build, dtype: Any, ours: bool, device_type: str = "cpu",
          log: bool = True) -> list[Any]:
    torch.manual_seed(0)
    model, batch, loss = build()
    torch.manual_seed(1)  # dropout masks: torch's generator draws them in both runs
    with ExitStack() as stack:
        if ours:
            stack.enter_context(at.emulate(model, fallback="error"))
        logger = stack.enter_context(OpLog()) if log else None
        with at.autocast(device_type, dtype) if ours else torch.autocast(device_type, dtype):
            value = loss(model, batch)
        value.backward()
    return logger.ops if logger is not None else []


def _compare(build: Build, dtype: Any) -> dict[str, Any]:
    """Both logs of one CPU autocast dtype: their length and first differing op, or the
    op emulate refused (an op ampref has no reference for, named by its error)."""
    theirs = _step(build, dtype, False)
    try:
        ours = _step(build, dtype, True)
    except at.UnsupportedOpError as e:
        return {"ops": len(theirs), "first_difference": None, "refused": str(e)[:300]}
    first = next((i for i, (a, b) in enumerate(zip(theirs, ours, strict=False)) if a != b),
                 None if len(theirs) == len(ours) else min(len(theirs), len(ours)))
    return {"ops": len(theirs), "first_difference": first,
            "torch": theirs[first] if first is not None and first < len(theirs) else None,
            "ampref": ours[first] if first is not None and first < len(ours) else None}


def check(name: str) -> dict[str, Any]:
    """One model's results: per CPU autocast dtype, the op count and the first
    differing op (None where the logs are equal); the CUDA-list run's outcome."""
    build = MODELS[name]
    row: dict[str, Any] = {"model": name}
    try:
        build()
    except ImportError as e:
        return {**row, "skipped": str(e)}
    start = time.perf_counter()
    # one step unlogged first: models that cache on first call (BEiT's relative position
    # index in an lru_cache) would otherwise log that work in whichever run comes first
    _step(build, torch.bfloat16, False, log=False)
    for dtype in (torch.bfloat16, torch.float16):
        row[str(dtype)] = _compare(build, dtype)
    try:
        _step(build, torch.float16, True, device_type="cuda", log=False)
        row["cuda_fp16_emulated"] = "ran, every op emulated"
    except Exception as e:  # noqa: BLE001 - the outcome is the record
        row["cuda_fp16_emulated"] = f"{type(e).__name__}: {e}"[:300]
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def summary(row: dict[str, Any]) -> str:
    """One line per model: each CPU dtype equal, differing (at which op) or refused, and
    the CUDA-list run's outcome."""
    cpu = " ".join(f"{d}: {row[d]['ops']} ops " + (
        f"refused ({row[d]['refused']})" if "refused" in row[d]
        else "equal" if row[d]["first_difference"] is None
        else f"differ at op {row[d]['first_difference']}")
        for d in ("torch.bfloat16", "torch.float16"))
    return f"{cpu}; CUDA lists fp16 under emulate: {row['cuda_fp16_emulated']}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"models (default all): {sorted(MODELS)}")
    parser.add_argument("--out", help="write the results as JSON here")
    opts = parser.parse_args(argv)
    unknown = [n for n in opts.names if n not in MODELS]
    if unknown:
        print(f"bridge_models: unknown model {unknown[0]!r}; choices: {sorted(MODELS)}",
              file=sys.stderr)
        return 2
    rows = [check(n) for n in (opts.names or MODELS)]
    for r in rows:
        print(f"{r['model']}: {r.get('skipped') or summary(r)}")
    if opts.out:  # written whole or not at all: a failed write keeps the old file
        atomic_write(opts.out, json.dumps({"torch": torch.__version__, "models": rows},
                                          indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
