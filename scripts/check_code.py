#!/usr/bin/env python3
"""Code-shape checks run by CI (scripts/check-code.sh): no source file over
500 lines and no function over 100 lines, outside the GPU code (the caller
leaves it out). Test files may hold longer functions: a catalogue of cases
is data, one row per line.

Functions are found by brace depth at namespace level in .cc files (strings,
character literals and comments stripped first): a "{" at depth 0 whose
preceding declaration has a parameter list and is not a namespace, class,
struct, enum or union. Usage: check_code.py FILE..."""

import re
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 100

_STRIP = re.compile(r'R"(?P<d>[^(]*)\((?:.|\n)*?\)(?P=d)"|"(?:\\.|[^"\\\n])*"|'
                    r"'(?:\\.|[^'\\\n])*'|//[^\n]*|/\*(?:.|\n)*?\*/")
_NOT_FUNCTION = re.compile(r"^\s*(namespace|class|struct|enum|union|extern)\b|=\s*$")


def _blank(match):
    # Keep the newlines so that line numbers stay right.
    return re.sub(r"[^\n]", " ", match.group(0))


def long_functions(path, text):
    code = _STRIP.sub(_blank, text)
    code = re.sub(r"(?m)^[ \t]*#[^\n]*", _blank, code)  # preprocessor lines
    stack = []     # per open brace: "namespace", "function" or "other"
    decl = []      # text since the last ; { or } at namespace level
    start = None   # (line, head) of the function being read
    line = 1
    problems = []
    for ch in code:
        if ch == "\n":
            line += 1
        at_namespace_level = all(kind == "namespace" for kind in stack)
        if ch == "{":
            if at_namespace_level:
                head = " ".join("".join(decl).split())
                if re.match(r"^(namespace|extern)\b", head):
                    stack.append("namespace")
                elif "(" in head and not _NOT_FUNCTION.search(head):
                    stack.append("function")
                    start = (line, head)
                else:
                    stack.append("other")
                decl = []
            else:
                stack.append("other")
        elif ch == "}":
            kind = stack.pop() if stack else "other"
            if kind == "function" and start is not None:
                length = line - start[0] + 1
                if length > MAX_FUNCTION_LINES:
                    problems.append(f"{path}:{start[0]}: a function of {length} lines "
                                    f"(at most {MAX_FUNCTION_LINES}): {start[1][:70]}")
                start = None
            if all(k == "namespace" for k in stack):
                decl = []
        elif at_namespace_level:
            if ch == ";":
                decl = []
            else:
                decl.append(ch)
    return problems


def main(paths):
    problems = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        lines = text.count("\n")
        if lines > MAX_FILE_LINES:
            problems.append(f"{path}: {lines} lines (at most {MAX_FILE_LINES}); split it by concern")
        if path.endswith(".cc") and not path.startswith("tests/"):
            problems.extend(long_functions(path, text))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
