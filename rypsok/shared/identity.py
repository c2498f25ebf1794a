"""How rypsok names itself on the network: one User-Agent for engines and fetched pages.

It lives below the core so that the egress layer (the fetch client) and the engines' client
both read it without either knowing the other (REQ-CMP-004).
"""

from __future__ import annotations

from typing import Final

from rypsok.shared.version import __version__

__all__ = ["PROJECT_URL", "user_agent"]

PROJECT_URL: Final = "https://github.com/nabbisen/rypsok"


def user_agent(contact: str) -> str:
    """`rypsok/<version> (+<project URL>; <contact>)`, or without `; <contact>` when empty.

    REQ-CMP-004: one stable form for every request. With no contact configured the project
    URL is the only way to reach anyone, so it is sent alone rather than with an empty slot.
    """
    contact = contact.strip()
    if any(not (0x20 <= ord(c) <= 0x7E) for c in contact):
        raise ValueError("service.user_agent_contact must be printable ASCII on one line")
    if contact:
        return f"rypsok/{__version__} (+{PROJECT_URL}; {contact})"
    return f"rypsok/{__version__} (+{PROJECT_URL})"
