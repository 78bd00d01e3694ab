#!/usr/bin/env python3
"""The dependency rule of the tree (docs/architecture.md), checked on the sources.

  - Rooms (folders of src/) depend downwards only: a file may include a header of its own room or of a room
    ranked below it, never one above.
  - No include cycle inside a room: taking x.c and x.h as one module, the modules of a room that include each
    other's headers form no cycle (a header without a .c of its name declares an interface implemented
    elsewhere, and including it is no dependency on a module).
  - No getenv below src/cli/, but the detection of an MPI launcher in src/dist/dist_mpi.c: settings are
    passed in explicitly.
  - No command-line flag (--name) in a string literal below src/cli/: the library words its messages in API
    terms and the command line words them in flags.
  - A VM_KERNEL function (core/clones.h's target_clones) is static: Clang 16 links no call to an exported
    clone from another file.
  - src/cli/ stays a thin layer: under 2,500 lines, .c and .h together (four commands: train, plan, eval, curve;
    what is not flags, calls and printing belongs in the library).
  - python/src/ (the Python extension) is a client of the public header only: it includes "snug.h" and its
    own headers, never a header of src/ (what it lacks belongs in include/snug.h).
  - docs/architecture.md names every .c and .h file under src/: the map is the whole tree. The doc's tree (the
    code block under "## The tree") gives each room a section: a line that starts with src/<room>/ opens it, the
    indented lines below belong to it, and the next line that starts without a space closes it. A file
    src/<room>/<name> is named when a word of its room's section matches <name> as a shell pattern: the word
    itself ("trainer.c"), the x.[ch] form ("svg.[ch]": svg.c and svg.h), or a * form ("timeline*.[ch]",
    "conv3x3_winograd*.c"). Words are runs of letters, digits, '_' and '*' ending in .c, .h or .[ch].

usage: architecture.py SOURCE_DIR        exit status 0 when every rule holds, 1 with the offences listed
"""
import fnmatch
import os
import re
import sys

# Lowest first. A room may include rooms of a lower rank; rooms of one rank know nothing of each other.
RANKS = {
    "core": 0,
    "kernels": 1, "optim": 1, "data": 1, "dist": 1, "io": 1,
    "ops": 2, "report": 2,
    "graph": 3,
    "plan": 4,
    "exec": 5,
    "train": 6,
    "cli": 7,
}
CLI_LINES_MAX = 2500
GETENV_ALLOWED = {"src/dist/dist_mpi.c"}

DOC = os.path.join("docs", "architecture.md")
NAMED = re.compile(r'[A-Za-z0-9_*]+\.(?:\[ch\]|c|h)(?![A-Za-z0-9_])')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([A-Za-z0-9_]+)\.h"', re.M)
FLAG = re.compile(r'--[a-z][a-z0-9-]*')
EXPORTED_CLONE = re.compile(r'^\s*VM_KERNEL\s+(?!static\b)(.*)$', re.M)


def sources(src):
    for room in sorted(os.listdir(src)):
        folder = os.path.join(src, room)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if name.endswith((".c", ".h")):
                yield room, name, os.path.join(folder, name)


def doc_sections(top):
    """{room: [words naming files]} from the tree of docs/architecture.md (the rule in the docstring)."""
    text = open(os.path.join(top, DOC), encoding="utf-8").read()
    start = text.find("## The tree")
    block = text[start:].split("```")[1] if start >= 0 and text[start:].count("```") >= 2 else ""
    sections, room = {}, None
    for line in block.splitlines():
        opened = re.match(r'src/([a-z_]+)/', line)
        if opened:
            room = opened.group(1)
        elif line and not line[0].isspace():
            room = None
        if room:
            sections.setdefault(room, []).extend(NAMED.findall(line[len(opened.group(0)):] if opened else line))
    return sections


def unnamed_files(top):
    """The src/ files that docs/architecture.md does not name, as paths."""
    sections = doc_sections(top)
    return [f"src/{room}/{name}" for room, name, _ in sources(os.path.join(top, "src"))
            if not any(fnmatch.fnmatchcase(name, word) for word in sections.get(room, ()))]


def strip_comments(text):
    """The code without its comments, string literals kept (a '/*' inside a string is not a comment)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] in "\"'":
            quote, j = text[i], i + 1
            while j < n and text[j] != quote:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def string_literals(code):
    return re.findall(r'"((?:[^"\\\n]|\\.)*)"', code)


def find_cycle(graph):
    """A cycle of graph {node: set(node)} as a list, or None."""
    state, stack = {}, []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if state.get(w) is None:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if state.get(v) is None:
            found = visit(v)
            if found:
                return found
    return None


def python_private_includes(top):
    """The quoted includes of python/src/ that are neither snug.h nor its own headers, as messages."""
    folder = os.path.join(top, "python", "src")
    own = set(os.listdir(folder)) if os.path.isdir(folder) else set()
    problems = []
    for name in sorted(n for n in own if n.endswith((".c", ".h"))):
        text = open(os.path.join(folder, name), encoding="utf-8").read()
        for header in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            if header != "snug.h" and header not in own:
                problems.append(f"python/src/{name}: includes \"{header}\": the extension uses the public API "
                                "only (add what it lacks to include/snug.h)")
    return problems


def check(top):
    src = os.path.join(top, "src")
    problems, modules, cli_lines = [], {}, 0
    for room, name, path in sources(src):
        rel = os.path.relpath(path, top)
        text = open(path, encoding="utf-8").read()
        if room not in RANKS:
            problems.append(f"{rel}: room '{room}' has no rank in the dependency rule (tests/architecture.py)")
            continue
        if room == "cli":
            cli_lines += text.count("\n")
        module = name.rsplit(".", 1)[0]
        for other, header in INCLUDE.findall(text):
            if other not in RANKS:
                continue
            if other == room:
                if header != module:
                    modules.setdefault(room, {}).setdefault(module, set()).add(header)
            elif RANKS[other] >= RANKS[room]:
                problems.append(f"{rel}: includes {other}/{header}.h, a room that is not below {room}")
        code = strip_comments(text)
        if room != "cli" and "getenv" in code and rel not in GETENV_ALLOWED:
            problems.append(f"{rel}: reads the environment (getenv): pass the setting in; only src/cli/ reads it")
        for clone in EXPORTED_CLONE.finditer(code):
            problems.append(f"{rel}: VM_KERNEL {clone.group(1)[:50]}...: make the clone static and call it from a "
                            "plain function (core/clones.h)")
        if room != "cli":
            for literal in string_literals(code):
                flag = FLAG.search(literal)
                if flag:
                    problems.append(f"{rel}: the message \"{literal[:60]}...\" names the flag {flag.group(0)}: "
                                    "word it in API terms and let src/cli/ name flags")
    for room, graph in sorted(modules.items()):
        has_source = {n.rsplit(".", 1)[0] for r, n, _ in sources(src) if r == room and n.endswith(".c")}
        graph = {m: {h for h in deps if h in has_source} for m, deps in graph.items()}
        cycle = find_cycle(graph)
        if cycle:
            problems.append(f"src/{room}/: include cycle {' -> '.join(cycle)}")
    for path in unnamed_files(top):
        problems.append(f"{path}: not named in {DOC}'s tree: say there what it is (the map names every file)")
    problems += python_private_includes(top)
    if cli_lines >= CLI_LINES_MAX:
        problems.append(f"src/cli/: {cli_lines} lines, not under {CLI_LINES_MAX}: move what is not flags, calls "
                        "and printing into the library")
    return problems, cli_lines


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    problems, cli_lines = check(sys.argv[1])
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    print(f"ok: rooms depend downwards only, no include cycle in a room, no getenv or flag below src/cli/, "
          f"every VM_KERNEL static, python/src/ on snug.h alone, every file named in {DOC}, src/cli/ {cli_lines} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
