#!/usr/bin/env python3
"""Checks that every relative link in README.md and docs/*.md points at a file
or folder in this repository (and stays inside it), and that every pointer
at the docs in the code, its --help texts and comments (`docs/guide.md,
"Phase markers"`, `README ("Metrics")`) names a file that exists and, where
it names a section, a heading that file has. Exit 1 naming each broken
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


def headings(path):
    """The heading texts of a Markdown file, lowercased."""
    return [
        line.lstrip("#").strip().lower()
        for line in path.read_text().splitlines()
        if line.startswith("#")
    ]


# `docs/guide.md, "Phase markers"`, `docs/guide.md's "Phase markers"`,
# `docs/guide.md, Phase markers)`, `README ("Metrics")`, `README, "Metrics"`.
pointer = re.compile(
    r"(docs/[A-Za-z0-9_-]+\.md|README(?:\.md)?)"
    r"(?:(?:'s|,| \(|, |\s)\s*\\?\"([^\"\\]{2,60})\\?\"|, ([A-Z][a-z]+(?: [a-z]+)*)\))?"
)
for source in sorted([*root.glob("src/**/*.rs"), *root.glob("python/**/*.py")]):
    for n, line in enumerate(source.read_text().splitlines(), 1):
        for m in pointer.finditer(line):
            name = m.group(1)
            target = root / ("README.md" if name.startswith("README") else name)
            where = f"{source.relative_to(root)}:{n}"
            if not target.is_file():
                broken.append(f"{where}: {name} does not exist")
                continue
            section = m.group(2) or m.group(3)
            if section and not any(section.lower() in h for h in headings(target)):
                broken.append(f"{where}: {name} has no section {section!r}")
for b in broken:
    print(b)
sys.exit(1 if broken else 0)
