#!/usr/bin/env python3
"""Code-shape checks run by CI (scripts/check-code.sh), outside the GPU code
(the caller leaves it out):

- no source file over 500 lines of code (comment and blank lines are not
  counted, so that shortening comments is never the way under the limit);
- no function over 100 lines, in .cc files and headers alike, member
  functions defined inside a class body included (test files may hold
  longer functions: a catalogue of cases is data, one row per line);
- no class or struct body over 500 lines.

Anything past 90% of a limit is printed as a warning (it does not fail), so a
split can be planned before it is forced.

Functions are found by brace depth (strings, character literals and comments
stripped first): a "{" at namespace or class level whose preceding
declaration has a parameter list and is not a namespace, class, struct, enum,
union or a control statement. Usage: check_code.py FILE..."""

import re
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 100
MAX_CLASS_LINES = 500
WARN_AT = 0.9

_STRIP = re.compile(r'R"(?P<d>[^(]*)\((?:.|\n)*?\)(?P=d)"|"(?:\\.|[^"\\\n])*"|'
                    r"'(?:\\.|[^'\\\n])*'|//[^\n]*|/\*(?:.|\n)*?\*/")
_NOT_FUNCTION = re.compile(r"^\s*(namespace|class|struct|enum|union|extern)\b|=\s*$")
_CLASS = re.compile(r"^(?:template\s*<.*>\s*)?(class|struct|union)\s+(\w+)")
_CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else)\b")


def _blank(match):
    # Keep the newlines so that line numbers stay right.
    return re.sub(r"[^\n]", " ", match.group(0))


def code_only(text):
    """`text` with comments, strings and preprocessor lines blanked."""
    code = _STRIP.sub(_blank, text)
    return re.sub(r"(?m)^[ \t]*#[^\n]*", _blank, code)


def code_lines(path, text):
    """Lines that hold code: not blank, not only a comment."""
    if not path.endswith((".cc", ".h")):
        return sum(1 for line in text.split("\n") if line.strip()
                   and not line.strip().startswith(("#", "//")))
    stripped = _STRIP.sub(lambda m: _blank(m) if m.group(0).startswith("/") else m.group(0), text)
    return sum(1 for line in stripped.split("\n") if line.strip())


def scopes(path, text):
    """(kind, first line, last line, head) of every function and class body
    at namespace or class level."""
    code = code_only(text)
    stack = []     # per open brace: (kind, line, head); kind namespace/class/function/other
    decl = []      # text since the last ; { or } at namespace or class level
    line = 1
    found = []
    for ch in code:
        if ch == "\n":
            line += 1
        open_level = all(kind in ("namespace", "class") for kind, _, _ in stack)
        if ch == "{":
            head = " ".join("".join(decl).split())
            if not open_level:
                stack.append(("other", line, head))
            elif re.match(r"^(namespace|extern)\b", head):
                stack.append(("namespace", line, head))
            elif _CLASS.match(re.sub(r"^(public|private|protected):\s*", "", head)) and \
                    "(" not in head.split(":")[0]:
                stack.append(("class", line, head))
            elif "(" in head and not _NOT_FUNCTION.search(head) and not _CONTROL.match(head):
                stack.append(("function", line, head))
            else:
                stack.append(("other", line, head))
            decl = []
        elif ch == "}":
            kind, start, head = stack.pop() if stack else ("other", line, "")
            if kind in ("function", "class"):
                found.append((kind, start, line, head))
            if all(k in ("namespace", "class") for k, _, _ in stack):
                decl = []
        elif open_level:
            if ch == ";" or (ch == ":" and re.search(r"\b(public|private|protected)\s*$",
                                                     "".join(decl))):
                decl = []
            else:
                decl.append(ch)
    return found


def check(path, text, problems, warnings):
    def over(limit, value, message):
        if value > limit:
            problems.append(message)
        elif value > WARN_AT * limit:
            warnings.append(message.replace("(at most", "(near the limit of"))

    lines = code_lines(path, text)
    over(MAX_FILE_LINES, lines,
         f"{path}: {lines} lines of code (at most {MAX_FILE_LINES}); split it by concern")
    if not path.endswith((".cc", ".h")):
        return
    for kind, start, end, head in scopes(path, text):
        length = end - start + 1
        if kind == "function" and not path.startswith("tests/"):
            over(MAX_FUNCTION_LINES, length,
                 f"{path}:{start}: a function of {length} lines (at most "
                 f"{MAX_FUNCTION_LINES}): {head[:70]}")
        elif kind == "class":
            over(MAX_CLASS_LINES, length,
                 f"{path}:{start}: a class body of {length} lines (at most {MAX_CLASS_LINES}): "
                 f"{head[:70]}")


def main(paths):
    problems, warnings = [], []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            check(path, f.read(), problems, warnings)
    for w in warnings:
        print(f"warning: {w}")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
