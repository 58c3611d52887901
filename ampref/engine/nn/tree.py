"""Walking a module tree as torch does (ENG-NN-002): ``named_modules``, ``children``,
``named_parameters`` and ``named_buffers`` list an object once however often it is
shared (a tied embedding and output weight is one parameter), ``apply`` visits children
before their parent, ``requires_grad_`` freezes or unfreezes every parameter.

The order is torch's: a module's own entries in registration order, then each child's
subtree in registration order, depth first. ``state_dict`` (in :mod:`.base`) walks the
same tree without dropping duplicates, so a tied weight is saved under both names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ampref.common.checks import check_flag

__all__ = ["ModuleTree"]

T = TypeVar("T", bound="ModuleTree")


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


class ModuleTree:
    """Traversal methods over ``_params``, ``_buffers`` and ``_children`` (set by
    :class:`ampref.engine.nn.Module`)."""

    _params: dict[str, Any]
    _buffers: dict[str, Any]
    _children: dict[str, Any]

    def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        """(qualified name, module) for this module and every descendant, depth first;
        with ``remove_duplicate`` (the default) a module reached twice is listed at its
        first name only. ``memo`` holds the ids already listed (torch's argument)."""
        remove_duplicate = check_flag("remove_duplicate", remove_duplicate)
        seen: set[int] = set() if memo is None else memo
        # an explicit stack, not recursion: a deep Sequential must not hit the limit
        stack: list[tuple[str, Any]] = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if remove_duplicate:
                if id(module) in seen:
                    continue
                seen.add(id(module))
            yield name, module
            kids = [(_join(name, k), m) for k, m in module._children.items() if m is not None]
            stack.extend(reversed(kids))

    def modules(self, remove_duplicate: bool = True) -> Iterator[Any]:
        """Every module of the tree, this one first (shared ones once by default)."""
        for _, m in self.named_modules(remove_duplicate=remove_duplicate):
            yield m

    def named_children(self) -> Iterator[tuple[str, Any]]:
        """(name, module) of the direct children, a shared child once."""
        seen: set[int] = set()
        for name, m in self._children.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Any]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, table: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Any]]:
        """Entries of ``table`` (``_params`` or ``_buffers``) over the tree: None
        entries skipped, an object reached twice listed once unless asked otherwise."""
        recurse = check_flag("recurse", recurse)
        remove_duplicate = check_flag("remove_duplicate", remove_duplicate)
        if recurse:
            tree = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
        else:
            tree = iter([(prefix, self)])
        seen: set[int] = set()
        for mod_name, module in tree:
            for name, value in getattr(module, table).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield _join(mod_name, name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        """(qualified name, parameter) in torch's order; a tied parameter once, at its
        first name (so an optimizer built from ``parameters()`` updates it once)."""
        return self._named_members("_params", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> list[Any]:
        """The parameters of ``named_parameters``, as a list (torch: an iterator)."""
        return [p for _, p in self.named_parameters(recurse=recurse)]

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        """(qualified name, buffer) of every registered buffer, persistent or not."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Any]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self: T, fn: Callable[[Any], Any]) -> T:
        """Call ``fn(module)`` on every child's subtree, then on this module (torch's
        order: a parent's hook sees its children already initialised); returns self."""
        if not callable(fn):
            raise TypeError(f"apply takes a function of one module, got {type(fn).__name__}")
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def requires_grad_(self: T, requires_grad: bool = True) -> T:
        """Set ``requires_grad`` on every parameter (False freezes them: backward leaves
        their ``.grad`` None and optimizers skip them); returns self."""
        flag = check_flag("requires_grad", requires_grad)
        for p in self.parameters():
            p.requires_grad = flag
        return self
