"""keyless.toml pointed at one loopback test server replaying every engine's recorded answer:
the routes and the pointing are the conformance harness's (`conformance.keyless`)."""

from __future__ import annotations

from servers import Reply

from conformance.keyless import ANSWERS, keyless_pointed_at

__all__ = ["keyless_pointed_at", "replay_routes"]


def replay_routes() -> dict[str, Reply]:
    return {
        path: Reply(headers=(("Content-Type", kind),), body=file.read_bytes())
        for path, (kind, file) in ANSWERS.items()
    }
