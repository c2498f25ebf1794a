"""The project's interpreter for the Python tools of this folder (`tools/bench`,
`tools/bench-coordination`, `tools/bench-extract`, `tools/parse-agreement`): a tool started
by another interpreter (its shebang's `python3`) runs again inside `.venv`, where rypsok and
the development dependencies are installed.

A tool imports it before anything of the project (this folder is the first entry of
`sys.path` when one of its scripts runs):

    from project_venv import in_project_venv

    _ROOT = in_project_venv(__file__)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["ROOT", "in_project_venv"]

ROOT = Path(__file__).resolve().parent.parent


def in_project_venv(script: str) -> Path:
    """The checkout's root, once this process runs in the project's venv: when another
    interpreter runs `script`, it is run again by the venv's (the call does not return). A
    checkout without a venv runs as it was started."""
    venv = ROOT / ".venv"
    python = venv / "bin" / "python"
    if python.exists() and Path(sys.prefix).resolve() != venv.resolve():
        os.execv(str(python), [str(python), script, *sys.argv[1:]])
    return ROOT
