"""One ``ampref train`` run: the character-level model, its optimizer and loss scaler,
one training step at a time, with statistics and planted faults (TRN-*).

``ampref train``: a small character-level transformer trained under a precision mode,
with a numerics report, exact resume and fault injection.

Modes (``MODES``):

* ``fp32``: everything float32.
* ``amp-fp16``: torch-cuda autocast to float16, float32 master weights, dynamic loss
  scaler (``--profile``, torch by default).
* ``amp-bf16``: autocast to bfloat16, no scaler.
* ``fp16-static``: autocast to float16 with a fixed scale (``--static-scale``); steps
  whose gradients overflow are still skipped.
* ``fp16-noscale``: autocast to float16 without scaling: small gradients flush to zero.
* ``pure-fp16``: parameters, activations and gradients in float16, no master weights.
* ``fp8-delayed``, ``fp8-current``, ``fp8-block``, ``mxfp8``, ``nvfp4``: the linear
  layers of the transformer blocks run their three GEMMs under that training recipe
  (``ampref.recipes.roles``; ``--recipe-profile te|torchao``), everything else under bf16
  autocast, float32 master weights; per layer and role the quantization statistics are
  recorded every step (TRN-QNT-*).

A run is a pure function of (config, seed): batch ``s`` is drawn from the counter-based
hash at counter ``s * batch``, every op is deterministic (specs/engine.md), so resuming
from a checkpoint reproduces the uninterrupted run bit for bit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ampref.engine import functional as F
from ampref.engine import nn, optim
from ampref.policy.autocast import autocast
from .corpus import Corpus
from .faults import FaultInjection
from .quantreport import what_if
from ampref.engine.rng import Generator
from ampref.scaling.scaler import LossScaler, StaticLossScaler
from ampref.scaling.profiles import PROFILES
from .stats import StepStats, log2_hist
from ampref.engine.tensor import Tensor, no_grad, observe_gradients
from .config import MODES, TrainConfig
from .dataparallel import DataParallelStep

__all__ = ["CharTransformer", "Run", "RunState", "QUANT_COLUMNS"]

#: the per-role quantization statistics recorded each step (after the step number)
QUANT_COLUMNS = ("amax", "underflow_pct", "saturation_pct", "rel_mse", "scale_min", "scale_max")


class CharTransformer(nn.Module):
    """Token + position embeddings, pre-norm transformer blocks, final norm, linear head."""

    def __init__(self, vocab: int, cfg: TrainConfig) -> None:
        super().__init__()
        g = Generator(cfg.seed)
        b = cfg.backend
        self.tok = nn.Embedding(vocab, cfg.width, std=0.02, seed=g, backend=b)
        self.pos = nn.Embedding(cfg.context, cfg.width, std=0.02, seed=g, backend=b)
        for i in range(cfg.blocks):
            setattr(self, f"block{i}", nn.TransformerBlock(cfg.width, cfg.heads, seed=g, backend=b))
        self.nblocks = cfg.blocks
        self.ln = nn.LayerNorm(cfg.width, backend=b)
        self.head = nn.Linear(cfg.width, vocab, seed=g, backend=b)

    def forward(self, ids: np.ndarray) -> Tensor:
        T = ids.shape[1]
        x = self.tok(ids) + self.pos(np.arange(T))
        for i in range(self.nblocks):
            x = getattr(self, f"block{i}")(x)
        return self.head(self.ln(x))


@dataclass(kw_only=True)
class RunState:
    step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    layer_series: dict[str, list[list[float]]] = field(default_factory=dict)
    #: recipe modes: "layer/role" -> rows [step, amax, underflow %, saturation %, rel MSE,
    #: scale min, scale max] (TRN-QNT-004)
    quant_series: dict[str, list[list[float]]] = field(default_factory=dict)
    #: recipe modes: the last step's tensors under every recipe and profile (TRN-QNT-005)
    what_if: list[dict[str, Any]] = field(default_factory=list)
    hists: dict[str, Any] = field(default_factory=dict)
    wall: float = 0.0

    # injected and skipped steps are read off the history, never stored twice
    @property
    def injected(self) -> list[int]:
        return [r["step"] for r in self.history if r.get("injected")]

    @property
    def skipped(self) -> list[int]:
        return [r["step"] for r in self.history if not r["applied"] and not r.get("removed")]


class Run:
    """A model, optimizer, scaler and data stream for one mode; ``step()`` advances one."""

    def __init__(self, cfg: TrainConfig, corpus: Corpus) -> None:
        self.cfg, self.corpus, self.mode = cfg, corpus, MODES[cfg.precision]
        self.model = CharTransformer(corpus.vocab, cfg)
        for name, p in self.model.named_parameters():
            p.name = name
        if self.mode.params != "float32":
            self.model.to_format(self.mode.params)
        self.opt = optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=0.01,
                               master_weights=self.mode.master_weights)
        self.scaler: LossScaler | None = None
        if self.mode.scaler == "dynamic":
            fixed = "init_scale" in PROFILES[cfg.profile].fixed
            self.scaler = (LossScaler.from_profile(cfg.profile) if fixed
                           else LossScaler.from_profile(cfg.profile, init_scale=cfg.init_scale))
        elif self.mode.scaler == "static":
            self.scaler = StaticLossScaler(cfg.static_scale)
        self.state = RunState()
        self.faults = FaultInjection(seed=cfg.seed, rate=cfg.inject_nonfinite)
        self._acts: dict[str, np.ndarray] = {}
        self._capture = False
        #: the block linears that run under the mode's recipe, by name
        self.quantized: dict[str, nn.Linear] = {}
        if self.mode.recipe is not None:
            for name, m in self.model.named_modules():
                if isinstance(m, nn.Linear) and name.startswith("block"):
                    m.use_recipe(self.mode.recipe, cfg.recipe_profile, collect=True)
                    self.quantized[name] = m
        #: the data-parallel step (DPL-TRN-*): N emulated ranks, or a plant on one rank
        self.parallel: DataParallelStep | None = (
            DataParallelStep(self) if cfg.ranks > 1 or cfg.plant else None)
        for name, m in self.model.named_modules():
            watched = (nn.TransformerBlock, nn.Linear, nn.LayerNorm, nn.Embedding)
            if name and isinstance(m, watched) and name.count(".") <= 1:
                m.register_forward_hook(self._hook(name))

    def _hook(self, name: str) -> Any:
        def hook(module: nn.Module, out: Any) -> None:
            if isinstance(out, Tensor):
                if out.name is None:
                    out.name = name
                if self._capture:
                    self._acts[name] = out.numpy()
        return hook

    def end_capture(self) -> None:
        """Stop recording activations for this step's histograms."""
        self._capture = False

    def master_weights(self) -> list[np.ndarray]:
        """Every parameter's float32 master weight (the parameter itself without one)."""
        return [np.asarray(p.backend.to_numpy(m) if m is not None else p.numpy(),
                           dtype=np.float32)
                for m, p in zip(self.opt.master, self.model.parameters(), strict=True)]

    @property
    def scale(self) -> float:
        return float(self.scaler.scale) if self.scaler is not None else 1.0

    def injected_at(self, step: int) -> bool:
        return self.faults.injected_at(step)

    def loss_on(self, ids: np.ndarray) -> Tensor:
        ac = self.mode.autocast
        with autocast("cuda", ac or "float16", enabled=ac is not None):
            logits = self.model(ids[:, :-1])
            return F.cross_entropy(logits, ids[:, 1:])

    def step(self) -> dict[str, Any]:
        """One training step (batch ``state.step``); returns its metrics."""
        # why long: the phases of one training step (forward, scaled backward, statistics,
        # unscale, skip or apply) in the order the spec states them
        s = self.state.step
        cfg = self.cfg
        ids = self.corpus.batch(cfg.seed, s, cfg.batch)
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"step": s, "scale": self.scale}
        if s in cfg.skip_steps:  # a removed step: the batch is consumed, nothing else happens
            rec.update(loss=float("nan"), applied=False, injected=False, removed=True)
            self.state.step += 1
            self.state.history.append(rec)
            return rec
        hist_now = s == 0 or s == cfg.steps - 1 or (cfg.hist_every and s % cfg.hist_every == 0)
        self._capture = bool(hist_now)
        stats = StepStats()
        stats.keep_raw = bool(hist_now)
        self.opt.zero_grad()
        last = s == cfg.steps - 1
        for i, m in enumerate(self.quantized.values()):
            # stochastic rounding: one seed per (run seed, step, layer), so resume replays it
            m.quant_seed = (cfg.seed * 1_000_003 + s) * 64 + i
            if m.quant_state is not None:
                m.quant_state.keep = last
        scale_used = self.scale
        if self.parallel is None:
            loss_value, applied, injected = self._one_rank(ids, s, stats)
        else:
            loss_value, applied, injected, rec["ranks"] = self.parallel.step(ids, s, stats)
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        nz, tiny = self._grad_counts(grads, scale_used)
        rec.update(loss=loss_value, applied=bool(applied), injected=injected, removed=False,
                   scale_after=self.scale, seconds=time.perf_counter() - t0,
                   low_elements=sum(c[0] for c in stats.layers.values()),
                   underflow=sum(c[1] for c in stats.layers.values()),
                   overflow=sum(c[2] for c in stats.layers.values()),
                   grad_nonzero=nz, grad_below_fp16=tiny)
        for name, (n, u, o) in stats.layers.items():
            self.state.layer_series.setdefault(name, []).append([s, u / max(n, 1), o / max(n, 1)])
        self._record_quant(s)
        if last and self.quantized:
            ops = {n: m.quant_state.operands for n, m in self.quantized.items()
                   if m.quant_state is not None}
            self.state.what_if = what_if(ops)
            for m in self.quantized.values():
                if m.quant_state is not None:
                    m.quant_state.keep, m.quant_state.operands = False, {}
        if hist_now:
            self._record_hists(s, stats, scale_used)
        self.state.step += 1
        self.state.history.append(rec)
        return rec

    def _grad_counts(self, grads: list[Any], scale: float) -> tuple[int, int]:
        """Nonzero gradient elements, and those below fp16's smallest subnormal once
        scaled, counted where the gradients live and read in one transfer."""
        if not grads:
            return 0, 0
        backend = self.model.parameters()[0].backend
        xp = backend.xp
        fused = getattr(backend, "grad_counts", None)  # one launch per gradient (BKD-STA-001)
        pairs = []
        for g in grads:
            pair = fused(g, scale) if fused is not None else None
            if pair is None:
                pair = xp.stack([xp.asarray(c, dtype=xp.int64) for c in (
                    xp.count_nonzero(g),
                    xp.count_nonzero((g != 0) & (xp.abs(g) * scale < 2.0**-25)))])
            pairs.append(pair)
        counts = backend.to_numpy(xp.concatenate(pairs))
        return int(counts[0::2].sum()), int(counts[1::2].sum())

    def _one_rank(self, ids: np.ndarray, s: int, stats: StepStats) -> tuple[float, bool, bool]:
        """Forward, scaled backward, planted fault, and the (scaler's) step on one rank:
        (loss, applied, injected)."""
        loss = self.loss_on(ids)
        self._capture = False
        with observe_gradients(stats):
            (self.scaler.scale_loss(loss) if self.scaler is not None else loss).backward()
        injected = self.injected_at(s)
        if injected:
            self.faults.plant(self.model.parameters(), s)
        if self.scaler is not None:
            applied = self.opt.step(scaler=self.scaler)
        else:
            applied = self.opt.step()
        return loss.item(), bool(applied), injected

    def _record_quant(self, s: int) -> None:
        for name, m in self.quantized.items():
            st = m.quant_state
            for role, d in ({} if st is None else st.stats).items():
                row = [float(s)] + [float(d[k]) for k in QUANT_COLUMNS]
                self.state.quant_series.setdefault(f"{name}/{role}", []).append(row)

    def _record_hists(self, s: int, stats: StepStats, scale: float) -> None:
        h: dict[str, Any] = {"activations": {k: log2_hist(v) for k, v in self._acts.items()},
                             "gradients": {}}
        if stats.raw_grads:  # scaled gradients as they were before rounding to the low format
            h["gradients"] = {k: log2_hist(np.concatenate(v)) for k, v in stats.raw_grads.items()}
        else:  # float32 mode: the master gradients (times the scale, which is 1)
            h["gradients"] = {n: log2_hist(p.backend.to_numpy(p.grad) * scale)
                              for n, p in self.model.named_parameters() if p.grad is not None}
        self.state.hists[str(s)] = h
        self._acts = {}

    def evaluate(self, batches: int = 4) -> float:
        """Mean validation loss over fixed batches (nats per character)."""
        losses = []
        with no_grad():
            for b in range(batches):
                ids = self.corpus.batch(self.cfg.seed + 1, b, self.cfg.batch, "val")
                losses.append(self.loss_on(ids).item())
        return float(np.mean(losses))
