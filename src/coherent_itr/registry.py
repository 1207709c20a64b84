"""One name → object registry type, used for losses, metrics and the study's arms.

A :class:`Registry` maps names to registered objects in registration order. Registering a name twice
raises unless it is the same object again (``same`` decides what "the same" is: for metrics the same
function, whatever its declarations); :meth:`Registry.unregister` removes a name, and
:meth:`Registry.registered` registers for the duration of a ``with`` block::

    >>> from coherent_itr.registry import Registry
    >>> colours = Registry("colour")
    >>> colours.register("red", (255, 0, 0))
    (255, 0, 0)
    >>> with colours.registered("green", (0, 255, 0)):
    ...     colours.available()
    ['red', 'green']
    >>> colours.available()
    ['red']
    >>> colours.get("blue")
    Traceback (most recent call last):
    ...
    ValueError: unknown colour 'blue'; registered: red
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["Registry"]


class Registry(Generic[T]):
    """Names → objects, in registration order.

    Args:
        kind: what is registered (``"loss"``, ``"metric"``, ``"arm"``), used in error messages.
        same: ``same(old, new)`` is True when registering ``new`` under a name that holds ``old`` is a
            harmless repeat (it then replaces ``old``); default: ``old is new``.
        describe: how error messages name an object (default ``repr``).
    """

    def __init__(
        self,
        kind: str,
        *,
        same: Callable[[T, T], bool] | None = None,
        describe: Callable[[T], str] = repr,
    ) -> None:
        self.kind = kind
        self._same = same or (lambda old, new: old is new)
        self._describe = describe
        self._items: dict[Hashable, T] = {}

    def register(self, name: Hashable, item: T) -> T:
        """Register ``item`` under ``name``.

        Args:
            name: the key (a string for losses and metrics, ``(paper, arm name)`` for arms).
            item: the object to register.

        Returns:
            ``item``, so that ``register`` can end a decorator.

        Raises:
            ValueError: ``name`` already holds a different object.
        """
        old = self._items.get(name)
        if name in self._items and not self._same(old, item):
            raise ValueError(
                f"{self.kind} {name!r} is already registered ({self._describe(old)}; new: {self._describe(item)}); "
                "unregister it first"
            )
        self._items[name] = item
        return item

    def unregister(self, name: Hashable, *, missing_ok: bool = False) -> T | None:
        """Remove ``name``.

        Args:
            name: a registered name.
            missing_ok: if True an unknown name is a no-op (returns None) instead of an error.

        Returns:
            The object that was registered under ``name`` (None for a missing name with ``missing_ok``).

        Raises:
            ValueError: ``name`` is not registered (and ``missing_ok`` is False).
        """
        if name not in self._items:
            if missing_ok:
                return None
            raise ValueError(f"{self.kind} {name!r} is not registered; registered: {self._names()}")
        return self._items.pop(name)

    @contextlib.contextmanager
    def registered(self, name: Hashable, item: T) -> Iterator[T]:
        """Context manager: ``item`` registered under ``name`` inside the block, unregistered after it.

        Args:
            name: the key to register.
            item: the object.

        Returns:
            A context manager yielding ``item``.
        """
        self.register(name, item)
        try:
            yield item
        finally:
            self.unregister(name, missing_ok=True)

    def available(self) -> list:
        """Returns: the registered names, in registration order."""
        return list(self._items)

    def get(self, name: Hashable) -> T:
        """The object registered as ``name``.

        Raises:
            ValueError: unknown ``name`` (the message lists the registered names).
        """
        if name not in self._items:
            raise ValueError(f"unknown {self.kind} {name!r}; registered: {self._names()}")
        return self._items[name]

    def items(self) -> list[tuple[Hashable, T]]:
        """Returns: ``(name, object)`` pairs in registration order (a copy)."""
        return list(self._items.items())

    def values(self) -> list[T]:
        """Returns: the registered objects in registration order (a copy)."""
        return list(self._items.values())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator:
        return iter(list(self._items))

    def _names(self) -> str:
        return ", ".join(str(n) for n in self._items) or "(none)"

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self)} registered)"
