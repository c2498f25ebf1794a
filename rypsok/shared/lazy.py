"""Names a package offers without importing their modules until they are used (PEP 562).

The top-level package and the egress package both keep their start cheap this way: a name
is looked up in a table of homes on first use and then kept in the package, so the next read
is a plain attribute read.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["lazy_attributes"]


def lazy_attributes(module: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of `module`: each name of `homes` imported from its home module
    (a home without a dot is a module of the package `module`)."""
    namespace = sys.modules[module].__dict__

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home if "." in home else f"{module}.{home}"), name)
        namespace[name] = value
        return value

    return __getattr__
