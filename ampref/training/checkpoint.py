"""Checkpoints of ``ampref train``: written atomically with a SHA-256 of their contents,
holding the configuration, the complete scaler state and the whole history, so that a
resumed run equals the unbroken one bit for bit (TRN-RES-*, TRN-CKP-*)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ampref.engine import nn
from ampref.common.atomicio import atomic_write_with
from ampref.recipes import DelayedState
from .run import Run, RunState
from ampref.scaling.machine import ScaleEvent
from .config import TrainConfig, TrainError

__all__ = ["FORMAT_VERSION", "atomic_savez", "checkpoint_config", "checkpoint_payload",
           "latest_checkpoint", "load_checkpoint", "read_checkpoint", "save_checkpoint", "tidy"]

FORMAT_VERSION = 3  # 3: complete scaler state for every profile, the run's target steps


def checkpoint_payload(run: Run) -> dict[str, np.ndarray]:
    """Every array and the JSON metadata of a checkpoint of ``run`` (TRN-RES-001)."""
    arrays: dict[str, np.ndarray] = {}
    for name, p in run.model.named_parameters():
        arrays[f"param/{name}"] = p.numpy()
    osd = run.opt.state_dict()
    for i, st in enumerate(osd["state"]):
        for k, v in st.items():
            arrays[f"opt/{i}/{k}"] = np.asarray(v)
    for i, m in enumerate(osd["master"]):
        if m is not None:
            arrays[f"master/{i}"] = np.asarray(m)
    for name, lin in run.quantized.items():  # delayed scaling: scale and amax history
        for role, st in ({} if lin.quant_state is None else lin.quant_state.delayed).items():
            arrays[f"quant/{name}/{role}/scale"] = np.asarray(st.scale, np.float32)
            arrays[f"quant/{name}/{role}/history"] = np.asarray(st.history, np.float32)
    meta = {"version": FORMAT_VERSION, "config": run.cfg.identity(), "step": run.state.step,
            "target_steps": run.cfg.steps,
            "opt": {"steps": osd["steps"], "lr": osd["lr"]},
            # the complete scaler state and configuration for every profile (torch's
            # five-key dict lacks the step counter and last overflow)
            "scaler": None if run.scaler is None else {
                "state": _jsonable(run.scaler.state_dict(full=True)),
                "events": run.scaler.audit_log()},
            "run": {"history": run.state.history, "layer_series": run.state.layer_series,
                    "quant_series": run.state.quant_series, "what_if": run.state.what_if,
                    "hists": run.state.hists, "wall": run.state.wall},
            "modules": {n: getattr(m, "offset", 0) for n, m in run.model.named_modules()
                        if isinstance(m, nn.Dropout)}}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    return arrays

def save_checkpoint(run: Run, folder: Path) -> Path:
    """Write ``run``'s checkpoint atomically into ``folder`` (TRN-CKP-001)."""
    arrays = checkpoint_payload(run)
    arrays["sha256"] = np.frombuffer(_digest(arrays).encode(), dtype=np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step_{run.state.step:07d}.npz"
    atomic_savez(path, arrays)
    return path

def load_checkpoint(run: Run, path: Path) -> None:
    """Restore everything from ``path``.

    Raises:
        TrainError: unreadable or corrupt file (checksum), or a checkpoint of a
            different configuration (the differing keys named).
    """
    arrays, meta = read_checkpoint(path)
    mine = run.cfg.identity()
    theirs = meta["config"]
    diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    if diff:
        raise TrainError(f"checkpoint {str(path)!r} belongs to a different run: "
                         + ", ".join(f"{k}={theirs.get(k)!r} (now {mine.get(k)!r})" for k in diff))
    for name, p in run.model.named_parameters():
        p.data = p.backend.asarray(np.asarray(arrays[f"param/{name}"], dtype=p.data.dtype))
    n = len(run.opt.params)
    state: list[dict[str, Any]] = [{} for _ in range(n)]
    master: list[Any] = [None] * n
    for k, v in arrays.items():
        parts = k.split("/")
        if parts[0] == "opt":
            state[int(parts[1])][parts[2]] = v
        elif parts[0] == "master":
            master[int(parts[1])] = v
    run.opt.load_state_dict({"steps": meta["opt"]["steps"], "lr": meta["opt"]["lr"],
                              "state": state, "master": master})
    if run.scaler is not None:
        run.scaler.load_state_dict(meta["scaler"]["state"])
        run.scaler.audit.events = []
        for ev in meta["scaler"]["events"]:
            ev = dict(ev)
            ev.pop("applied", None)
            run.scaler.audit.append(ScaleEvent(**ev))
    _load_quant_states(run, arrays, path)
    saved = meta["run"]
    run.state = RunState(step=meta["step"], history=saved["history"],
                         layer_series=saved["layer_series"],
                         quant_series=saved.get("quant_series", {}),
                         what_if=saved.get("what_if", []), hists=saved["hists"],
                         wall=saved["wall"])


def _load_quant_states(run: Run, arrays: dict[str, np.ndarray], path: Path) -> None:
    """Delayed-scaling states back into the quantized layers, validated like new ones
    (TRN-QNT-002): every layer and role the run keeps, a positive finite float32 scale,
    a float32 history of the recipe's length."""
    keys = {k for k in arrays if k.startswith("quant/")}
    for name, lin in run.quantized.items():
        st = lin.quant_state
        if st is None:
            continue
        st.delayed = {}
        for role in ("x", "w", "g"):
            sk, hk = f"quant/{name}/{role}/scale", f"quant/{name}/{role}/history"
            if sk not in arrays:
                continue
            keys -= {sk, hk}
            scale, hist = arrays[sk], arrays.get(hk)
            if (scale.shape != () or scale.dtype != np.float32 or not np.isfinite(scale)
                    or scale <= 0 or hist is None or hist.dtype != np.float32
                    or hist.shape != (1024,)):
                raise TrainError(f"checkpoint {str(path)!r}: bad delayed-scaling state for "
                                 f"{name}/{role} (scale {scale!r}, history "
                                 f"{None if hist is None else hist.shape})")
            st.delayed[role] = DelayedState(scale=np.float32(scale), history=hist.copy())
    if keys:
        raise TrainError(f"checkpoint {str(path)!r} holds quantizer states this run does not "
                         f"keep: {', '.join(sorted(keys)[:3])}")


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
        ok = (stored is not None and stored.dtype == np.uint8
              and bytes(stored).decode() == _digest(arrays))
        meta = json.loads(bytes(arrays["meta"]).decode()) if ok else None
    except Exception as e:  # noqa: BLE001 - zip, npy header, pickle refusal, truncation, JSON
        # NumPy's own messages (e.g. advice to pass allow_pickle=True) do not apply here
        raise TrainError(f"checkpoint {str(path)!r} is corrupt (unreadable: {type(e).__name__})"
                         f"{_previous_good(path)}") from None
    if meta is None:
        raise TrainError(f"checkpoint {str(path)!r} is corrupt (checksum "
                         f"mismatch){_previous_good(path)}")
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
    stored["plant"] = tuple(tuple(p) for p in stored.get("plant", ()))
    try:
        cfg = TrainConfig(steps=int(meta["target_steps"]), **stored)
    except TypeError as e:
        raise TrainError(f"checkpoint {str(last)!r} holds an unknown configuration: {e}") from None
    return cfg, last


def atomic_savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez through :func:`ampref.common.atomicio.atomic_write_with`: a partial write never
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


def tidy(out: Path, ck: Path, *, resume: bool) -> None:
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
