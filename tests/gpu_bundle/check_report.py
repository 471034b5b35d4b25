#!/usr/bin/env python3
"""Validates run-gpu-checks.sh's report.json for the no-GPU tests: valid JSON of the documented form, every
check with a known status, numeric seconds and a string detail, and every expected check present.
    check_report.py REPORT.json NAME[=STATUS] ...   (NAME ending in '/' or '*': at least one check starting so)"""
import json
import sys

report = json.load(open(sys.argv[1]))
assert isinstance(report.get("versions"), dict) and report["versions"], "no versions"
checks = report["checks"]
for c in checks:
    assert set(c) == {"name", "status", "seconds", "detail"}, c
    assert c["status"] in ("pass", "fail", "skip"), c
    assert isinstance(c["seconds"], (int, float)) and isinstance(c["detail"], str), c
status = {c["name"]: c["status"] for c in checks}
missing = []
for want in sys.argv[2:]:
    name, _, st = want.partition("=")
    if name.endswith(("/", "*")):
        got = [s for n, s in status.items() if n.startswith(name.rstrip("*"))]
        ok = bool(got) and (not st or all(s == st for s in got))
    else:
        ok = name in status and (not st or status[name] == st)
    if not ok:
        missing.append(f"{want} (got {status.get(name, 'nothing')})")
if missing:
    sys.exit(f"check_report.py: {sys.argv[1]}: " + "; ".join(missing))
print(f"check_report.py: {len(checks)} checks, {sum(s == 'fail' for s in status.values())} failed, all expected present")
