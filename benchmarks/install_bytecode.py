#!/usr/bin/env python3
"""Write the bytecode an ordinary install leaves: the standard library's and every installed
package's modules compiled into sys.pycache_prefix (PYTHONPYCACHEPREFIX), before a timed cold run.

Why: a Python install compiles its standard library, and `pip install` compiles every package it
installs (its default), so a user's first run of the tool loads torch, transformers and FlashInfer
compiled. The H200 machine's image sets PYTHONDONTWRITEBYTECODE=1 over packages that hold no
bytecode; the evidence recipes then write bytecode under their workdir (evidence/bytecode.sh), and
with PYTHONPYCACHEPREFIX set Python reads bytecode only from there, so the first process of a cold
run compiled the standard library and every package it imports, a cost no installed machine has
(README step 4 cold: plan 28.3 s, 16.2 s on a machine before; a worker's start 6.4 s of compiling,
examples/h200/sweep_speed/llama_b98c107/). This compiles what the install would have, and nothing
the tool builds or keeps: the project's own modules (an editable install compiles none), the
driver checkout, FlashInfer's, Triton's and the CUDA driver's JIT caches and the tool's caches are
left as they are, so a cold run still pays for all of those.

Usage (a recipe's clean step, with the prefix already set): python3 benchmarks/install_bytecode.py
Prints one line: the folders, the files compiled and the seconds; with no prefix set, that the
packages keep their own bytecode (nothing to do). Exits 0 (a source that does not compile is left
uncompiled, as an install leaves it).
"""

from __future__ import annotations

import argparse
import compileall
import os
import site
import sys
import sysconfig
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _inside(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder + os.sep)


#: The project's own sources, under its root: an editable install compiles none of them.
OWN_SOURCES = ("scripts", "benchmarks", "tests")


def installed_folders(project: str = ROOT) -> list[str]:
    """The folders an install compiles: the standard library and every site folder on this
    interpreter's path (PYTHONPATH's too: carried wheels), once each; not the project's root or
    its own sources (OWN_SOURCES; a virtual environment inside it is an install like any other)."""
    paths = sysconfig.get_paths()
    found = [paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"], *site.getsitepackages(),
             *sys.path]
    folders: list[str] = []
    for folder in found:
        if not folder or not os.path.isdir(folder):
            continue
        real = os.path.realpath(folder)
        if real == os.path.realpath(project) or any(_inside(real, os.path.join(project, d)) for d in OWN_SOURCES):
            continue
        # a folder inside one already listed is compiled with it (the stdlib holds site-packages)
        if any(_inside(real, f) for f in folders):
            continue
        folders = [f for f in folders if not _inside(f, real)] + [real]
    return sorted(folders)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--project", default=ROOT, help="left out: the tool's own checkout (default: this one)")
    args = ap.parse_args(argv)
    if not sys.pycache_prefix:
        print("bytecode: no PYTHONPYCACHEPREFIX; the installed packages keep their own")
        return 0
    started = time.monotonic()
    folders = installed_folders(args.project)
    before = sum(len(files) for _, _, files in os.walk(sys.pycache_prefix))
    # An install meets the same sources that do not compile (the standard library's test data
    # holds deliberate syntax errors, which its own installer skips) and leaves them: so does this.
    # (compileall's workers may be started by a fork server: they read the filter from the environment)
    warnings.simplefilter("ignore")
    os.environ["PYTHONWARNINGS"] = "ignore"
    ok = all([compileall.compile_dir(f, quiet=2, workers=0) for f in folders])
    after = sum(len(files) for _, _, files in os.walk(sys.pycache_prefix))
    print(f"bytecode: {after - before} files compiled into {sys.pycache_prefix} from {len(folders)} folders "
          f"({', '.join(folders)}) in {time.monotonic() - started:.1f} s, as an install leaves them; "
          "not part of any timed run" + ("" if ok else " (some sources do not compile, as in any install)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
