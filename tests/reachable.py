"""What an object keeps: every string reachable from it through the garbage collector's
references (REQ-PRIV-003's tests: nothing of a query outlives its call)."""

from __future__ import annotations

import gc
import types

__all__ = ["strings_reachable_from"]


def strings_reachable_from(
    root: object, *, into_modules: bool = True, limit: int = 200_000
) -> list[str]:
    """The strings reachable from `root`, walking at most `limit` objects. Classes are not
    walked (their attributes are code, not what a call left); with `into_modules` false,
    neither are modules and functions (for an object whose own state is the question)."""
    skipped: tuple[type, ...] = (type,)
    if not into_modules:
        skipped = (type, types.ModuleType, types.FunctionType)
    seen: set[int] = set()
    found: list[str] = []
    stack = [root]
    while stack and len(seen) < limit:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skipped):
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            found.append(obj)
            continue
        stack.extend(gc.get_referents(obj))
    return found
