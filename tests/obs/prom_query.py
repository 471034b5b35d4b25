"""Asks a Prometheus server's HTTP API until every query has the wanted answer, or the time is up.

Usage: prom_query.py BASE_URL SECONDS 'QUERY => WANT' ...
WANT is `N series` (the instant vector has N series, every value finite) or `> X` (every series' value is
greater than X; at least one series). Prints each query's series once it holds; exits 1 naming the queries
that did not hold, with the last answer. Also: prom_query.py BASE_URL --ready SECONDS waits for /-/ready.
"""
import json
import math
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def holds(result, want):
    values = [float(s["value"][1]) for s in result]
    if want.endswith("series"):
        return len(values) == int(want.split()[0]) and all(math.isfinite(v) for v in values)
    return bool(values) and all(v > float(want[1:]) for v in values)


def main():
    base = sys.argv[1]
    if sys.argv[2] == "--ready":
        deadline = time.time() + float(sys.argv[3])
        while time.time() < deadline:
            try:
                get(base + "/-/ready")
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        sys.exit(f"FAIL: Prometheus at {base} not ready after {sys.argv[3]} s")
    deadline = time.time() + float(sys.argv[2])
    pending = [a.split(" => ") for a in sys.argv[3:]]
    last = {}
    while pending and time.time() < deadline:
        for q, want in list(pending):
            answer = json.loads(get(base + "/api/v1/query?" + urllib.parse.urlencode({"query": q})))
            last[q] = answer
            result = answer.get("data", {}).get("result", [])
            if answer.get("status") == "success" and holds(result, want):
                pending.remove([q, want])
                print(f"ok: {q} => {want}: " + ", ".join(
                    f"{s['metric']} {s['value'][1]}" for s in result))
        time.sleep(0.5)
    if pending:
        for q, want in pending:
            print(f"FAIL: {q} did not reach '{want}'; last answer: {json.dumps(last.get(q))}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
