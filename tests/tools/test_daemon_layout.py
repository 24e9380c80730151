#!/usr/bin/env python3
"""squashd's layout (docs/architecture.md, "The daemon's layout"): the
include graph of daemon/ has no circle, even between modules (a module is
a .c with its .h: a.c including b.h and b.c including a.h is a circle),
every include goes to the same layer or one below, no source file is
longer than about 500 lines, and the registry is owned by the core: outside
core/ and registry/ nothing calls a registry_* function or reaches into
daemon_state's registry. Run by make check; prints each offence."""
import os
import re
import sys

from source_layout import INCLUDE, c_sources, include_circles, module_of, report, too_long

HERE = os.path.dirname(os.path.abspath(__file__))
DAEMON = os.path.normpath(os.path.join(HERE, "..", "..", "daemon"))

# Layers, top first: a folder may include its own and those below it.
LAYERS = ["main", "server", "requests", "core", "registry", "settings",
          "slurm", "mount", "process", "util"]
# Programs apart from squashd, and what each may include besides proto/:
# the client tools use the few helpers named here; squash-reader (the FUSE
# server squashd starts) only its own folder.
APART = {"cli": {"cli", "util"}, "reader": {"reader"}}

# The registry's owners, and what reaching into it looks like elsewhere.
REGISTRY_OWNERS = {"core", "registry"}
REGISTRY_USE = re.compile(r'\bregistry_\w+\s*\(|(?:->|\.)registry\b')


def folder_of(module):
    return module.split("/")[0] if "/" in module else "main"


def main():
    edges, problems = {}, []
    for rel, text in c_sources(DAEMON):
        problems += too_long(rel, text)
        mod = module_of(rel)
        if folder_of(mod) not in REGISTRY_OWNERS:
            for n, line in enumerate(text.splitlines(), 1):
                if REGISTRY_USE.search(line.split("//")[0]):
                    problems.append(f"{rel}:{n}: uses the registry directly "
                                    f"(only core/ may): {line.strip()}")
        for inc in INCLUDE.findall(text):
            if "/" not in inc or not os.path.exists(os.path.join(DAEMON, inc)):
                continue  # proto/, generated or system headers
            dep = module_of(inc)
            if dep != mod:
                edges.setdefault(mod, set()).add(dep)
            src, dst = folder_of(mod), folder_of(dep)
            unplaced = [f for f in (src, dst) if f not in LAYERS and f not in APART]
            if unplaced:
                problems.append(f"{rel}: folder {unplaced[0]}/ has no layer "
                                "(add it to LAYERS in this script)")
            elif src in APART:
                if dst not in APART[src]:
                    problems.append(f"{rel}: {src}/ includes {inc}")
            elif dst in APART or LAYERS.index(dst) < LAYERS.index(src):
                problems.append(f"{rel}: includes {inc}, a layer above {src}/")
    problems += include_circles(edges)
    return report(edges, problems)


if __name__ == "__main__":
    sys.exit(main())
