"""``ampref train``: a small character-level transformer trained under a precision mode,
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

A run is a pure function of (config, seed): batch ``s`` is drawn from the counter-based
hash at counter ``s * batch``, every op is deterministic (specs/engine.md), so resuming
from a checkpoint reproduces the uninterrupted run bit for bit.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from . import functional as F
from . import nn, optim
from .atomicio import atomic_write, atomic_write_with
from .autocast_mode import autocast
from .report import write_compare_plot, write_report
from .scaling import PROFILES, LossScaler, StaticLossScaler
from .srhash import random_bits, random_bits_scalar
from .stats import StepStats, log2_hist
from .tensor import Tensor, observe_gradients

__all__ = [
    "DEFAULT_COMPARE",
    "MODES",
    "CharTransformer",
    "TrainConfig",
    "TrainError",
    "compare",
    "load_corpus",
    "train",
]

FORMAT_VERSION = 3  # 3: complete scaler state for every profile, the run's target steps
MAX_DATA_BYTES = 8 * 2**20  # --data files are read up to this size (the rest is ignored)
MAX_MODEL_BYTES = 8 * 2**30  # refuse configurations whose arrays would need more memory


class TrainError(ValueError):
    """Bad configuration, data or checkpoint: reported as one line by the CLI."""


@dataclass(frozen=True, kw_only=True)
class Mode:
    autocast: str | None
    scaler: str | None  # "dynamic" | "static" | None
    params: str = "float32"
    master_weights: bool = True
    about: str = ""


MODES: dict[str, Mode] = {
    "fp32": Mode(autocast=None, scaler=None, about="float32 throughout"),
    "amp-fp16": Mode(autocast="float16", scaler="dynamic", about="fp16 autocast + dynamic loss scaling"),
    "amp-bf16": Mode(autocast="bfloat16", scaler=None, about="bf16 autocast, no scaling"),
    "fp16-static": Mode(autocast="float16", scaler="static", about="fp16 autocast + fixed loss scale"),
    "fp16-noscale": Mode(autocast="float16", scaler=None, about="fp16 autocast, no loss scaling"),
    "pure-fp16": Mode(autocast=None, scaler=None, params="float16", master_weights=False,
                      about="fp16 weights, activations and gradients, no master weights"),
}
DEFAULT_COMPARE = ("fp32", "amp-fp16", "amp-bf16", "fp16-noscale")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything that determines a run (a checkpoint must match all but ``steps``)."""

    precision: str = "amp-fp16"
    steps: int = 160
    seed: int = 0
    batch: int = 16
    context: int = 32
    width: int = 64
    heads: int = 4
    blocks: int = 1
    lr: float = 3e-3
    profile: str = "torch"
    init_scale: float = 2.0**16
    static_scale: float = 1024.0
    inject_nonfinite: float = 0.0
    checkpoint_every: int = 50
    hist_every: int = 0  # 0: histograms at the first and last step only
    data: str | None = None
    backend: str = "numpy"
    skip_steps: tuple[int, ...] = field(default=())

    def validate(self) -> None:
        if self.precision not in MODES:
            raise TrainError(f"unknown precision mode {self.precision!r}; choose one of {', '.join(MODES)}")
        for name in ("steps", "batch", "context", "width", "heads", "blocks", "checkpoint_every"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < (0 if name == "steps" else 1):
                raise TrainError(f"--{name.replace('_', '-')} must be an integer >= "
                                 f"{0 if name == 'steps' else 1}, got {v!r}")
        if not isinstance(self.hist_every, int) or self.hist_every < 0:
            raise TrainError(f"hist_every must be an integer >= 0, got {self.hist_every!r}")
        if self.width % self.heads:
            raise TrainError(f"--width {self.width} must be divisible by --heads {self.heads}")
        need = self.memory_estimate()
        if need > MAX_MODEL_BYTES:
            raise TrainError(f"--batch {self.batch} --context {self.context} --width {self.width} "
                             f"--blocks {self.blocks} would need about {need / 2**30:.0f} GiB of "
                             f"arrays; ampref train is for small models (limit "
                             f"{MAX_MODEL_BYTES // 2**30} GiB)")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise TrainError(f"--lr must be a positive finite number, got {self.lr}")
        if self.profile not in PROFILES:
            raise TrainError(f"unknown loss-scale profile {self.profile!r}; choose one of {', '.join(PROFILES)}")
        if not 0.0 <= self.inject_nonfinite <= 1.0:
            raise TrainError(f"--inject-nonfinite must be a rate in [0, 1], got {self.inject_nonfinite}")
        if self.inject_nonfinite and MODES[self.precision].scaler is None:
            raise TrainError(f"--inject-nonfinite needs a mode with a loss scaler that skips "
                             f"non-finite steps (amp-fp16, fp16-static), not {self.precision!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise TrainError(f"--seed must be an integer >= 0, got {self.seed!r}")
        if not (math.isfinite(self.static_scale) and 0 < self.static_scale <= float(np.finfo(np.float32).max)):
            raise TrainError(f"--static-scale must be a positive float32 value (at most 3.4e38), "
                             f"got {self.static_scale!r}")
        if self.backend != "numpy":
            from . import backends  # type: ignore[attr-defined]  # mapped from backends/ (pyproject)

            if not backends.available(self.backend):
                raise TrainError(f"backend {self.backend!r} is not available here (choices: "
                                 f"{', '.join(n for n in backends.names() if backends.available(n))})")

    def memory_estimate(self) -> int:
        """Rough bytes of the largest arrays of one step: activations and their
        gradients per block (float64 temporaries included) and attention scores."""
        tokens = self.batch * self.context
        per_block = tokens * self.width * 40 + self.batch * self.heads * self.context**2 * 6
        return 8 * (self.blocks * per_block + 16 * self.blocks * self.width**2)

    def identity(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("steps")
        d["skip_steps"] = list(self.skip_steps)
        return d


# -- data -------------------------------------------------------------------------------

def load_corpus(path: str | None) -> str:
    """The embedded text (the US Declaration of Independence, public domain) or a file."""
    if path is None:
        return resources.files("ampref.data").joinpath("declaration.txt").read_text(encoding="utf-8")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_DATA_BYTES + 1)
    except OSError as e:
        raise TrainError(f"cannot read --data {path!r}: {e.strerror or e}") from None
    if len(raw) > MAX_DATA_BYTES:
        # a character-level toy model needs little text; reading a huge file (or a device
        # such as /dev/zero) whole would exhaust memory
        raw = raw[:MAX_DATA_BYTES]
        while raw and (raw[-1] & 0xC0) == 0x80:  # do not cut a UTF-8 sequence in half
            raw = raw[:-1]
        if raw and raw[-1] >= 0xC0:
            raw = raw[:-1]
        print(f"ampref train: note: --data {path!r} is larger than {MAX_DATA_BYTES // 2**20} MiB; "
              "training on its first part", file=sys.stderr)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TrainError(f"cannot read --data {path!r}: not UTF-8 text ({e})") from None


class Corpus:
    def __init__(self, text: str, context: int) -> None:
        if "\x00" in text:
            raise TrainError("the data contains NUL characters; give a plain text file")
        # characters sorted by code point; ids by search (same ids as chars.index, fast)
        points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        table = np.unique(points)
        self.chars = [chr(int(c)) for c in table]
        self.ids = np.searchsorted(table, points).astype(np.int64)
        n = len(self.ids)
        split = int(n * 0.9)
        self.train, self.val = self.ids[:split], self.ids[split:]
        if len(self.val) <= context + 1 or len(self.train) <= context + 1:
            raise TrainError(f"the data is too short: {n} characters for a context of {context} "
                             f"(need more than {10 * (context + 2)})")
        self.context = context

    @property
    def vocab(self) -> int:
        return len(self.chars)

    def batch(self, seed: int, step: int, size: int, split: str = "train") -> np.ndarray:
        """Rows of context+1 ids; row i of step s starts at hash(seed, s*size + i)."""
        src = self.train if split == "train" else self.val
        hi = len(src) - self.context - 1
        words = random_bits(seed ^ 0x5EED, step * size, size).astype(np.uint64)
        starts = ((words * np.uint64(hi)) >> np.uint64(32)).astype(np.int64)
        return np.stack([src[s:s + self.context + 1] for s in starts])


# -- model ------------------------------------------------------------------------------

class CharTransformer(nn.Module):
    """Token + position embeddings, pre-norm transformer blocks, final norm, linear head."""

    def __init__(self, vocab: int, cfg: TrainConfig) -> None:
        super().__init__()
        from .rng import Generator

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


# -- one run ----------------------------------------------------------------------------------

@dataclass
class RunState:
    step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    layer_series: dict[str, list[list[float]]] = field(default_factory=dict)
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
        cfg.validate()
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
            self.scaler = LossScaler.from_profile(cfg.profile, init_scale=cfg.init_scale) \
                if "init_scale" not in PROFILES[cfg.profile].fixed else LossScaler.from_profile(cfg.profile)
        elif self.mode.scaler == "static":
            self.scaler = StaticLossScaler(cfg.static_scale)
        self.state = RunState()
        self._acts: dict[str, np.ndarray] = {}
        self._capture = False
        for name, m in self.model.named_modules():
            if name and isinstance(m, (nn.TransformerBlock, nn.Linear, nn.LayerNorm, nn.Embedding)) \
                    and name.count(".") <= 1:
                m.register_forward_hook(self._hook(name))

    def _hook(self, name: str) -> Any:
        def hook(module: nn.Module, out: Any) -> None:
            if isinstance(out, Tensor):
                if out.name is None:
                    out.name = name
                if self._capture:
                    self._acts[name] = out.numpy()
        return hook

    @property
    def scale(self) -> float:
        return float(self.scaler.scale) if self.scaler is not None else 1.0

    def injected_at(self, step: int) -> bool:
        rate = self.cfg.inject_nonfinite
        return rate > 0 and random_bits_scalar(self.cfg.seed ^ 0xFA17, step) < rate * 2.0**32

    def _plant(self, step: int) -> None:
        params = [p for p in self.model.parameters() if p.grad is not None]
        k = random_bits_scalar(self.cfg.seed ^ 0xFA18, step)
        p = params[k % len(params)]
        flat = p.grad.reshape(-1)
        flat[(k >> 8) % flat.size] = np.inf if k & 1 else np.nan

    def loss_on(self, ids: np.ndarray) -> Tensor:
        ac = self.mode.autocast
        with autocast("cuda", ac or "float16", enabled=ac is not None):
            logits = self.model(ids[:, :-1])
            return F.cross_entropy(logits, ids[:, 1:])

    def step(self) -> dict[str, Any]:
        """One training step (batch ``state.step``); returns its metrics."""
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
        loss = self.loss_on(ids)
        self._capture = False
        with observe_gradients(stats):
            (self.scaler.scale_loss(loss) if self.scaler is not None else loss).backward()
        injected = self.injected_at(s)
        if injected:
            self._plant(s)
        scale_used = self.scale
        if self.scaler is not None:
            applied = self.opt.step(scaler=self.scaler)
        else:
            applied = self.opt.step()
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        xp = self.model.parameters()[0].backend.xp
        nz = sum(int(xp.count_nonzero(g)) for g in grads)
        tiny = sum(int(xp.count_nonzero((g != 0) & (xp.abs(g) * scale_used < 2.0**-25))) for g in grads)
        rec.update(loss=loss.item(), applied=bool(applied), injected=injected, removed=False,
                   scale_after=self.scale, seconds=time.perf_counter() - t0,
                   low_elements=sum(c[0] for c in stats.layers.values()),
                   underflow=sum(c[1] for c in stats.layers.values()),
                   overflow=sum(c[2] for c in stats.layers.values()),
                   grad_nonzero=nz, grad_below_fp16=tiny)
        for name, (n, u, o) in stats.layers.items():
            self.state.layer_series.setdefault(name, []).append([s, u / max(n, 1), o / max(n, 1)])
        if hist_now:
            self._record_hists(s, stats, scale_used)
        self.state.step += 1
        self.state.history.append(rec)
        return rec

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
        from .tensor import no_grad

        losses = []
        with no_grad():
            for b in range(batches):
                losses.append(self.loss_on(self.corpus.batch(self.cfg.seed + 1, b, self.cfg.batch, "val")).item())
        return float(np.mean(losses))

    # -- checkpoints -------------------------------------------------------------------
    def checkpoint_payload(self) -> dict[str, np.ndarray]:
        arrays: dict[str, np.ndarray] = {}
        for name, p in self.model.named_parameters():
            arrays[f"param/{name}"] = p.numpy()
        osd = self.opt.state_dict()
        for i, st in enumerate(osd["state"]):
            for k, v in st.items():
                arrays[f"opt/{i}/{k}"] = np.asarray(v)
        for i, m in enumerate(osd["master"]):
            if m is not None:
                arrays[f"master/{i}"] = np.asarray(m)
        meta = {"version": FORMAT_VERSION, "config": self.cfg.identity(), "step": self.state.step,
                "target_steps": self.cfg.steps,
                "opt": {"steps": osd["steps"], "lr": osd["lr"]},
                # the complete scaler state and configuration for every profile (torch's
                # five-key dict lacks the step counter and last overflow)
                "scaler": None if self.scaler is None else {
                    "state": _jsonable(self.scaler.state_dict(full=True)),
                    "events": self.scaler.audit_log()},
                "run": {"history": self.state.history, "layer_series": self.state.layer_series,
                        "hists": self.state.hists, "wall": self.state.wall},
                "modules": {n: getattr(m, "offset", 0) for n, m in self.model.named_modules()
                            if isinstance(m, nn.Dropout)}}
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        return arrays

    def save_checkpoint(self, folder: Path) -> Path:
        arrays = self.checkpoint_payload()
        arrays["sha256"] = np.frombuffer(_digest(arrays).encode(), dtype=np.uint8)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"step_{self.state.step:07d}.npz"
        _atomic_savez(path, arrays)
        return path

    def load_checkpoint(self, path: Path) -> None:
        """Restore everything from ``path``.

        Raises:
            TrainError: unreadable or corrupt file (checksum), or a checkpoint of a
                different configuration (the differing keys named).
        """
        arrays, meta = read_checkpoint(path)
        mine = self.cfg.identity()
        diff = sorted(k for k in set(mine) | set(meta["config"]) if mine.get(k) != meta["config"].get(k))
        if diff:
            raise TrainError(f"checkpoint {str(path)!r} belongs to a different run: "
                             + ", ".join(f"{k}={meta['config'].get(k)!r} (now {mine.get(k)!r})" for k in diff))
        for name, p in self.model.named_parameters():
            p.data = p.backend.asarray(np.asarray(arrays[f"param/{name}"], dtype=p.data.dtype))
        n = len(self.opt.params)
        state: list[dict[str, Any]] = [{} for _ in range(n)]
        master: list[Any] = [None] * n
        for k, v in arrays.items():
            parts = k.split("/")
            if parts[0] == "opt":
                state[int(parts[1])][parts[2]] = v
            elif parts[0] == "master":
                master[int(parts[1])] = v
        self.opt.load_state_dict({"steps": meta["opt"]["steps"], "lr": meta["opt"]["lr"],
                                  "state": state, "master": master})
        if self.scaler is not None:
            self.scaler.load_state_dict(meta["scaler"]["state"])
            self.scaler.events = []
            from .scaling import ScaleEvent

            for ev in meta["scaler"]["events"]:
                ev = dict(ev)
                ev.pop("applied", None)
                self.scaler.events.append(ScaleEvent(**ev))
        run = meta["run"]
        self.state = RunState(step=meta["step"], history=run["history"], layer_series=run["layer_series"],
                              hists=run["hists"], wall=run["wall"])


def read_checkpoint(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays, meta) of a checkpoint whose checksum and format version are right.

    Raises:
        TrainError: unreadable, truncated or corrupt file (checksum), or another format
            version; a corrupt file's message names the newest good checkpoint before it.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        stored = arrays.pop("sha256", None)
        ok = stored is not None and stored.dtype == np.uint8 and bytes(stored).decode() == _digest(arrays)
        meta = json.loads(bytes(arrays["meta"]).decode()) if ok else None
    except Exception as e:  # noqa: BLE001 - zip, npy header, pickle refusal, truncation, JSON
        # NumPy's own messages (e.g. advice to pass allow_pickle=True) do not apply here
        raise TrainError(f"checkpoint {str(path)!r} is corrupt (unreadable: {type(e).__name__})"
                         f"{_previous_good(path)}") from None
    if meta is None:
        raise TrainError(f"checkpoint {str(path)!r} is corrupt (checksum mismatch){_previous_good(path)}")
    if meta.get("version") != FORMAT_VERSION:
        raise TrainError(f"checkpoint {str(path)!r} has format version {meta.get('version')}, "
                         f"this ampref reads and writes version {FORMAT_VERSION}")
    return arrays, meta


def _previous_good(path: Path) -> str:
    """'; the previous good checkpoint is ...' for a corrupt ``path``, or a hint."""
    for older in reversed(sorted(p for p in path.parent.glob("step_*.npz") if p.name < path.name)):
        try:
            with np.load(older, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            stored = arrays.pop("sha256", None)
            if stored is not None and bytes(stored).decode() == _digest(arrays):
                return (f"; the newest good checkpoint before it is {str(older)!r}: delete or move "
                        f"{path.name} and run --resume again to continue from there")
        except Exception:  # noqa: BLE001 - any unreadable older file is skipped
            continue
    return "; no good checkpoint precedes it (start the run again without --resume)"


def checkpoint_config(out: str | Path) -> tuple[TrainConfig, Path]:
    """The configuration (with its target steps) stored in the newest checkpoint of the run
    in ``out``, and that checkpoint: ``--resume`` needs only ``--out``.

    Raises:
        TrainError: no checkpoint there, or it is corrupt (see :func:`read_checkpoint`).
    """
    ck = Path(out) / "ckpt"
    last = latest_checkpoint(ck)
    if last is None:
        raise TrainError(f"--resume: no checkpoint in {str(ck)!r} (nothing to continue; "
                         "run without --resume first)")
    _, meta = read_checkpoint(last)
    stored = dict(meta["config"])
    stored["skip_steps"] = tuple(stored.get("skip_steps", ()))
    try:
        cfg = TrainConfig(steps=int(meta["target_steps"]), **stored)
    except TypeError as e:
        raise TrainError(f"checkpoint {str(last)!r} holds an unknown configuration: {e}") from None
    return cfg, last


def _atomic_savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez through :func:`ampref.atomicio.atomic_write_with`: a partial write never
    replaces a good file (TRN-CKP-001)."""
    atomic_write_with(path, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def _digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(k.encode())
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def latest_checkpoint(folder: Path) -> Path | None:
    found = sorted(folder.glob("step_*.npz"))
    return found[-1] if found else None


def _tidy(out: Path, ck: Path, *, resume: bool) -> None:
    """Remove temporary files of writes that were killed (``.tmp-*``, only ampref writes
    them) and, for a fresh run, the previous run's checkpoints, so that a later
    ``--resume`` can never pick another run's checkpoint (TRN-CKP-002)."""
    stale = [p for folder in (out, ck) if folder.is_dir() for p in folder.glob(".tmp-*")]
    for p in stale:
        p.unlink(missing_ok=True)
    if stale:
        print(f"ampref train: removed {len(stale)} temporary file(s) of an interrupted write "
              f"in {str(out)!r}", file=sys.stderr)
    old = sorted(ck.glob("step_*.npz")) if ck.is_dir() and not resume else []
    if old:
        print(f"ampref train: warning: {str(out)!r} held {len(old)} checkpoint(s) of an earlier "
              f"run (up to {old[-1].name}); a fresh run replaces them (use --resume to continue "
              "that run instead)", file=sys.stderr)
        for p in old:
            p.unlink()


# -- driver -------------------------------------------------------------------------------------

def _need_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise TrainError("the numerics report needs matplotlib: pip install 'ampref[plot]' "
                         "(or pass --no-report)") from None


def _out_path(out: str | Path) -> Path:
    if not str(out).strip():
        raise TrainError("--out must name an output folder, got an empty path "
                         "(the default is runs/train)")
    return Path(out)


def _check_out(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".ampref-write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise TrainError(f"output folder {str(out)!r} is not writable: {e.strerror or e}") from None


def train(cfg: TrainConfig, out: str | Path, *, resume: bool = False, progress: bool = True,
          report: bool = True, stop_after: int | None = None) -> dict[str, Any]:
    """Run (or resume) one mode into ``out``; returns the summary dict.

    ``stop_after`` ends the process-local loop early after that many steps of this call
    (checkpointing first), to test resumption.
    """
    cfg.validate()
    if report:
        _need_matplotlib()
    out = _out_path(out)
    ck = out / "ckpt"
    last = latest_checkpoint(ck) if resume else None
    if resume and last is None:  # refuse before creating any folder
        raise TrainError(f"--resume: no checkpoint in {str(ck)!r} (nothing to continue; "
                         "run without --resume first)")
    _check_out(out)
    _tidy(out, ck, resume=resume)
    corpus = Corpus(load_corpus(cfg.data), cfg.context)
    run = Run(cfg, corpus)
    if last is not None:
        run.load_checkpoint(last)
        if run.state.step > cfg.steps:
            raise TrainError(f"--resume: the checkpoint is at step {run.state.step}, beyond --steps {cfg.steps}")
    bar = _progress(cfg, run.state.step, progress)
    done_here = 0
    t_start = time.perf_counter()
    while run.state.step < cfg.steps:
        rec = run.step()
        done_here += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{rec['loss']:.3f}", scale=f"{run.scale:g}")
        if run.state.step % cfg.checkpoint_every == 0 or run.state.step == cfg.steps or \
                (stop_after is not None and done_here >= stop_after):
            run.state.wall += time.perf_counter() - t_start
            t_start = time.perf_counter()
            run.save_checkpoint(ck)
        if stop_after is not None and done_here >= stop_after:
            break
    if bar is not None:
        bar.close()
    run.state.wall += time.perf_counter() - t_start
    summary = _summary(run)
    if run.state.step >= cfg.steps:
        _atomic_savez(out / "final.npz", {n: _master_value(run, i, p)
                                          for i, (n, p) in enumerate(run.model.named_parameters())})
        _write_metrics(run, out, summary)
        if report:
            write_report(run, out, summary)
    return summary


def _master_value(run: Run, i: int, p: Tensor) -> np.ndarray:
    m = run.opt.master[i]
    return np.asarray(p.backend.to_numpy(m) if m is not None else p.numpy(), dtype=np.float32)


def _progress(cfg: TrainConfig, start: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=cfg.steps, initial=start, desc=cfg.precision, unit="step", leave=True)


def _summary(run: Run) -> dict[str, Any]:
    h = [r for r in run.state.history if not r.get("removed")]
    tail = [r["loss"] for r in h[-20:] if r["applied"] and math.isfinite(r["loss"])]
    low = sum(r.get("low_elements", 0) for r in h)
    val = run.evaluate()
    steps_timed = [r["seconds"] for r in h if "seconds" in r]
    return {
        "mode": run.cfg.precision, "about": run.mode.about, "steps": run.state.step,
        "final_loss": float(np.mean(tail)) if tail else float("nan"),
        "val_loss": val, "val_bpc": val / math.log(2),
        "skipped_steps": len(run.state.skipped), "skipped": run.state.skipped,
        "injected": run.state.injected,
        "final_scale": run.scale if run.scaler is not None else None,
        "underflow_fraction": (sum(r.get("underflow", 0) for r in h) / low) if low else 0.0,
        "overflow_fraction": (sum(r.get("overflow", 0) for r in h) / low) if low else 0.0,
        "grad_below_fp16_fraction": (sum(r.get("grad_below_fp16", 0) for r in h)
                                     / max(1, sum(r.get("grad_nonzero", 0) for r in h))),
        "wall_s": run.state.wall,
        "steps_per_s": len(steps_timed) / sum(steps_timed) if steps_timed else 0.0,
    }


def _write_metrics(run: Run, out: Path, summary: dict[str, Any]) -> None:
    atomic_write(str(out / "metrics.json"), json.dumps(
        {"config": asdict(run.cfg), "summary": summary, "history": run.state.history,
         "layers": run.state.layer_series,
         "scaler_events": run.scaler.audit_log() if run.scaler is not None else []},
        indent=1, default=str) + "\n")
    keys = ["step", "loss", "scale", "scale_after", "applied", "injected", "removed", "underflow",
            "overflow", "low_elements", "grad_nonzero", "grad_below_fp16", "seconds"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore")
    w.writeheader()
    for r in run.state.history:
        w.writerow(r)
    atomic_write(str(out / "metrics.csv"), buf.getvalue())


def compare(cfg: TrainConfig, modes: list[str], out: str | Path, *, progress: bool = True,
            report: bool = True) -> list[dict[str, Any]]:
    """Run several modes with the same seed and data order into ``out/<mode>``;
    write ``out/compare.json`` and ``out/compare.md``; return the summaries."""
    for m in modes:
        if m not in MODES:
            raise TrainError(f"unknown precision mode {m!r}; choose one of {', '.join(MODES)}")
    dup = sorted({m for m in modes if modes.count(m) > 1})
    if dup:
        raise TrainError(f"--compare lists {', '.join(dup)} more than once; each mode runs once "
                         "into its own folder")
    out = _out_path(out)
    _check_out(out)
    rows = []
    for m in modes:
        c = replace(cfg, precision=m, inject_nonfinite=cfg.inject_nonfinite if MODES[m].scaler else 0.0)
        rows.append(train(c, out / m, progress=progress, report=report))
    atomic_write(str(out / "compare.json"), json.dumps(rows, indent=1) + "\n")
    table = compare_table(rows)
    atomic_write(str(out / "compare.md"), table + "\n")
    if report:
        write_compare_plot(out, modes)
    return rows


def compare_table(rows: list[dict[str, Any]]) -> str:
    head = ("| mode | final loss | val bits/char | skipped | final scale | underflow to 0 "
            "| grads < fp16 min | steps/s | wall s |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        sc = "-" if r["final_scale"] is None else f"{r['final_scale']:g}"
        lines.append(f"| {r['mode']} | {r['final_loss']:.4f} | {r['val_bpc']:.3f} | {r['skipped_steps']} | "
                     f"{sc} | {r['underflow_fraction']:.2e} | {r['grad_below_fp16_fraction']:.2e} | "
                     f"{r['steps_per_s']:.2f} | {r['wall_s']:.1f} |")
    return "\n".join(lines)

