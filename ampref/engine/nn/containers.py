"""``ModuleList`` and ``ModuleDict``: children held in a list or by name, registered in
order so that ``parameters()`` and ``state_dict()`` name them as torch does
(``blocks.0.weight``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .base import Module

__all__ = ["ModuleDict", "ModuleList"]


def _module(m: Any, where: str) -> Module:
    if not isinstance(m, Module):
        raise TypeError(f"{where} holds Modules, got {type(m).__name__}")
    return m


class ModuleList(Module):
    """A list of modules; no forward of its own (iterate over it)."""

    _items: list[Module]

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        object.__setattr__(self, "_items", [])
        for m in modules or ():
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        i = len(self._items)
        setattr(self, str(i), _module(module, f"ModuleList[{i}]"))
        self._items.append(module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i: int) -> Module:
        item: Module = self._items[i]
        return item

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Module]:
        return iter(list(self._items))


class ModuleDict(Module):
    """Modules by name, in insertion order."""

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        for k, m in (modules or {}).items():
            self[k] = m

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"ModuleDict keys must be identifiers, got {key!r}")
        setattr(self, key, _module(module, f"ModuleDict[{key!r}]"))

    def __getitem__(self, key: str) -> Module:
        if key not in self._children:
            raise KeyError(f"{key!r} (keys: {', '.join(self._children) or 'none'})")
        return self._children[key]

    def __contains__(self, key: object) -> bool:
        return key in self._children

    def __len__(self) -> int:
        return len(self._children)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._children))

    def keys(self) -> list[str]:
        return list(self._children)

    def items(self) -> list[tuple[str, Module]]:
        return list(self._children.items())

    def values(self) -> list[Module]:
        return list(self._children.values())
