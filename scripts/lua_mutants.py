#!/usr/bin/env python3
"""Mutation testing of the Redis engine's Lua scripts, which cargo-mutants cannot reach.

    scripts/lua_mutants.py [--file lua/common.lua ...] [--function NAME ...] [--list]
                           [--threshold PERCENT] [--timeout SECONDS]

Flips one operator at a time in crates/breakerbox-redis/lua/*.lua (a comparison: == ~= <
<= > >=, to its negation or its boundary twin; a boolean operator: and <-> or; a `not`
dropped) and runs the Redis engine's differential property test and script tests against
real redis-server processes (the tests start their own). A mutant is caught when a test
fails. The scripts are compiled into the crate (include_str!), so every mutant is built:
the mutation happens in a scratch copy of the workspace (target/lua-mutants/tree), never
in the worktree, and the copy's file is put back after each mutant whatever happens.

--function limits the mutants to the bodies of the named Lua functions (`local function
NAME`, up to the next top-level `end`); --list prints the mutants without running them.
Prints the score and the survivors; exits non-zero below --threshold (default 100).
Results go to target/lua-mutants/results.json.
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
LUA = pathlib.Path("crates/breakerbox-redis/lua")
WORK = ROOT / "target" / "lua-mutants"
TREE = WORK / "tree"
TESTS = ["--test", "differential", "--test", "scripts"]

# Operator -> replacements. Longest operators first so `<=` is not read as `<`.
FLIPS = [
    ("==", ["~="]),
    ("~=", ["=="]),
    ("<=", ["<", ">"]),
    (">=", [">", "<"]),
    ("<", ["<=", ">="]),
    (">", [">=", "<="]),
]
WORDS = [("and", "or"), ("or", "and")]


def code_spans(line):
    """The parts of `line` that are code: not in a string literal, not after `--`."""
    spans, start, i, quote = [], 0, 0, None
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
                start = i + 1
        elif c in "'\"":
            spans.append((start, i))
            quote = c
        elif line.startswith("--", i):
            spans.append((start, i))
            return spans
        i += 1
    if not quote:
        spans.append((start, len(line)))
    return spans


def function_of(lines):
    """For each line, the name of the top-level `local function` it belongs to, if any."""
    names, current = [], None
    for line in lines:
        m = re.match(r"local function (\w+)", line)
        if m:
            current = m.group(1)
        names.append(current)
        if line.rstrip() == "end":
            current = None
    return names


def mutants_of(path):
    text = (ROOT / path).read_text()
    lines = text.split("\n")
    owners = function_of(lines)
    found = []
    for n, line in enumerate(lines):
        for a, b in code_spans(line):
            segment = line[a:b]
            taken = set()
            for op, replacements in FLIPS:
                for m in re.finditer(re.escape(op), segment):
                    col = a + m.start()
                    if any(col in range(t, t + 2) for t in taken):
                        continue
                    # `<=`/`>=`/`==`/`~=` claim both their characters; skip `<`/`>` inside.
                    if op in ("<", ">") and segment[m.start() + 1 : m.start() + 2] == "=":
                        continue
                    if op == "==" and m.start() > 0 and segment[m.start() - 1] in "<>~=":
                        continue
                    taken.add(col)
                    for r in replacements:
                        found.append((n, col, op, r))
            for word, r in WORDS:
                for m in re.finditer(r"\b%s\b" % word, segment):
                    found.append((n, a + m.start(), word, r))
            for m in re.finditer(r"\bnot\s+", segment):
                found.append((n, a + m.start(), segment[m.start() : m.end()], ""))
    out = []
    for n, col, op, r in sorted(found):
        mutated = lines[n][:col] + r + lines[n][col + len(op) :]
        out.append(
            {
                "file": str(path),
                "line": n + 1,
                "function": owners[n],
                "from": op.strip(),
                "to": r or "(dropped)",
                "text": mutated,
                "original": lines[n],
            }
        )
    return out


def scratch_tree():
    """A copy of the workspace's tracked files, refreshed from the worktree."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.split(b"\0")
    for f in files:
        if not f:
            continue
        rel = pathlib.Path(f.decode())
        src, dst = ROOT / rel, TREE / rel
        if not src.is_file():
            continue
        if dst.is_file() and dst.read_bytes() == src.read_bytes():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def run_tests(timeout):
    env = dict(os.environ, CARGO_TARGET_DIR=str(WORK / "target"))
    env.setdefault("PROPTEST_MAX_SHRINK_ITERS", "0")
    cmd = ["nice", "-n", "19", "cargo", "test", "-p", "breakerbox-redis", *TESTS]
    start = time.monotonic()
    try:
        p = subprocess.run(
            cmd, cwd=TREE, env=env, capture_output=True, timeout=timeout, text=True
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, ""
    log = p.stdout + p.stderr
    if p.returncode == 0:
        return "missed", time.monotonic() - start, log
    if "error[E" in log or "could not compile" in log:
        return "unviable", time.monotonic() - start, log
    return "caught", time.monotonic() - start, log


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", action="append", help="a script, e.g. lua/record.lua")
    ap.add_argument("--function", action="append", help="only inside this Lua function")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--threshold", type=float, default=100.0)
    ap.add_argument("--timeout", type=float, default=900.0)
    args = ap.parse_args()

    paths = (
        [LUA / pathlib.Path(f).name for f in args.file]
        if args.file
        else sorted(p.relative_to(ROOT) for p in (ROOT / LUA).glob("*.lua"))
    )
    mutants = [m for p in paths for m in mutants_of(p)]
    if args.function:
        mutants = [m for m in mutants if m["function"] in args.function]
    if args.list:
        for m in mutants:
            print(f'{m["file"]}:{m["line"]}: {m["from"]} -> {m["to"]} in {m["function"]}: {m["text"].strip()}')
        print(f"{len(mutants)} mutants")
        return 0

    WORK.mkdir(parents=True, exist_ok=True)
    scratch_tree()
    print(f"== baseline: {' '.join(TESTS)} on the unmutated scripts", flush=True)
    outcome, secs, log = run_tests(args.timeout)
    if outcome != "missed":
        lines = log.splitlines()
        at = next((i for i, l in enumerate(lines) if "panicked at" in l), max(0, len(lines) - 60))
        print("\n".join(lines[at : at + 60]))
        print(f"the unmutated tests do not pass ({outcome})", file=sys.stderr)
        return 2
    print(f"ok in {secs:.0f}s; {len(mutants)} mutants", flush=True)

    results = []
    for i, m in enumerate(mutants, 1):
        target = TREE / m["file"]
        original = target.read_text()
        lines = original.split("\n")
        assert lines[m["line"] - 1] == m["original"]
        lines[m["line"] - 1] = m["text"]
        try:
            target.write_text("\n".join(lines))
            outcome, secs, _ = run_tests(args.timeout)
        finally:
            target.write_text(original)
        results.append(dict(m, outcome=outcome, seconds=round(secs)))
        print(
            f'{outcome.upper():8} [{i}/{len(mutants)}] {m["file"]}:{m["line"]}: '
            f'{m["from"]} -> {m["to"]} in {m["function"]} ({secs:.0f}s)',
            flush=True,
        )
        (WORK / "results.json").write_text(json.dumps(results, indent=1))

    counts = {k: sum(r["outcome"] == k for r in results) for k in ("caught", "missed", "unviable", "timeout")}
    viable = counts["caught"] + counts["missed"] + counts["timeout"]
    score = 100.0 * (counts["caught"] + counts["timeout"]) / viable if viable else 100.0
    print()
    print(f"{len(results)} mutants: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    print(f"score: {score:.1f} % of {viable} viable mutants caught (threshold {args.threshold:g} %)")
    for r in results:
        if r["outcome"] == "missed":
            print(f'MISSED   {r["file"]}:{r["line"]}: {r["from"]} -> {r["to"]} in {r["function"]}: {r["text"].strip()}')
    return 0 if score >= args.threshold else 1


if __name__ == "__main__":
    sys.exit(main())
