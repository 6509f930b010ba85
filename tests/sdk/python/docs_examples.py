"""The fenced examples of the README and of docs/*.md, for the tests that run them as written.

`blocks(page, heading, lang)` returns the `lang` blocks directly under a heading and records
them as claimed by a test; `unclaimed()` lists the shell and Python blocks no test claimed and
no `<!-- not run: why -->` comment (on the line before the block) excuses."""

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGES = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
RUNNABLE = ("sh", "bash", "python")
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    heading: str  # the nearest heading line above it
    lang: str
    code: str
    not_run: str | None  # why it is not run, when the page says so


def parse(page: str) -> list[Block]:
    lines = (ROOT / page).read_text().split("\n")
    found, heading, i = [], "", 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"```(\w*)\s*$", line)
        if fence:
            end = i + 1
            while not lines[end].startswith("```"):
                end += 1
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            mark = NOT_RUN.fullmatch(before.strip())
            found.append(Block(page, i + 1, heading, fence.group(1), "\n".join(lines[i + 1:end]) + "\n",
                               mark.group(1) if mark else None))
            i = end + 1
            continue
        if re.match(r"#{1,6} ", line):
            heading = line
        i += 1
    return found


CLAIMED: set[tuple[str, int]] = set()


def blocks(page: str, heading: str, lang: str) -> list[str]:
    """The `lang` blocks of `page` directly under the heading line `heading` (subsections
    excluded), but for those marked not run; claimed as run by the caller."""
    assert any(line == heading for line in (ROOT / page).read_text().split("\n")), f"{page}: no {heading!r}"
    found = [b for b in parse(page) if b.heading == heading and b.lang == lang and b.not_run is None]
    assert found, f"{page}: no {lang} block to run under {heading!r}"
    for b in found:
        CLAIMED.add((b.page, b.line))
    return [b.code for b in found]


def unclaimed() -> list[Block]:
    return [b for page in PAGES for b in parse(page)
            if b.lang in RUNNABLE and b.not_run is None and (b.page, b.line) not in CLAIMED]
