#!/usr/bin/env python3
"""Checks that Cargo.toml's `rust-version` is at least the highest
`rust-version` any package in the locked normal dependency graph declares
(what `cargo build --locked` really needs). Exit 1 saying which packages need
more. Run by .ci/run."""
import json
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent
meta = json.loads(
    subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout
)
packages = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
root_id = meta["resolve"]["root"]


def version(v):
    return tuple(int(x) for x in (v or "0").split(".")) + (0,) * (3 - len((v or "0").split(".")))


# Walk normal (non-dev, non-build) dependencies of the default build from the root.
seen, todo = set(), [root_id]
while todo:
    pid = todo.pop()
    if pid in seen:
        continue
    seen.add(pid)
    for dep in nodes[pid]["deps"]:
        if any(k["kind"] is None for k in dep["dep_kinds"]):
            todo.append(dep["pkg"])
seen.discard(root_id)
needed = max(version(packages[p].get("rust_version")) for p in seen)
declared_text = re.search(r'^rust-version\s*=\s*"([^"]+)"', (root / "Cargo.toml").read_text(), re.M)
declared = version(declared_text.group(1) if declared_text else None)
top = sorted(
    (packages[p]["name"] + " " + packages[p]["version"], packages[p]["rust_version"])
    for p in seen
    if version(packages[p].get("rust_version")) == needed
)
need = ".".join(map(str, needed[:2]))
print(f"declared rust-version {declared_text.group(1) if declared_text else 'none'}; the locked graph needs {need} ({', '.join(n for n, _ in top)})")
if declared < needed:
    print(f"error: Cargo.toml rust-version is lower than {need}: raise it", file=sys.stderr)
    sys.exit(1)
