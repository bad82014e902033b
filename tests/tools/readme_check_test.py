#!/usr/bin/env python3
"""tools/readme_check.py must fail on a README that names what does not exist: a made-up file, link, section,
command and flag each give one line naming them and exit 1. Usage: readme_check_test.py TWIN_BINARY"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "tools", "readme_check.py")

MADE_UP = """# a README with made-up names

See `scenarios/no-such-scenario.json`, [the guide](docs/NO_SUCH_GUIDE.md) and docs/SIMULATOR.md, "No such section".

```sh
build/twin simulate scenarios/llama2-7b-8xH100.json --made-up-flag 3
build/twin frobnicate run/
```

`--another-made-up-flag` and `twin calibrate --from-trace run/ --bogus`.
"""
EXPECTED = ["no file or folder scenarios/no-such-scenario.json", "link to a missing file docs/NO_SUCH_GUIDE.md",
            'docs/SIMULATOR.md has no section "No such section"', "--made-up-flag is no option of `twin simulate`",
            "`twin frobnicate` is no command", "--another-made-up-flag is no option of any twin command",
            "--bogus is no option of `twin calibrate`"]


def run(twin, readme):
    return subprocess.run([sys.executable, CHECK, "--twin", twin, "--readme", readme], capture_output=True, text=True)


def main():
    twin = sys.argv[1]
    with tempfile.TemporaryDirectory() as folder:
        readme = os.path.join(folder, "README.md")
        with open(readme, "w", encoding="utf-8") as out:
            out.write(MADE_UP)
        bad = run(twin, readme)
        with open(readme, "w", encoding="utf-8") as out:  # the same names, all real
            out.write("`scenarios/llama2-7b-8xH100.json`, [design](docs/DESIGN.md), docs/SIMULATOR.md, \"Limits\":\n"
                      "`build/twin simulate scenarios/llama2-7b-8xH100.json --exhaustive --out run/`\n")
        good = run(twin, readme)
    failures = []
    if bad.returncode != 1:
        failures.append(f"made-up names: expected exit 1, got {bad.returncode}: {bad.stderr}")
    failures += [f"made-up names: expected a line with {e!r} in:\n{bad.stdout}" for e in EXPECTED if e not in bad.stdout]
    if len(bad.stdout.strip().split("\n")) != len(EXPECTED) + 1:  # one line each, and the count
        failures.append(f"made-up names: expected {len(EXPECTED)} problems, got:\n{bad.stdout}")
    if good.returncode != 0:
        failures.append(f"real names: expected exit 0, got {good.returncode}:\n{good.stdout}{good.stderr}")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
