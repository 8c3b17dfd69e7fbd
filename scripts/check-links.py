#!/usr/bin/env python3
"""Checks that every relative link in README.md and docs/*.md points at a file
or folder in this repository (and stays inside it). Exit 1 naming each broken
link. Run by .ci/run."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
link = re.compile(r"\]\(([^)\s]+)\)")
broken = []
for md in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
    for n, line in enumerate(md.read_text().splitlines(), 1):
        for target in link.findall(line):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            path = (md.parent / target.split("#")[0]).resolve()
            if root not in path.parents and path != root:
                broken.append(f"{md.relative_to(root)}:{n}: {target} leaves the repository")
            elif not path.exists():
                broken.append(f"{md.relative_to(root)}:{n}: {target} does not exist")
for b in broken:
    print(b)
sys.exit(1 if broken else 0)
