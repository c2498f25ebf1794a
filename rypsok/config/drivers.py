"""The driver types as the configuration reads them; defined in `rypsok.shared.drivers`."""

from __future__ import annotations

from rypsok.shared.drivers import DRIVER_TYPES, DriverTraits

__all__ = ["DRIVER_TYPES", "DriverTraits"]
