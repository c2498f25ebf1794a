"""tools/bench-extract --through-fetch itself: pages read through web_fetch from its own
loopback server score as the direct path does, in every serving."""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FRENCH = (
    "La municipalité a inauguré le quai nord lundi, après trois années de travaux : le "
    "marché aux poissons a déménagé et la digue a été reconstruite, à grands frais."
)
ENGLISH = (
    "The harbour authority opened the northern quay on Monday, after three years of work "
    "that moved the old fish market and rebuilt the sea wall against the winter storms."
)


def _page(text: str, head: str = "") -> str:
    return (
        f"<html><head>{head}<title>Quay</title></head><body><div class='nav'><a href='/'>Home"
        f"</a></div><div class='story'><h1>The quay</h1><p>{text}</p><p>{ENGLISH}</p></div>"
        "</body></html>"
    )


def test_req_page_005_req_page_007_through_fetch_scores_every_serving_as_the_direct_path(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "extraction-dev" / "cleaneval-dev"
    (folder / "html").mkdir(parents=True)
    (folder / "gold").mkdir()
    pages = {
        # CleanEval's wrapper line before the document (sniffed as text before this branch).
        "wrapped": ('<text id="http://example.org/a">\n' + _page(FRENCH)).encode("utf-8"),
        # windows-1252, declared by its meta only (a UTF-8 or Latin-1 header is wrong for one
        # of the two pages in the servings that send one).
        "legacy": _page(FRENCH, '<meta charset="windows-1252">').encode("cp1252"),
        "utf8": _page(FRENCH, '<meta charset="utf-8">').encode("utf-8"),
    }
    gold = f"URL: http://example.org/a\n<h>The quay\n<p>{FRENCH}\n<p>{ENGLISH}\n"
    for name, body in pages.items():
        (folder / "html" / f"{name}.html.gz").write_bytes(gzip.compress(body))
        (folder / "gold" / f"{name}.txt.gz").write_bytes(gzip.compress(gold.encode()))
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench-extract"), "--data", str(tmp_path),
         "--set", "cleaneval-dev", "--no-peers", "--through-fetch", "--faults", "5"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    direct = re.search(r"^  rypsok +F1 (\d\.\d{3}) .* empty +0 ", done.stdout, re.M)
    assert direct is not None, done.stdout
    served = re.findall(
        r"^  web_fetch, served (\w+) +F1 (\d\.\d{3}) +empty +(\d+) +errors +(\d+) +differ +(\d+)"
        r" \(words +(\d+)\) +lower +(\d+)$",
        done.stdout,
        re.M,
    )
    assert {row[0] for row in served} == {"html", "utf8", "none", "gzip", "latin1", "xhtml"}
    # A header's charset is read as declared (REQ-PAGE-007): the pages whose bytes it
    # misstates differ from the direct path (utf8: the windows-1252 page; latin1: the two
    # UTF-8 pages), none is empty and none fails; every other serving scores as the direct
    # path does, page for page.
    misstated = {"utf8": "1", "latin1": "2"}
    for serving, f1, empty, errors, differ, _words, _lower in served:
        assert (empty, errors) == ("0", "0"), serving
        assert differ == misstated.get(serving, "0"), serving
        if serving not in misstated:
            assert f1 == direct.group(1), serving
    assert float(direct.group(1)) > 0.9
