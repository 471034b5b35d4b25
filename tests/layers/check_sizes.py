#!/usr/bin/env python3
"""Size limits of the C++/CUDA sources (docs/building.md#size-limits): no file over 600 lines, no function
body over 80 lines. Usage:

    check_sizes.py [--exceptions FILE] PATH...

PATHs are source files (.cpp .cc .h .cu .cuh; others are ignored). Prints one line per violation,
`path: N lines (limit 600)` or `path:LINE: function NAME: N lines (limit 80)`, and exits 1 when there is
one that FILE does not excuse. FILE lists excused paths, one `path  reason` per line (lines starting with # are comments).

A function is a brace block opened at namespace or class scope after a parameter list: free functions,
member functions defined in or out of their class, constructors with initializer lists, and the bodies of
macros such as TEST(...). Its length is the number of lines between its braces. Comments, string and
character literals (raw strings included) and preprocessor lines are blanked first, so braces in them do
not count. Lambdas and local classes count toward the function around them.
"""
import re
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
SOURCE_SUFFIXES = (".cpp", ".cc", ".h", ".cu", ".cuh")


def blank_non_code(text):
    """Comments, literals and preprocessor lines replaced by spaces, newlines kept (line numbers hold)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":  # a directive, with its backslash continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "\n":
            line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        raw = re.match(r'(?:u8|u|U|L)?R"([^ ()\\\t\n]{0,16})\(', text[i:i + 24])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + raw.group(1) + '"', i + raw.end())
            end = n if end < 0 else end + len(raw.group(1)) + 2
            out.append('"' + re.sub(r"[^\n]", " ", text[i + 1:end - 1]) + '"')
            i = end
            continue
        # ' after a digit is a digit separator (1'000), not a character literal
        if c == '"' or (c == "'" and not _in_number(text, i)):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _in_number(text, i):
    """True when the ' at i follows a numeric literal (walks back over its digits to a non-identifier)."""
    j = i - 1
    while j >= 0 and (text[j].isalnum() or text[j] in "'_."):
        j -= 1
    return text[j + 1].isdigit()


# A function body's opening brace follows its parameter list, maybe qualifiers and a trailing return type.
QUALIFIERS = r"(?:\s*(?:const|volatile|noexcept(?:\s*\([^()]*\))?|override|final|mutable|&&|&|throw\s*\(\s*\)))*"
FUNCTION_HEAD = re.compile(r"\)" + QUALIFIERS + r"(?:\s*->\s*[\w:<>,\s*&]+)?\s*$")
CONSTRUCTOR_INIT = re.compile(r"\)" + QUALIFIERS + r"\s*:(?!:)")
CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof", "static_assert"}
SCOPE_HEAD = re.compile(r"\b(?:namespace|class|struct|union)\b[^()]*$|\bextern\s*\"\s*\"\s*$")


def function_name(head):
    """NAME of `... NAME(args) qualifiers`; a macro (all capitals) keeps its arguments, e.g. TEST(A, B)."""
    depth, close = 0, head.rfind(")")
    for k in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(head[k], 0)
        if depth == 0:
            m = re.search(r"((?:[\w~]+\s*::\s*)*(?:operator\s*\S+?|~?\w+))\s*(?:<[^()]*>)?\s*$", head[:k])
            if not m:
                return None
            name = re.sub(r"\s+", "", m.group(1))
            if name in CONTROL:
                return None
            if re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", name):
                name += "(" + re.sub(r"\s+", " ", head[k + 1:close]).strip() + ")"
            return name
    return None


def find_functions(code):
    """(name, line of the opening brace, lines between the braces) of each function in blanked code."""
    found = []
    scopes = []  # per open brace: "scope" (namespace/class), "function" or "other" (initializer, enum...)
    head_start = 0  # where the declaration before the next brace at scope level begins
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        inside_function = any(s != "scope" for s in scopes)
        if c in ";" and not inside_function:
            head_start = i + 1
        elif c == "{":
            if inside_function:
                scopes.append("other")
            else:
                head = code[head_start:i]
                init = CONSTRUCTOR_INIT.search(head)
                before = head.rstrip()
                if init and before and (before[-1].isalnum() or before[-1] in "_>"):
                    # a member initialized with braces, x_{...}, inside a constructor's initializer list
                    i = _skip_braces(code, i)
                    continue
                if FUNCTION_HEAD.search(head) or (init and before.endswith(("}", ")"))):
                    name = function_name(head[:init.start() + 1] if init else head)
                    if name:
                        scopes.append(("function", name, code.count("\n", 0, i) + 1))
                        i += 1
                        continue
                scopes.append("scope" if SCOPE_HEAD.search(head) or not head.strip() else "other")
                head_start = i + 1
        elif c == "}" and scopes:
            top = scopes.pop()
            if isinstance(top, tuple):
                _, name, line = top
                found.append((name, line, code.count("\n", 0, i) + 1 - line - 1))
            if not any(s != "scope" for s in scopes):
                head_start = i + 1
        i += 1
    return found


def _skip_braces(code, i):
    depth = 0
    while i < len(code):
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        i += 1
        if depth == 0:
            break
    return i


def read_exceptions(path):
    excused = {}
    if not path:
        return excused
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if line and not line.startswith("#"):
                parts = line.split(None, 1)
                if len(parts) < 2:
                    sys.exit(f"check_sizes: {path}: '{line}' has no reason; write `path  reason`")
                excused[parts[0]] = parts[1]
    return excused


def main(argv):
    exceptions = None
    if len(argv) >= 2 and argv[0] == "--exceptions":
        exceptions, argv = argv[1], argv[2:]
    excused = read_exceptions(exceptions)
    failed = False
    still_needed = set()
    for path in argv:
        if not path.endswith(SOURCE_SUFFIXES):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        problems = []
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > MAX_FILE_LINES:
            problems.append(f"{path}: {lines} lines (limit {MAX_FILE_LINES})")
        for name, line, length in find_functions(blank_non_code(text)):
            if length > MAX_FUNCTION_LINES:
                problems.append(f"{path}:{line}: function {name}: {length} lines (limit {MAX_FUNCTION_LINES})")
        for p in problems:
            if path in excused:
                still_needed.add(path)
                print(f"excused ({excused[path]}): {p}")
            else:
                print(p, file=sys.stderr)
                failed = True
    unused = [p for p in excused if p not in still_needed]
    for p in unused:
        print(f"check_sizes: {exceptions} excuses {p}, which is within the limits or not checked; remove the line",
              file=sys.stderr)
    if failed:
        print(f"check_sizes: split the files and functions above (limits: {MAX_FILE_LINES} lines a file, "
              f"{MAX_FUNCTION_LINES} a function body)", file=sys.stderr)
    return 1 if failed or unused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
