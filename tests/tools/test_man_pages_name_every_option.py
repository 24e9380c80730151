#!/usr/bin/env python3
"""Each program's man page and its code name the same options: every long
option the program parses (its getopt_long table, a subcommand's literal
"--x", or squash-pack's case arms) is described in its man page, and every
option the man page describes in an item of its own (.TP) is one the
program parses. Run by make check; prints each mismatch."""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))

# program source -> its man page
PROGRAMS = {
    "daemon/main.c": "docs/squashd.8",
    "daemon/cli/squashctl.c": "docs/squashctl.8",
    "daemon/cli/squash_shell.c": "docs/squash-shell.1",
    "daemon/cli/squash_images.c": "docs/squash-images.1",
    "daemon/reader/main.c": "docs/squash-reader.8",
    "contrib/squash-pack": "docs/squash-pack.1",
}
# Described in every usage text, not in a man page item of its own.
IMPLIED = {"help"}

LONG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")


def read(rel):
    with open(os.path.join(TOP, rel), encoding="utf-8") as f:
        return f.read()


def code_options(rel):
    text = read(rel)
    if rel.endswith(".c"):
        table = re.findall(r'\{\s*"([a-z][a-z0-9-]*)"\s*,\s*(?:no|required|optional)_argument', text)
        literal = re.findall(r'strcmp\([^;]*?"--([a-z][a-z0-9-]*)"\)', text)
        return set(table) | set(literal)
    # a shell script's case arms: "-f | --force)", "--target=*)"
    return set(re.findall(r"^\s*(?:-\w \| )?--([a-z][a-z0-9-]*)(?:=\*)?\)", text, re.M))


def man_text(rel):
    """The page with roff's escaped hyphens and font changes undone."""
    text = read(rel).replace("\\-", "-")
    return re.sub(r"\\f[BIRP]", "", text)


def man_items(text):
    """Long options named in the tag line of an item (.TP, the next line)."""
    lines = text.splitlines()
    found = set()
    for i, line in enumerate(lines[:-1]):
        if line.startswith(".TP"):
            tag = lines[i + 1]
            if tag.startswith(".BI"):  # .BI --opt " ARG": the argument is not an option
                tag = tag.split('"')[0]
            found |= set(LONG.findall(tag))
    return found


def main():
    problems = []
    for src, man in PROGRAMS.items():
        opts = code_options(src)
        if not opts:
            problems.append(f"{src}: no options found (has the way it parses them changed?)")
            continue
        text = man_text(man)
        named = set(LONG.findall(text))
        for o in sorted(opts - named - IMPLIED):
            problems.append(f"{man}: does not describe --{o}, which {src} parses")
        for o in sorted(man_items(text) - opts):
            problems.append(f"{man}: describes --{o} in an item, but {src} parses no such option")
    for p in problems:
        print(p)
    print(f"test_man_pages_name_every_option: {len(PROGRAMS)} programs, {len(problems)} mismatches")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
