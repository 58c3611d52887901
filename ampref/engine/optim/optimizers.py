"""Optimizers on float32 master weights, with loss-scaler integration (ENG-OPT-*).

* O1 (autocast style): parameters are float32; they are their own master weights.
* O2 (Apex style): parameters stored in fp16/bf16 (``Module.to_format``); the
  optimizer keeps float32 master copies, updates them, and writes the parameters back
  rounded to nearest-even (ENG-OPT-002).
* ``master_weights=False`` (pure low precision): the update is computed in float32 and
  rounded straight into the low-precision parameter, so updates below half an ulp
  are lost (ENG-OPT-003).

All arithmetic is elementwise IEEE float32 (scalars such as ``lr`` and the bias
corrections rounded to float32 first), so an update is bitwise reproducible.

``step(scaler=...)`` unscales the gradients (unless already done), records the inf
check, asks the scaler whether to apply and applies only then: a skipped step leaves
weights, optimizer state and step counters untouched (ENG-OPT-004).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ampref import kernels
from ampref.backends import DeviceScaling  # type: ignore[attr-defined]  # mapped from backends/
from ampref.scaling.scaler import LossScaler
from ampref.common.checks import check_flag

from ..tensor import Tensor
from .groups import ParamGroup, check_lr

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]

_f = np.float32


def _check_params(params: Any) -> list[Tensor]:
    """The parameter list: leaf tensors, each once.

    Raises:
        TypeError: not a parameter (its position named); parameter groups (dicts).
        ValueError: empty, or a parameter listed twice (torch warns and then updates it
            twice; ampref refuses).
    """
    if isinstance(params, Tensor):
        raise TypeError("params must be an iterable of tensors (model.parameters()), got "
                        "one Tensor")
    out = list(params)
    if not out:
        raise ValueError("optimizer got an empty parameter list")
    for i, p in enumerate(out):
        if isinstance(p, dict):
            raise TypeError("parameter groups (dicts) are not supported: ampref's optimizers "
                            "hold one group (docs/torch-api-differences.md)")
        # a frozen parameter (requires_grad False) is accepted and skipped while its
        # grad is None, as torch's optimizers take model.parameters() after freezing
        if not isinstance(p, Tensor) or not p.is_leaf:
            raise TypeError(f"parameter {i} is not a leaf ampref.Tensor (a tensor computed "
                            f"by an op cannot be optimized)")
    seen: dict[int, int] = {}
    for i, p in enumerate(out):
        if id(p) in seen:
            raise ValueError(f"parameter {i} is the same tensor as parameter {seen[id(p)]}: "
                             "each parameter may appear once")
        seen[id(p)] = i
    return out


class Optimizer:
    """Base: parameter list, float32 masters, state, step with an optional scaler."""

    #: the per-parameter buffers this optimizer keeps (a state dict naming others came
    #: from another optimizer)
    buffers: frozenset[str] = frozenset()

    def __init__(self, params: Sequence[Tensor], lr: float, *, master_weights: bool = True) -> None:
        self.params = _check_params(params)
        self.lr = check_lr(lr)
        self.master_weights = check_flag("master_weights", master_weights)
        self.steps = 0
        self.master: list[Any] = [self._master_of(p) for p in self.params]
        self.state: list[dict[str, Any]] = [{} for _ in self.params]

    def _master_of(self, p: Tensor) -> Any:
        if p.format.covers_float32 or not self.master_weights:
            return None  # the parameter itself is the master (or there is none)
        return p.data.astype(np.float32).copy()

    @property
    def param_groups(self) -> list[ParamGroup]:
        """torch's view of the hyperparameters: one group holding every parameter. A
        scheduler (or a script) sets ``param_groups[0]["lr"]``; the next step uses it."""
        return [ParamGroup(self)]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients: None (default, as torch) or zeros of the same shape."""
        set_to_none = check_flag("set_to_none", set_to_none)
        for p in self.params:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = p.backend.xp.zeros_like(p.grad)

    def grads(self) -> list[Any]:
        return [p.grad for p in self.params]

    def step(self, scaler: LossScaler | None = None) -> bool:
        """Apply one update; with ``scaler``: unscale, check, update the scale, and apply
        only if the scaler says so. Returns True when the weights changed."""
        if scaler is not None and not isinstance(scaler, LossScaler):
            raise TypeError(f"scaler must be an ampref LossScaler (or None), got "
                            f"{type(scaler).__name__}: {scaler!r}; with amp.GradScaler call "
                            "scaler.step(optimizer)")
        if scaler is not None:
            if not scaler.is_unscaled():
                self.unscale_(scaler)
            if not scaler.update():
                return False
        self.steps += 1
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            # no copies where the dtype already fits: every _update computes new arrays and
            # never writes into w or g (on a device each copy is a launch per parameter)
            g = p.grad.astype(p.data.dtype if p.format.wide else np.float32, copy=False)
            w = self.master[i] if self.master[i] is not None else \
                p.data.astype(g.dtype, copy=False)
            with np.errstate(all="ignore"):
                new = self._update(i, w, g)
            if self.master[i] is not None:
                self.master[i] = new
            p.data = _store(p, new)
        return True

    def unscale_(self, scaler: LossScaler) -> bool:
        """Unscale every gradient in place (torch's unscale_); returns found_inf (on a
        device backend the flag stays on the device and False is returned)."""
        be = self.params[0].backend
        if isinstance(be, DeviceScaling):
            # device gradients: unscaled in place, the inf flag stays on the device until
            # scaler.update() reads the step's decision (BKD-SCL-001)
            scaler.unscale_on_device([p.grad for p in self.params], be)
            for p in self.params:
                p.grad_scale = None
            return False
        grads, found = scaler.unscale([p.grad for p in self.params])
        for p, g in zip(self.params, grads, strict=True):
            p.grad = g
            p.grad_scale = None
        return bool(found)

    def _update(self, i: int, w: Any, g: Any) -> Any:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Steps, per-parameter buffers and master copies (NumPy arrays)."""
        return {"steps": self.steps, "lr": self.lr,
                "state": [{k: np.array(self._host(v)) for k, v in s.items()} for s in self.state],
                "master": [None if m is None else np.array(self._host(m)) for m in self.master]}

    def _host(self, v: Any) -> Any:
        if isinstance(v, (int, float, np.ndarray, np.generic)):
            return v
        return self.params[0].backend.to_numpy(v)

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output.

        Raises:
            ValueError: the number of parameters or a buffer shape does not match, or a
                buffer this optimizer does not keep (another optimizer's state: SGD's
                momentum loaded into Adam would run on with SGD's step count).
        """
        keys = {"steps", "lr", "state", "master"}
        if not isinstance(sd, dict) or set(sd) != keys:
            got = sorted(sd) if isinstance(sd, dict) else type(sd).__name__
            raise ValueError(f"an optimizer state dict has the keys {sorted(keys)}, got {got}")
        if not isinstance(sd["state"], list) or not isinstance(sd["master"], list):
            raise ValueError("optimizer state dict 'state' and 'master' must be lists (one entry "
                             "per parameter)")
        if len(sd["state"]) != len(self.params) or len(sd["master"]) != len(self.params):
            raise ValueError(f"optimizer state has {len(sd['state'])} parameters, this optimizer "
                             f"has {len(self.params)}")
        for p, s in zip(self.params, sd["state"], strict=True):
            if not isinstance(s, dict):
                raise ValueError(f"optimizer state entries are dicts of buffers, got "
                                 f"{type(s).__name__}")
            foreign = sorted(set(s) - self.buffers)
            if foreign:
                raise ValueError(f"optimizer state holds {foreign!r}; {type(self).__name__} "
                                 f"keeps the buffers {sorted(self.buffers)}")
            for k, v in s.items():
                if np.shape(v) not in ((), p.shape):
                    raise ValueError(f"optimizer buffer {k!r} has shape {np.shape(v)}, parameter "
                                     f"{p.shape}")
        self.steps, self.lr = int(sd["steps"]), float(sd["lr"])
        be = self.params[0].backend
        self.state = [{k: np.array(v) if np.ndim(v) == 0 else be.asarray(np.array(v))
                       for k, v in s.items()} for s in sd["state"]]
        self.master = [None if m is None else be.asarray(np.array(m, dtype=np.float32))
                       for m in sd["master"]]


def _store(p: Tensor, new: Any) -> Any:
    """Write updated values into the parameter's format (nearest-even)."""
    if p.format.covers_float32:
        return new.astype(p.data.dtype, copy=False)  # new is the update's own array
    return p.backend.asarray(p.backend.quantize(new.astype(np.float32), p.format), dtype=np.float32)


class SGD(Optimizer):
    """torch.optim.SGD order: g += wd*w; buf = momentum*buf + (1 - dampening)*g (buf = g
    at the first step); g = g + momentum*buf if nesterov else buf; w -= lr*g."""

    buffers = frozenset({"momentum_buffer"})

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False, *,
                 master_weights: bool = True) -> None:
        super().__init__(params, lr, master_weights=master_weights)
        for name, v, hi in (("momentum", momentum, 1.0), ("dampening", dampening, 1.0),
                            ("weight_decay", weight_decay, math.inf)):
            # momentum >= 1 makes the buffer grow without bound (torch accepts it)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < hi:
                raise ValueError(f"{name} must be a number in [0, {hi:g}), got {v!r}")
        nesterov = check_flag("nesterov", nesterov)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("nesterov needs momentum > 0 and dampening 0")
        self.momentum, self.weight_decay = momentum, weight_decay
        self.dampening, self.nesterov = dampening, nesterov

    def _update(self, i: int, w: Any, g: Any) -> Any:
        t = w.dtype.type
        if self.weight_decay:
            g = g + t(self.weight_decay) * w
        if self.momentum:
            st = self.state[i]
            if "momentum_buffer" not in st:
                buf = g.copy()
            else:
                buf = t(self.momentum) * st["momentum_buffer"] + t(1 - self.dampening) * g
            st["momentum_buffer"] = buf
            g = g + t(self.momentum) * buf if self.nesterov else buf
        return w - t(self.lr) * g


class Adam(Optimizer):
    """Adam (Kingma & Ba) in torch's arrangement: m = b1 m + (1 - b1) g;
    v = b2 v + (1 - b2) g^2; w -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    ``weight_decay`` adds wd*w to g (L2, as torch.optim.Adam)."""

    decoupled = False
    buffers = frozenset({"step", "exp_avg", "exp_avg_sq"})

    def __init__(self, params: Sequence[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, *, master_weights: bool = True) -> None:
        super().__init__(params, lr, master_weights=master_weights)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        b1, b2 = betas
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ValueError(f"betas must lie in [0, 1), got {betas}")
        # eps = 0 divides by sqrt(v) = 0 for parameters whose gradient was always 0
        if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
            raise ValueError(f"eps must be a positive finite number, got {eps!r}")
        if not (isinstance(weight_decay, (int, float)) and 0 <= weight_decay < math.inf):
            raise ValueError(f"weight_decay must be a finite number >= 0, got {weight_decay!r}")
        self.betas, self.eps, self.weight_decay = (b1, b2), eps, weight_decay

    def _update(self, i: int, w: Any, g: Any) -> Any:
        t = w.dtype.type
        b1, b2 = self.betas
        st = self.state[i]
        step = int(st.get("step", 0)) + 1
        st["step"] = np.array(step)
        xp = self.params[i].backend.xp
        # zeros only at the first step (a default argument would allocate them every step)
        m = st["exp_avg"] if "exp_avg" in st else xp.zeros_like(w)
        v = st["exp_avg_sq"] if "exp_avg_sq" in st else xp.zeros_like(w)
        k = (t(1 - self.lr * self.weight_decay), t(self.weight_decay), t(b1), t(1 - b1),
             t(b2), t(1 - b2), t(math.sqrt(1 - b2**step)), t(self.eps),
             t(self.lr / (1 - b1**step)))
        if xp is np and kernels.compiled() and w.dtype == g.dtype:
            from ampref.kernels import optim_numba

            new, st["exp_avg"], st["exp_avg_sq"] = optim_numba.adam_update(
                w, g, m.astype(w.dtype, copy=False), v.astype(w.dtype, copy=False), k,
                decoupled=self.decoupled, decay=bool(self.weight_decay))
            return new
        # a device backend's one-launch twin (BKD-OPT-001; None: run the operations below)
        fused = getattr(self.params[i].backend, "adam_update", None)
        done = fused(w, g, m.astype(w.dtype, copy=False), v.astype(w.dtype, copy=False), k,
                     decoupled=self.decoupled, decay=bool(self.weight_decay)) \
            if fused is not None and w.dtype == g.dtype else None
        if done is not None:
            new, st["exp_avg"], st["exp_avg_sq"] = done
            return new
        if self.weight_decay and self.decoupled:
            w = w * t(1 - self.lr * self.weight_decay)
        elif self.weight_decay:
            g = g + t(self.weight_decay) * w
        m = t(b1) * m + t(1 - b1) * g
        v = t(b2) * v + t(1 - b2) * (g * g)
        st["exp_avg"], st["exp_avg_sq"] = m, v
        step_size = t(self.lr / (1 - b1**step))
        denom = xp.sqrt(v) / t(math.sqrt(1 - b2**step)) + t(self.eps)
        return w - step_size * (m / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay: w *= (1 - lr*wd) before the Adam update."""

    decoupled = True

    def __init__(self, params: Sequence[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, *, master_weights: bool = True) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, master_weights=master_weights)
