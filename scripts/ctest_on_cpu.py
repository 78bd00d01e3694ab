#!/usr/bin/env python3
"""Runs a build's C unit tests (the CTest tests named test_*) as on another x86-64 CPU, through QEMU's user-mode
emulator (Debian's qemu-user), which answers CPUID as that CPU does: on `-cpu Haswell-v4` the process sees AVX2
and FMA and no AVX-512, so snug's run-time dispatch, OpenBLAS's kernel choice and every plan that depends on them
run as on an AVX2-only machine, which the suite's own caps (tests/isa_cap.c) reach only from inside snug.
Emulation is about ten times slower than the CPU itself: pick the tests with a regular expression.

    scripts/ctest_on_cpu.py build Haswell-v4 '^test_(precision|plan|bgemm)$'
    qemu-x86_64 -cpu help                      # the CPU models

Each test runs with the environment and working folder CTest gives it; one line per test (exit status, seconds,
the failing lines of a failure); the exit status is 1 when any test failed."""
import json
import os
import re
import shutil
import subprocess
import sys
import time


def ctest_tests(build):
    listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                             capture_output=True, text=True).stdout
    return json.loads(listing)["tests"]


def property_of(test, name, default):
    return next((p["value"] for p in test.get("properties", []) if p["name"] == name), default)


def run_one(test, cpu, build):
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in property_of(test, "ENVIRONMENT", []))
    start = time.monotonic()
    r = subprocess.run(["qemu-x86_64", "-cpu", cpu] + test["command"], env=env,
                       cwd=property_of(test, "WORKING_DIRECTORY", build), capture_output=True, text=True)
    lines = [l for l in (r.stdout + r.stderr).splitlines() if "TCG doesn't support" not in l]
    failing = [l for l in lines if "FAILED" in l or "ERROR" in l] or lines[-8:]
    print(f"{test['name']}: {'passed' if r.returncode == 0 else f'FAILED (exit {r.returncode})'}, "
          f"{time.monotonic() - start:.0f} s", flush=True)
    if r.returncode != 0:
        print("    " + "\n    ".join(failing[:12]), flush=True)
    return r.returncode == 0


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    build, cpu = sys.argv[1], sys.argv[2]
    pattern = re.compile(sys.argv[3] if len(sys.argv) == 4 else "")
    if not shutil.which("qemu-x86_64"):
        sys.exit("ctest_on_cpu: qemu-x86_64 not found: install Debian's qemu-user (apt-get install qemu-user)")
    tests = [t for t in ctest_tests(build)
             if os.path.basename(t["command"][0]).startswith("test_") and pattern.search(t["name"])]
    if not tests:
        sys.exit(f"ctest_on_cpu: no C unit test in {build} matches '{pattern.pattern}'")
    failed = [t["name"] for t in tests if not run_one(t, cpu, build)]
    print(f"{len(tests) - len(failed)} of {len(tests)} passed on {cpu}" + (": failed " + ", ".join(failed) if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
