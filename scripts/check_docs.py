#!/usr/bin/env python3
"""Documentation checks run by CI (scripts/check-code.sh).

1. Every relative link in README.md and docs/*.md points at a file that
   exists, and an anchor (#section) at a heading of that file.
2. Every command the README shows ("$ " lines in its code blocks) runs and
   exits 0 on this build, except those that need a server (--server,
   vtrain-server) or a GPU (marked "# needs a GPU"), which are listed.
   Commands run in a scratch directory that sees build/ and data/ like the
   repository root does, and nothing beside it (no ../shared): a clone must
   work on its own. `vtrainctl` is build/client/vtrainctl.

Usage: check_docs.py REPO_ROOT [--links-only]"""

import os
import re
import subprocess
import sys
import tempfile

LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.M)
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
SKIP = (("--server", "needs a server"), ("vtrain-server", "needs a server"),
        ("# needs a GPU", "needs a GPU"))


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def check_links(root, files):
    problems = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        # Links inside code blocks are examples, not links.
        prose = FENCE.sub("", text)
        for target in LINK.findall(prose):
            if re.match(r"^[a-z]+:", target) or target.startswith("#") and False:
                continue
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(dest):
                problems.append(f"{os.path.relpath(path, root)}: link to missing {target}")
                continue
            if anchor and dest.endswith(".md"):
                with open(dest, encoding="utf-8") as f:
                    anchors = {slug(h) for h in HEADING.findall(FENCE.sub("", f.read()))}
                if anchor not in anchors:
                    problems.append(f"{os.path.relpath(path, root)}: no heading for {target}")
    return problems


def readme_commands(readme):
    """The README's "$ " commands, continuation lines joined, in order."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    commands = []
    for block in FENCE.findall(text):
        lines = block.split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if not line.startswith("$ "):
                continue
            command = line[2:]
            while command.rstrip().endswith("\\") and i < len(lines):
                command = command.rstrip()[:-1] + " " + lines[i].strip()
                i += 1
            commands.append(command.strip())
    return commands


def run_commands(root, commands):
    problems, skipped, ran = [], [], 0
    with tempfile.TemporaryDirectory() as scratch:
        # scratch/repo sees build/ and data/ and nothing else of the machine.
        work = os.path.join(scratch, "repo")
        os.mkdir(work)
        for tree in ("build", "data"):
            os.symlink(os.path.join(root, tree), os.path.join(work, tree))
        env = dict(os.environ)
        variables = ""
        for command in commands:
            reason = next((why for mark, why in SKIP if mark in command), None)
            if reason:
                skipped.append(f"  ({reason}) {command}")
                continue
            if re.match(r"^[A-Z_]+=\S+$", command):
                variables += command + "\n"
                continue
            script = ("set -eo pipefail\n"
                      f"vtrainctl() {{ {root}/build/client/vtrainctl \"$@\"; }}\n"
                      + variables + command + "\n")
            result = subprocess.run(["bash", "-c", script], cwd=work, env=env,
                                    capture_output=True, text=True, timeout=900)
            ran += 1
            if result.returncode != 0:
                problems.append(f"README command exited {result.returncode}: {command}\n"
                                f"    {result.stderr.strip()[-500:]}")
    return problems, skipped, ran


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else ".")
    docs = [os.path.join(root, "README.md")] + sorted(
        os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs"))
        if f.endswith(".md"))
    problems = check_links(root, docs)
    if "--links-only" not in argv:
        more, skipped, ran = run_commands(root, readme_commands(os.path.join(root, "README.md")))
        problems += more
        print(f"check_docs: ran {ran} README commands; not run here:")
        print("\n".join(skipped))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
