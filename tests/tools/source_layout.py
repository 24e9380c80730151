"""What the layout tests share (test_daemon_layout.py, test_spank_layout.py):
a tree's C sources, their quoted includes, the size limit and the search
for include circles. A module is a .c with its .h. Not a test itself."""
import os
import re

# No source file longer than about 500 lines (the slack is for comments).
MAX_LINES = 520

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def c_sources(top):
    """(path relative to top, text) of every .c and .h below top."""
    for root, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                yield os.path.relpath(path, top), f.read()


def module_of(rel):
    return os.path.splitext(rel)[0]


def too_long(rel, text):
    lines = text.count("\n")
    return [f"{rel}: {lines} lines (at most about 500)"] if lines > MAX_LINES else []


def include_circles(edges):
    """Circles in edges ({module: set of modules it includes}), found by a
    depth-first search; a.c including b.h and b.c including a.h is one."""
    state, stack, problems = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(edges.get(m, ())):
            if state.get(d) == 1:
                circle = stack[stack.index(d):] + [d]
                problems.append("include circle: " + " -> ".join(circle))
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    return problems


def report(edges, problems):
    """Prints each offence and a summary; the exit status for make check."""
    for p in problems:
        print(p)
    print(f"{len(edges)} modules with includes, {len(problems)} problem(s)")
    return 1 if problems else 0
