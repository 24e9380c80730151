#!/usr/bin/env python3
"""The plugin's layout (docs/architecture.md, "The plugin's layout"), as
test_daemon_layout.py checks squashd's: every module of spank/ has a layer
and includes only its own layer and those below it, no include circle
exists, not even between a .c and another module's header, no source file
is longer than about 500 lines (the daemon's limit), and the SPANK entry
points are in spank_squash.c alone: it is the one place that dispatches on
the context each of them runs in. Run by make check; prints each
offence."""
import os
import re
import sys

from source_layout import INCLUDE, c_sources, include_circles, module_of, report, too_long

HERE = os.path.dirname(os.path.abspath(__file__))
SPANK = os.path.normpath(os.path.join(HERE, "..", "..", "spank"))

# Layers, top first: a module may include its own layer and those below.
LAYERS = [
    # The slurm_spank_* entry points, each dispatching on its context.
    ("entry", {"spank_squash"}),
    # What one context does: submission, prolog and epilog, a step in
    # slurmstepd, each task.
    ("contexts", {"submit_check", "env_default", "job_request", "step_images",
                  "step_setup", "task_hooks"}),
    # What they share about a job or a step.
    ("job and step", {"catalog_image", "job_array", "prolog_note", "step_failure", "task_env_export",
                      "env_option", "task_image_env"}),
    # Mount mechanics of a task's namespace: no settings, no step state.
    ("mounts", {"node_mounts", "mount_attach", "path_walk"}),
    ("settings", {"plugin_settings", "loaded_twice"}),
]
ENTRY = "spank_squash"

# A SPANK entry point declared or defined at file level, and the plugin's
# declaration (a call is indented, a comment starts with '/*' or ' *').
ENTRY_POINT = re.compile(r'^\w[\w \t*]*\bslurm_spank_\w+\s*\(|^SPANK_PLUGIN\s*\(', re.M)


def layer_of(module):
    for n, (_, modules) in enumerate(LAYERS):
        if module in modules:
            return n
    return None


def main():
    edges, problems = {}, []
    for rel, text in c_sources(SPANK):
        problems += too_long(rel, text)
        mod = module_of(rel)
        if layer_of(mod) is None:
            problems.append(f"{rel}: module {mod} has no layer "
                            "(add it to LAYERS in this script)")
            continue
        if mod != ENTRY:
            for m in ENTRY_POINT.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: a SPANK entry point outside "
                                f"{ENTRY}.c: {m.group(0).strip()}")
        for inc in INCLUDE.findall(text):
            if not os.path.exists(os.path.join(SPANK, inc)):
                continue  # proto/, generated or system headers
            dep = module_of(inc)
            if dep != mod:
                edges.setdefault(mod, set()).add(dep)
            if layer_of(dep) is not None and layer_of(dep) < layer_of(mod):
                problems.append(f"{rel}: includes {inc}, a layer above "
                                f"{LAYERS[layer_of(mod)][0]}")
    problems += include_circles(edges)
    return report(edges, problems)


if __name__ == "__main__":
    sys.exit(main())
