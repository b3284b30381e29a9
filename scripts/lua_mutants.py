#!/usr/bin/env python3
"""Mutation testing of the Redis engine's Lua scripts, which cargo-mutants cannot reach.

    scripts/lua_mutants.py [--file lua/common.lua ...] [--function NAME ...] [--list]
                           [--test NAME ...] [--cases N] [--resume [--recheck]]
                           [--threshold PERCENT] [--timeout SECONDS]

Flips one operator at a time in crates/breakerbox-redis/lua/*.lua (a comparison: == ~= <
<= > >=, to its negation or its boundary twin; a boolean operator: and <-> or; a `not`
dropped) and runs the Redis engine's script tests and differential property test against
real redis-server processes (the tests start their own). A mutant is caught when a test
fails. A mutant whose tests do not finish in time (10 times the unmutated run, at least
60 s; then once more with three times that) is a timeout, which is not counted as caught:
the scripts have no loop a flip could make endless (no while or repeat loop: the runner
warns of one), so a timeout is a slow machine, not a failing test. On a timeout the test
binary's whole process group is killed, its redis-servers too.

The test binaries are built once, with breakerbox-redis's feature `lua-mutants`: they read
the scripts at run time from the directory BREAKERBOX_LUA_DIR names. The runner keeps a
copy of lua/*.lua in target/lua-mutants/lua, writes one mutant at a time there (never in
the worktree) and runs the binaries, the fast ones first, stopping at the first failure.
Before the mutants it checks that the unmutated copy passes and that a copy that cannot
load fails (so the binaries do read the directory).

--function limits the mutants to the bodies of the named Lua functions (`local function
NAME`, up to the next top-level `end`; `None` for a script's top level); --list prints the
mutants without running them. --test names the test binaries (default: scripts,
script_edges, script_values, script_arguments, script_quorum, record_many, differential);
--cases the differential test's cases (BB_DIFF_CASES, default 200; no shrinking).
--resume keeps what
target/lua-mutants/results.json caught and runs only the other mutants (after adding
tests), survivors first; with --recheck it also runs again the kills that an older runner
recorded without the binary and tests that caught them (`by`).
Prints the score and the survivors; exits non-zero below --threshold (default 100).
Results go to target/lua-mutants/results.json.
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
LUA = pathlib.Path("crates/breakerbox-redis/lua")
WORK = ROOT / "target" / "lua-mutants"
LUA_COPY = WORK / "lua"
CRATE = ROOT / "crates" / "breakerbox-redis"
TESTS = ["scripts", "script_edges", "script_values", "script_arguments", "script_quorum",
         "record_many", "differential"]

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


def build(tests):
    """Builds the test binaries once (feature lua-mutants); returns their paths, in order."""
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", str(ROOT / "target"))
    cmd = ["nice", "-n", "19", "cargo", "test", "-p", "breakerbox-redis",
           "--features", "lua-mutants", "--no-run", "--message-format", "json"]
    for t in tests:
        cmd += ["--test", t]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr[-4000:], file=sys.stderr)
        raise SystemExit("the test binaries do not build")
    found = {}
    for line in p.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            found[msg["target"]["name"]] = msg["executable"]
    return [(t, found[t]) for t in tests]


def copy_scripts():
    """A fresh copy of lua/*.lua, the unmutated scripts the mutants start from."""
    if LUA_COPY.exists():
        shutil.rmtree(LUA_COPY)
    LUA_COPY.mkdir(parents=True)
    for f in (ROOT / LUA).glob("*.lua"):
        shutil.copy2(f, LUA_COPY / f.name)


def run_tests(binaries, timeout, cases):
    """Runs the binaries in order until one fails: (outcome, seconds, log)."""
    env = dict(os.environ, BREAKERBOX_LUA_DIR=str(LUA_COPY), BB_DIFF_CASES=str(cases),
               BB_DIFF_SHRINK="0", PROPTEST_MAX_SHRINK_ITERS="0", RUST_BACKTRACE="0")
    start = time.monotonic()
    for name, exe in binaries:
        left = timeout - (time.monotonic() - start)
        # A session of its own: on a timeout the whole group goes, the redis-servers the
        # tests started too (a script looping for ever keeps its server busy; killed
        # alone, the test binary would leave it behind, never to run its Drop).
        p = subprocess.Popen(["nice", "-n", "19", exe], cwd=CRATE, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=max(left, 1))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return "timeout", time.monotonic() - start, f"{name}: timed out"
        if p.returncode != 0:
            failed = re.findall(r"^test (\S+) \.\.\. FAILED", out, re.M)
            # The log's first line says which binary and tests caught it.
            head = f"{name}: {' '.join(failed) or 'failed'}\n"
            return "caught", time.monotonic() - start, head + out + err
    return "missed", time.monotonic() - start, ""


def key(m):
    return (m["file"], m["line"], m["original"], m["text"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", action="append", help="a script, e.g. lua/record.lua")
    ap.add_argument("--function", action="append", help="only inside this Lua function")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--threshold", type=float, default=100.0)
    ap.add_argument("--timeout", type=float, default=0,
                    help="seconds a mutant may take (default: 10 times the baseline, at least 60)")
    ap.add_argument("--test", action="append", help="a test binary of breakerbox-redis")
    ap.add_argument("--cases", type=int, default=200, help="the differential test's cases")
    ap.add_argument("--resume", action="store_true",
                    help="keep the mutants results.json caught, run the others")
    ap.add_argument("--recheck", action="store_true",
                    help="with --resume, also run again what an older runner caught without "
                    "saying which test caught it")
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
    tests = args.test or TESTS
    print(f"== building {', '.join(tests)} (feature lua-mutants)", flush=True)
    binaries = build(tests)
    copy_scripts()
    print("== baseline: the unmutated scripts", flush=True)
    outcome, base, log = run_tests(binaries, 3600, args.cases)
    if outcome != "missed":
        lines = log.splitlines()
        at = next((i for i, l in enumerate(lines) if "panicked at" in l), max(0, len(lines) - 60))
        print("\n".join(lines[at : at + 60]))
        print(f"the unmutated tests do not pass ({outcome})", file=sys.stderr)
        return 2
    timeout = args.timeout or max(60.0, 10 * base)
    print(f"ok in {base:.1f}s (timeout {timeout:.0f}s a mutant)", flush=True)
    # The binaries must run the copy, not compiled-in scripts: a prelude that cannot load
    # fails every test.
    common = LUA_COPY / "common.lua"
    original = common.read_text()
    try:
        common.write_text("error('lua_mutants.py: sanity check')\n" + original)
        outcome, _, _ = run_tests(binaries, timeout, args.cases)
    finally:
        common.write_text(original)
    if outcome != "caught":
        print(f"the test binaries ignore {LUA_COPY} ({outcome})", file=sys.stderr)
        return 2

    results, earlier = [], {}
    results_path = WORK / "results.json"
    if args.resume and results_path.is_file():
        earlier = {key(r): r for r in json.loads(results_path.read_text())}
    def settled(m):
        r = earlier.get(key(m), {})
        return r.get("outcome") == "caught" and (not args.recheck or "by" in r)

    # One flip of `<` in `while #t > n do table.remove(t, 1) end` makes it endless: the
    # scripts loop only over fixed ranges and tables (for), never with while or repeat.
    for path in paths:
        for n, line in enumerate((ROOT / path).read_text().split("\n"), 1):
            if any(re.search(r"\b%s\b" % w, line[a:b]) for a, b in code_spans(line)
                   for w in ("while", "repeat")):
                print(f"warning: {path}:{n}: a while or repeat loop, which a mutant may "
                      "make endless (a timeout is not counted as caught)", flush=True)

    # Survivors first: after new tests, they are what a run is for.
    todo = [m for m in mutants if not settled(m) and key(m) not in earlier or
            not settled(m) and earlier[key(m)].get("outcome") != "caught"]
    todo += [m for m in mutants if not settled(m) and m not in todo]
    kept = {key(m): earlier[key(m)] for m in mutants if key(m) in earlier and m not in todo}
    print(f"{len(mutants)} mutants, {len(todo)} to run", flush=True)
    done = dict(kept)
    started = time.monotonic()
    for i, m in enumerate(todo, 1):
        target = LUA_COPY / pathlib.Path(m["file"]).name
        original = target.read_text()
        lines = original.split("\n")
        assert lines[m["line"] - 1] == m["original"]
        lines[m["line"] - 1] = m["text"]
        try:
            target.write_text("\n".join(lines))
            outcome, secs, log = run_tests(binaries, timeout, args.cases)
            if outcome == "timeout":
                # Most likely a loaded machine (no loop of the scripts can be made endless
                # by one flip: they have no while or repeat loop): once more, with three
                # times the time. A timeout is never counted as caught.
                outcome, secs, log = run_tests(binaries, 3 * timeout, args.cases)
        finally:
            target.write_text(original)
        done[key(m)] = dict(m, outcome=outcome, seconds=round(secs, 1), by=log.split("\n")[0])
        print(
            f'{outcome.upper():8} [{i}/{len(todo)}] {m["file"]}:{m["line"]}: '
            f'{m["from"]} -> {m["to"]} in {m["function"]} ({secs:.1f}s) {log.split(chr(10))[0]}',
            flush=True,
        )
        # Everything known so far, in the mutants' order (earlier results of mutants
        # outside this run's selection are kept too).
        merged = {**earlier, **done}
        results_path.write_text(json.dumps(list(merged.values()), indent=1))
    if todo:
        spent = time.monotonic() - started
        print(f"{spent / len(todo):.1f} s a mutant ({len(todo)} in {spent:.0f} s)")
    results = [done[key(m)] for m in mutants]

    counts = {k: sum(r["outcome"] == k for r in results) for k in ("caught", "missed", "unviable", "timeout")}
    viable = counts["caught"] + counts["missed"] + counts["timeout"]
    # A timeout is not a failing test: it says the tests did not finish, which a slow
    # machine explains as well as a mutant would. It counts as not caught.
    score = 100.0 * counts["caught"] / viable if viable else 100.0
    print()
    print(f"{len(results)} mutants: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    print(f"score: {score:.1f} % of {viable} viable mutants caught (threshold {args.threshold:g} %)")
    for r in results:
        if r["outcome"] in ("missed", "timeout"):
            print(f'{r["outcome"].upper():8} {r["file"]}:{r["line"]}: {r["from"]} -> {r["to"]} in {r["function"]}: {r["text"].strip()}')
    return 0 if score >= args.threshold else 1


if __name__ == "__main__":
    sys.exit(main())
