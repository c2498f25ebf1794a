"""`rypsok init PATH`: a commented starter configuration and the host entry that uses it.

The starter serves every category with keyless engines, so that it works as written, with
no key and no service of the operator's own; Brave (which needs a key) is there commented
out, with the variable that gives its key. It passes `rypsok check` as written (a test runs
the console script on it). The file is created, never replaced: an existing file, a
configuration someone may have edited, is left as it is.
"""

from __future__ import annotations

import json
import os
from typing import Final

__all__ = ["STARTER", "StarterExists", "host_entry", "write_starter"]

STARTER: Final = """\
# rypsok's configuration, written by `rypsok init`. The book's Configuration page lists
# every key; `rypsok check --config THIS_FILE` validates the file as `serve` reads it and
# prints what is in effect. rypsok reads this file at start only: restart it after a change.
config_version = 1

[service]
# Wikimedia asks for a way to reach the operator, and an e-mail address puts Crossref's
# requests in its polite pool. Uncomment and write your own:
# user_agent_contact = "mailto:you@example.org"

# Engines without a key, so that every category is served as soon as rypsok starts:
# general (Wikipedia), news (Hacker News), science (arXiv, Crossref, Wikipedia) and code
# (Stack Overflow, Hacker News). A lower preference ranks an engine's results first.

[engines.wikipedia]
type = "wikipedia"
categories = ["general", "science"]
preference = 10

[engines.hackernews]
type = "hackernews"
categories = ["news", "code"]
preference = 20

[engines.arxiv]
type = "arxiv"
categories = ["science"]
preference = 20

[engines.crossref]
type = "crossref"
categories = ["science"]
preference = 30

[engines.stackoverflow]
type = "stackexchange"
categories = ["code"]
site = "stackoverflow"
preference = 10

# Brave Search (general and news, a key from https://brave.com/search/api/). The key is
# never written here: give the host's entry an "env" with BRAVE_API_KEY (the book's
# integration guide shows it), then uncomment these lines.
# [engines.brave]
# type = "brave"
# categories = ["general", "news"]
# preference = 20
# api_key_env = "BRAVE_API_KEY"
"""


class StarterExists(Exception):
    """The path already names a file (or something else): init never replaces it.
    `directory`: it names a directory, in which the user meant the file to go."""

    def __init__(self, path: str, *, directory: bool) -> None:
        super().__init__(path)
        self.directory = directory


def write_starter(path: str) -> str:
    """Create the starter at `path` and return its absolute path; StarterExists when the
    path exists, OSError when it cannot be created (a missing directory, no permission, a
    path that ends in a separator and so names a directory)."""
    try:
        # "x": created here or refused, with no window where another file could be replaced.
        # The path as written: a trailing separator names a directory, which open refuses
        # where abspath would drop it and make a file of that name.
        with open(path, "x", encoding="utf-8", newline="\n") as out:
            out.write(STARTER)
    except (FileExistsError, IsADirectoryError):
        # "dir" is refused as existing, "dir/" as a directory; "new/" (none there) is not.
        if os.path.lexists(path) or os.path.isdir(path):
            raise StarterExists(path, directory=os.path.isdir(path)) from None
        raise
    return os.path.abspath(path)


def host_entry(config_path: str) -> str:
    """The `mcpServers` entry of a host that starts rypsok over stdio with `config_path`,
    as the integration guide writes it."""
    entry = {
        "mcpServers": {"rypsok": {"command": "rypsok", "args": ["serve", "--config", config_path]}}
    }
    return json.dumps(entry, indent=2) + "\n"
