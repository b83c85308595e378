#!/usr/bin/env python3
"""Documentation checks run by CI (scripts/check-code.sh).

1. Every relative link in README.md and docs/*.md points at a file that
   exists, and an anchor (#section) at a heading of that file.
2. Every command README.md and docs/*.md show ("$ " lines in their code
   blocks) runs and exits 0 on this build (or 2, where the page shows its
   error), and every output line shown under it is printed, in order (lines
   may be left out: outputs are abridged; wall times are masked; "…" in a
   line stands for any text). A page's `vtrain-server ... &` is started in
   the background and its --server commands run against it; commands that
   need a server the page does not start, or a GPU (marked "# needs a GPU"),
   are listed instead.
   Commands run in a scratch directory that sees build/ and data/ like the
   repository root does, and nothing beside it (no sibling folder): a clone must
   work on its own. `vtrainctl` is build/client/vtrainctl.

With --update, a shown line the build no longer prints is replaced, in the
page, by the printed line that starts like it (the same label, or the same
first field of a table row); lines it cannot place are reported as before.
Read the diff: an update is a change of documented behaviour.

Usage: check_docs.py REPO_ROOT [--links-only | --update]"""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time

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


def page_commands(page):
    """The "$ " commands of a page's code blocks, continuation lines joined,
    in order, each with the output lines shown under it (up to the next
    command or the end of the block) and its line number."""
    with open(page, encoding="utf-8") as f:
        text = f.read()
    commands = []
    for block in FENCE.finditer(text):
        first_line = text.count("\n", 0, block.start(1)) + 1
        lines = block.group(1).split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if not line.startswith("$ "):
                continue
            number = first_line + i - 1
            command = line[2:]
            while command.rstrip().endswith("\\") and i < len(lines):
                command = command.rstrip()[:-1] + " " + lines[i].strip()
                i += 1
            shown = []
            shown_at = first_line + i  # the page's line number of shown[0]
            while i < len(lines) and not lines[i].startswith("$ "):
                shown.append(lines[i])
                i += 1
            commands.append((number, command.strip(), shown, shown_at))
    return commands


# Wall-clock figures in an output differ from run to run: "in 38.0 ms",
# "in 689 µs", "(12.3 s)". They are masked on both sides before comparing.
WALL = re.compile(r"\b(in|took|after) [0-9][0-9.,]* ?(ns|µs|us|ms|s|min)\b")
ELIDED = re.compile(r"^\s*(\.\.\.|…)\s*$")


def line_pattern(shown):
    """A shown output line as a regular expression: wall times masked, "…"
    inside a line standing for any text (an abridged hash or list)."""
    shown = WALL.sub(r"\1 <T>", shown.rstrip())
    parts = [re.escape(part) for part in shown.split("…")]
    return re.compile("^" + ".*".join(parts) + "$")


def compare_output(shown, out, err):
    """Every non-blank shown line, in order, must be a line of stdout (lines
    may be left out between them: outputs are abridged) or, failing that, of
    stderr (warnings). Returns the first shown line that is not, or None."""
    actual = [WALL.sub(r"\1 <T>", l.rstrip()) for l in out.split("\n")]
    errors = [WALL.sub(r"\1 <T>", l.rstrip()) for l in err.split("\n")]
    at = 0
    for line in shown:
        if not line.strip() or ELIDED.match(line):
            continue
        pattern = line_pattern(line)
        found = next((j for j in range(at, len(actual)) if pattern.match(actual[j])), None)
        if found is not None:
            at = found + 1
        elif not any(pattern.match(e) for e in errors):
            return line
    return None


def label(line):
    """What a shown line is recognised by: its text before the first digit
    (at least a word), or a table row's first field."""
    text = line.strip()
    m = re.match(r"^[^0-9]*", text)
    if m and len(m.group(0).strip()) >= 3:
        return m.group(0)
    return text.split()[0] + " " if text.split() else text


def updated_lines(shown, shown_at, out):
    """(page line number, new text) for each shown line the output no longer
    has, where a printed line with its label follows the previous match."""
    actual = out.split("\n")
    masked = [WALL.sub(r"\1 <T>", l.rstrip()) for l in actual]
    at, changes = 0, []
    for k, line in enumerate(shown):
        if not line.strip() or ELIDED.match(line):
            continue
        pattern = line_pattern(line)
        found = next((j for j in range(at, len(masked)) if pattern.match(masked[j])), None)
        if found is None:
            head = label(line)
            found = next((j for j in range(at, len(actual))
                          if actual[j].strip().startswith(head.strip())), None)
            if found is None:
                continue
            indent = line[:len(line) - len(line.lstrip())]
            new = actual[found].rstrip()
            if not new.startswith(indent):
                new = indent + new.lstrip()
            changes.append((shown_at + k, new))
        at = found + 1
    return changes


def apply_to(shown, shown_at, changes):
    """`shown` with the changes that fall on its lines."""
    out = list(shown)
    for number, text in changes:
        if shown_at <= number < shown_at + len(shown):
            out[number - shown_at] = text
    return out


def write_updates(updates):
    for page, changes in updates.items():
        with open(page, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for number, text in changes:
            lines[number - 1] = text
        with open(page, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"check_docs: updated {len(changes)} shown lines of {page}")


def run_commands(root, pages, updates=None):
    """Runs every page's commands in a scratch directory and compares what
    they print with what the page shows; with `updates` (a dict), collects
    the replacements of stale shown lines per page instead of failing on
    those it can place."""
    problems, skipped, ran = [], [], 0
    with tempfile.TemporaryDirectory() as scratch:
        # scratch/repo sees build/ and data/ and nothing else of the machine.
        work = os.path.join(scratch, "repo")
        os.mkdir(work)
        for tree in ("build", "data"):
            os.symlink(os.path.join(root, tree), os.path.join(work, tree))
        env = dict(os.environ)
        for page in pages:
            where_page = os.path.relpath(page, root)
            variables = ""
            servers = []
            for number, command, shown, shown_at in page_commands(page):
                where = f"{where_page}:{number}"
                if SERVER.match(command):
                    servers.append(start_server(root, work, command))
                    continue
                reason = next((why for mark, why in SKIP if mark in command), None)
                if reason and not (servers and reason == "needs a server"):
                    skipped.append(f"  ({reason}) {where}: {command}")
                    continue
                if re.match(r"^[A-Z_]+=\S+$", command):
                    variables += command + "\n"
                    continue
                if command == "scripts/quickstart.sh":
                    command = quickstart_prediction(root)
                script = ("set -eo pipefail\n"
                          f"vtrainctl() {{ {root}/build/client/vtrainctl \"$@\"; }}\n"
                          + variables + command + "\n")
                result = subprocess.run(["bash", "-c", script], cwd=work, env=env,
                                        capture_output=True, text=True, timeout=900)
                ran += 1
                if result.returncode != 0 and not shown_exit(shown, result):
                    problems.append(f"{where}: exited {result.returncode}: {command}\n"
                                    f"    {result.stderr.strip()[-500:]}")
                    continue
                differs = compare_output(shown, result.stdout, result.stderr)
                if differs is not None and updates is not None:
                    updates.setdefault(page, []).extend(
                        updated_lines(shown, shown_at, result.stdout))
                    differs = compare_output(
                        apply_to(shown, shown_at, updates[page]), result.stdout, result.stderr)
                if differs is not None:
                    head = differs.strip()[:12]
                    printed = next((l for l in (result.stdout + result.stderr).split("\n")
                                    if l.strip().startswith(head)), "(no line like it)")
                    problems.append(f"{where}: the page shows a line this build does not "
                                    f"print:\n    {command}\n    shown:   {differs.strip()}"
                                    f"\n    printed: {printed.strip()}")
            for server in servers:
                server.terminate()
                server.wait(timeout=30)
    return problems, skipped, ran


# A page that starts a server ("build/server/vtrain-server --listen H:P ... &")
# has its --server commands run against it; it is stopped at the page's end.
SERVER = re.compile(r"^build/server/vtrain-server .*--listen (?P<host>[\d.]+):(?P<port>\d+).*&$")


def start_server(root, work, command):
    """Starts the page's server in the scratch directory and waits (at most
    30 s) until it accepts connections."""
    m = SERVER.match(command)
    server = subprocess.Popen(["bash", "-c", "exec " + command.rstrip("& ")], cwd=work,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection((m["host"], int(m["port"])), timeout=1).close()
            return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"the page's server did not start: {command}")


def quickstart_prediction(root):
    """The prediction scripts/quickstart.sh ends with (its `exec` line), so
    that the README's quick-start output is checked without a second build."""
    with open(os.path.join(root, "scripts", "quickstart.sh"), encoding="utf-8") as f:
        text = f.read()
    command = text[text.index("\nexec ") + 6:].replace("\\\n", " ")
    return " ".join(command.replace('"$@"', "").split())


def shown_exit(shown, result):
    """A command that the page shows failing (its error on stderr) may exit
    non-zero: the error it shows is checked instead."""
    return result.returncode == 2 and any(
        l.strip() and line_pattern(l).match(e.rstrip())
        for l in shown for e in result.stderr.split("\n"))


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else ".")
    docs = [os.path.join(root, "README.md")] + sorted(
        os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs"))
        if f.endswith(".md"))
    problems = check_links(root, docs)
    if "--links-only" not in argv:
        updates = {} if "--update" in argv else None
        more, skipped, ran = run_commands(root, docs, updates)
        problems += more
        if updates:
            write_updates(updates)
        print(f"check_docs: ran {ran} commands of README.md and docs/, their shown output "
              f"compared; not run here:")
        print("\n".join(skipped))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
