"""Compare ampref's public call shapes with torch's (used by test_torch_api.py).

A *difference* is ``(object, kind, parameter)``:

* ``omitted``: torch has the parameter, ampref does not (calling with it is a TypeError);
* ``extra``: ampref's own parameter (always keyword-only);
* ``keyword-only``: positional in torch, keyword-only in ampref;
* ``default``: both have it with different defaults (``required`` counts as a default);
* ``ampref-only``: torch has no such function or class (parameter ``-``).

Hard rules, never a documented difference: ampref's positional parameters are a prefix
of torch's positional parameters (so a positional call never binds a value to another
meaning) and every extra is keyword-only. torch's deprecated or private parameters
(:data:`IGNORED`) are not compared.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from typing import Any

REQUIRED = "required"
#: torch parameters that are deprecated, private or torch-only plumbing
IGNORED = frozenset({"self", "out", "size_average", "reduce", "_stacklevel", "_weight", "_freeze"})


@dataclass(frozen=True)
class Param:
    name: str
    positional: bool
    default: Any  # REQUIRED when there is none


def ampref_params(obj: Any) -> list[Param]:
    target = obj.__init__ if inspect.isclass(obj) else obj
    out = []
    for p in inspect.signature(target).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = REQUIRED if p.default is p.empty else p.default
        out.append(Param(p.name, p.kind is p.POSITIONAL_OR_KEYWORD, default))
    return out


def torch_params(obj: Any, name: str, *, tensor_method: bool = False) -> list[Param]:
    """From inspect where torch has a Python signature, else from its docstring (the
    overload with the most parameters). ``tensor_method``: a ``torch.Tensor`` method
    compared with a function, so ``input`` comes first."""
    if tensor_method:
        return [Param("input", True, REQUIRED), *_from_doc(obj.__doc__ or "", name)]
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        sig = inspect.signature(target)
    except (ValueError, TypeError):
        return _from_doc(obj.__doc__ or "", name)
    out = []
    for p in sig.parameters.values():
        if p.name in IGNORED or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = REQUIRED if p.default is p.empty else p.default
        out.append(Param(p.name, p.kind is p.POSITIONAL_OR_KEYWORD, default))
    return out


def _from_doc(doc: str, name: str) -> list[Param]:
    best: list[Param] | None = None
    for m in re.finditer(rf"(?<![\w.]){re.escape(name)}\(", doc):
        depth, i = 1, m.end()
        while i < len(doc) and depth:
            depth += {"(": 1, ")": -1}.get(doc[i], 0)
            i += 1
        params = _parse(doc[m.end():i - 1])
        if params is not None and (best is None or len(params) > len(best)):
            best = params
    if best is None:
        raise ValueError(f"no signature for torch's {name} in its docstring")
    return best


def _parse(text: str) -> list[Param] | None:
    parts, depth, cur = [], 0, ""
    for ch in " ".join(text.split()):
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    out, positional = [], True
    for part in parts:
        if part == "*":
            positional = False
            continue
        pname, _, default = part.partition("=")
        pname = pname.split(":")[0].strip()
        if not pname.isidentifier():
            return None
        if pname in IGNORED:
            continue
        out.append(Param(pname, positional, _literal(default.strip()) if default else REQUIRED))
    return out


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def differences(label: str, ours: list[Param],
                theirs: list[Param]) -> tuple[set[tuple[str, str, str]], list[str]]:
    """(documentable differences, violations of the hard rules)."""
    diffs: set[tuple[str, str, str]] = set()
    errors: list[str] = []
    t_by = {p.name: p for p in theirs}
    o_by = {p.name: p for p in ours}
    t_pos = [p.name for p in theirs if p.positional]
    o_pos = [p.name for p in ours if p.positional]
    if o_pos != t_pos[:len(o_pos)]:
        errors.append(f"{label}: positional parameters {o_pos} are not a prefix of torch's {t_pos}")
    for p in theirs:
        if p.name not in o_by:
            diffs.add((label, "omitted", p.name))
    for p in ours:
        t = t_by.get(p.name)
        if t is None:
            if p.positional:
                errors.append(f"{label}: ampref's own parameter {p.name!r} must be keyword-only")
            diffs.add((label, "extra", p.name))
            continue
        if t.positional and not p.positional:
            diffs.add((label, "keyword-only", p.name))
        if not _same_default(p.default, t.default):
            diffs.add((label, "default", p.name))
    return diffs, errors


def _same_default(a: Any, b: Any) -> bool:
    """Equal defaults; a bool never equals a number (False is not 0 here)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return repr(a) == repr(b)
