#!/usr/bin/env python3
"""squashd's settings and their documentation in step: every setting
config_set() in daemon/settings/settings.c accepts is described in
docs/squashd.conf.5 and shown in contrib/squashd.conf, each with the
default squashd really uses (tools/settings_defaults prints them, as
`squashctl status` would); the settings a reload applies (apply() in
daemon/settings/reload.c) are the ones squashd.conf(5), RELOADING, and
docs/admin.md, "Reloading settings", list, and no entry of squashd.conf(5)
says "at reload" of a setting that needs a restart, or the reverse.
Run by make check (from the build's tests/ directory); prints each
mismatch."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
SETTINGS_C = os.path.join(TOP, "daemon", "settings", "settings.c")
RELOAD_C = os.path.join(TOP, "daemon", "settings", "reload.c")
MAN = os.path.join(TOP, "docs", "squashd.conf.5")
SAMPLE = os.path.join(TOP, "contrib", "squashd.conf")
ADMIN = os.path.join(TOP, "docs", "admin.md")

KEY = re.compile(r'strcmp\(key, "([a-z_]+)"\)')
SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def function_body(text, name):
    """The body of the C function name (from its definition to the closing
    brace at the start of a line)."""
    m = re.search(r"^\w[^\n;]*\b" + name + r"\([^;{]*\)\s*\{(.*?)^\}", text, re.M | re.S)
    if not m:
        sys.exit(f"test_settings_docs: no function {name}() found")
    return m.group(1)


def accepted_settings():
    """{key: setter} of config_set(), in its order: the setter is the
    function its branch calls (set_size, set_uint, ...), or None; the
    numbers in a range come first, from the uint_settings table config_set
    looks up before its branches."""
    text = read(SETTINGS_C)
    table = re.search(r"uint_settings\[\] = \{(.*?)^\};", text, re.M | re.S)
    if not table:
        sys.exit("test_settings_docs: no uint_settings table found")
    keys = {k: "set_uint" for k in re.findall(r'\{ "([a-z_]+)", offsetof', table.group(1))}
    body = function_body(text, "config_set")
    pieces = KEY.split(body)  # text, key, text, key, ...
    for i in range(1, len(pieces), 2):
        setter = re.search(r"\breturn (\w+)\(", pieces[i + 1])
        keys[pieces[i]] = setter.group(1) if setter else None
    return keys


def reloadable_settings():
    return set(KEY.findall(function_body(read(RELOAD_C), "apply")))


def code_defaults():
    """{key: value} from tools/settings_defaults of this build."""
    candidates = [os.path.join(os.getcwd(), "tools", "settings_defaults")]
    if os.environ.get("SQUASH_BUILD_DIR"):
        candidates.append(os.path.join(os.environ["SQUASH_BUILD_DIR"], "tests", "tools",
                                       "settings_defaults"))
    candidates.append(os.path.join(TOP, "build", "tests", "tools", "settings_defaults"))
    for exe in candidates:
        if os.access(exe, os.X_OK):
            out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
            return dict(line.split("\t", 1) for line in out.splitlines())
    sys.exit("test_settings_docs: tools/settings_defaults not built (run from the build's tests/ "
             "directory, or set SQUASH_BUILD_DIR)")


def build_paths(defaults):
    """The path defaults the build chose (configure, the Makefiles): those
    written neither in config_defaults() nor in a #define of the sources.
    The documentation may show them with another directory."""
    literals = set(re.findall(r'"(/[^"%]*)"', function_body(read(SETTINGS_C), "config_defaults")))
    for folder in ("proto", "daemon"):
        for root, _, files in os.walk(os.path.join(TOP, folder)):
            for name in files:
                if name.endswith(".h"):
                    literals |= set(re.findall(r'^#define \w+ "(/[^"]*)"',
                                               read(os.path.join(root, name)), re.M))
    return {v for v in defaults.values() if v.startswith("/") and v not in literals}


# ---------------------------------------------------------------- roff to text

def roff_args(rest):
    """The arguments of a font macro line, quotes removed."""
    return [a[1:-1] if a.startswith('"') else a for a in re.findall(r'"[^"]*"|\S+', rest)]


def roff_text(lines):
    """Plain text of roff lines: font macros with their arguments joined
    (alternating fonts without a space, .B and .I with one), escapes
    replaced."""
    words = []
    glue = False
    for line in lines:
        m = re.match(r"^\.(B|I|BR|RB|IR|RI|BI|IB)(?:\s+(.*))?$", line)
        if m:
            args = roff_args(m.group(2) or "")
            text = (" " if m.group(1) in ("B", "I") else "").join(args)
        elif line.startswith("."):
            continue
        else:
            text = line
        joined = text.endswith("\\c")
        text = text[:-2] if joined else text
        if glue and words:
            words[-1] += text
        else:
            words.append(text)
        glue = joined
    text = " ".join(words)
    for esc, plain in (("\\-", "-"), ("\\(mu", "x"), ("\\(em", "-"), ("\\e", "\\"), ("\\&", "")):
        text = text.replace(esc, plain)
    return re.sub(r"\s+", " ", text).strip()


def man_sections(text):
    """{section name: [lines]} of a man page."""
    sections, name = {}, None
    for line in text.splitlines():
        if line.startswith(".SH "):
            name = line[4:].strip().strip('"')
            sections[name] = []
        elif name:
            sections[name].append(line)
    return sections


def man_entries(lines):
    """{key: plain text} of the .TP entries whose tag is `.B key`."""
    entries, key, body = {}, None, []
    for i, line in enumerate(lines):
        if line == ".TP" or line.startswith(".SH"):
            if key:
                entries[key] = roff_text(body)
            key, body = None, []
            tag = lines[i + 1] if i + 1 < len(lines) else ""
            m = re.match(r"^\.B\s+(\w+)$", tag)
            if line == ".TP" and m:
                key = m.group(1)
        elif key and line != f".B {key}" or (key and body):
            body.append(line)
    if key:
        entries[key] = roff_text(body)
    return entries


# ---------------------------------------------------------------- defaults compared

def as_bytes(text):
    m = re.match(r"^(\d+)([KMGT]?)$", text, re.I)
    return int(m.group(1)) * SIZE_UNITS[m.group(2).upper()] if m else None


def same_default(key, setter, code, shown, defaults, paths):
    """True when shown (the documented default: a value, or the words
    after "default:") stands for the code's default."""
    shown = shown.strip().rstrip(".,;)")
    if setter == "set_size" and as_bytes(shown.split()[0] if shown else "") is not None:
        return as_bytes(shown.split()[0]) == int(code)
    if code == "":
        # Nothing set: a library's or the system's default, said in words.
        return shown == "" or not re.match(r"^[0-9/]", shown)
    if re.match(re.escape(code) + r"(?![\w./-])", shown):
        return True
    first = re.split(r"[\s,;:)]", shown, maxsplit=1)[0]
    if first in defaults and first != key:
        return defaults[first] == code  # "default: base_dir"
    if code in paths:
        return os.path.basename(code) in shown  # "LIBEXECDIR/slurm-squash/squash-reader"
    return False


def documented_default(text):
    """The default an entry states: "VALUE (default)", or what follows
    "default" (a value) or "default:" (a value or words)."""
    m = re.search(r"(\S+) \(default\)", text)
    if m:
        return m.group(1)
    m = re.search(r"\bdefault:?\s+([^;]*)", text, re.I)
    return m.group(1) if m else None


def check_man(accepted, defaults, reloadable, paths, problems):
    sections = man_sections(read(MAN))
    entries = man_entries(sections.get("DESCRIPTION", []))
    for key in sorted(set(entries) - set(accepted)):
        problems.append(f"squashd.conf.5 describes '{key}', which squashd does not accept")
    for key, setter in accepted.items():
        text = entries.get(key)
        if text is None:
            problems.append(f"squashd.conf.5 has no entry for '{key}'")
            continue
        shown = documented_default(text)
        if shown is None:
            problems.append(f"squashd.conf.5, {key}: no default given (squashd's is '{defaults[key]}')")
        elif not same_default(key, setter, defaults[key], shown, defaults, paths):
            shown = shown if len(shown) < 60 else shown[:57] + "..."
            problems.append(f"squashd.conf.5, {key}: documented default '{shown}', "
                            f"squashd's is '{defaults[key]}'")
        says_reload = re.search(r"\b(at|by a|changed by a) reload\b", text, re.I)
        says_start = re.search(r"\bread at start\b|\bnext start\b|\bneeds a restart\b", text, re.I)
        if says_reload and key not in reloadable:
            problems.append(f"squashd.conf.5, {key}: says it changes at a reload, "
                            f"but reload.c does not apply it")
        if says_start and key in reloadable:
            problems.append(f"squashd.conf.5, {key}: says it is read at start, but a reload applies it")
    reloading = roff_text(sections.get("RELOADING", []))
    listed = reloading.split("Every other setting")[0]
    compare_lists("squashd.conf.5, RELOADING", mentioned(listed, accepted), reloadable, problems)


def mentioned(text, accepted):
    return {w for w in re.findall(r"[a-z_]+", text) if w in accepted}


def compare_lists(where, listed, reloadable, problems):
    for key in sorted(reloadable - listed):
        problems.append(f"{where} does not list '{key}', which a reload applies")
    for key in sorted(listed - reloadable):
        problems.append(f"{where} lists '{key}', which a reload does not apply")


def check_admin(accepted, reloadable, problems):
    m = re.search(r"^### Reloading settings\n(.*?)(?=^#)", read(ADMIN), re.M | re.S)
    if not m:
        problems.append("docs/admin.md has no section \"Reloading settings\"")
        return
    listed = m.group(1).split("Every other change")[0]
    names = {w for w in re.findall(r"`([a-z_]+)`", listed) if w in accepted}
    compare_lists("docs/admin.md, Reloading settings", names, reloadable, problems)


def check_sample(accepted, defaults, paths, problems):
    shown = {}
    for line in read(SAMPLE).splitlines():
        m = re.match(r"^#?([a-z_]+) = ?(.*)$", line)
        if m and m.group(1) in accepted:
            shown.setdefault(m.group(1), m.group(2).strip())
    for key, setter in accepted.items():
        if key not in shown:
            problems.append(f"contrib/squashd.conf does not show '{key}' (#{key} = {defaults[key]})")
        elif not same_default(key, setter, defaults[key], shown[key], defaults, paths) or \
                (shown[key] and not defaults[key]):
            problems.append(f"contrib/squashd.conf shows #{key} = {shown[key]}, "
                            f"squashd's default is '{defaults[key]}'")


def main():
    accepted = accepted_settings()
    reloadable = reloadable_settings()
    defaults = code_defaults()
    paths = build_paths(defaults)
    problems = []
    if len(accepted) < 20 or not reloadable:
        problems.append(f"found only {len(accepted)} settings in settings.c and "
                        f"{len(reloadable)} in reload.c: has their form changed?")
    for key in sorted(set(accepted) ^ set(defaults)):
        problems.append(f"'{key}' is {'accepted' if key in accepted else 'shown'} by squashd "
                        f"but not {'shown (settings_describe)' if key in accepted else 'accepted (config_set)'}")
    accepted = {k: v for k, v in accepted.items() if k in defaults}
    for key in sorted(reloadable - set(accepted)):
        problems.append(f"reload.c applies '{key}', which is not a setting")
    reloadable &= set(accepted)
    check_man(accepted, defaults, reloadable, paths, problems)
    check_admin(accepted, reloadable, problems)
    check_sample(accepted, defaults, paths, problems)
    for p in problems:
        print(p)
    print(f"{len(accepted)} settings, {len(reloadable)} applied by a reload: "
          f"{len(problems)} mismatch(es)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
