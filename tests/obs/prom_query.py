"""Asks a Prometheus server's HTTP API until every query has the wanted answer, or the time is up.

Usage: prom_query.py BASE_URL SECONDS ['QUERY => WANT' | --dashboard FILE JOB] ...
WANT is `N series` (the instant vector has N series, every value finite), `> X` (every series' value is
greater than X; at least one series), `some series` (at least one), `valid` (any successful answer) or, for
a Grafana variable's `label_values(METRIC, LABEL)`, `offers VALUE`. --dashboard takes every query of a Grafana
dashboard JSON, with $job set to JOB, wanting `some series` (queries of test-set metrics only a valid answer:
the runs here evaluate nothing), and its job variable's label_values query. Prints each query's series once it
holds; exits 1 naming the queries that did not hold, with the last answer.
Also: prom_query.py BASE_URL --ready SECONDS waits for /-/ready.
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


def check(base, q, want):
    """(whether q's answer has what is wanted, the answer)"""
    if q.startswith("label_values("):  # a Grafana variable: label_values(METRIC, LABEL) must offer `want`
        metric, label = q[len("label_values("):-1].split(", ")
        answer = json.loads(get(f"{base}/api/v1/label/{label}/values?" + urllib.parse.urlencode({"match[]": metric})))
        return want.split()[1] in answer.get("data", []), answer
    answer = json.loads(get(base + "/api/v1/query?" + urllib.parse.urlencode({"query": q})))
    if answer.get("status") != "success":
        return False, answer
    values = [float(s["value"][1]) for s in answer["data"]["result"]]
    if want == "valid":
        return True, answer
    if want == "some series":
        return bool(values), answer
    if want.endswith("series"):
        return len(values) == int(want.split()[0]) and all(math.isfinite(v) for v in values), answer
    return bool(values) and all(v > float(want[1:]) for v in values), answer


def dashboard_queries(path, job):
    board = json.load(open(path))
    queries = [[v["query"]["query"], "offers " + job] for v in board["templating"]["list"]]
    for panel in board["panels"]:
        for target in panel["targets"]:
            q = target["expr"].replace("$job", job)
            queries.append([q, "valid" if "cnntrain_test_" in q else "some series"])
    return queries


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
    pending, args = [], sys.argv[3:]
    while args:
        if args[0] == "--dashboard":
            pending += dashboard_queries(args[1], args[2])
            args = args[3:]
        else:
            pending.append(args.pop(0).split(" => "))
    last = {}
    while pending and time.time() < deadline:
        for q, want in list(pending):
            ok, last[q] = check(base, q, want)
            if ok:
                pending.remove([q, want])
                result = last[q]["data"]
                print(f"ok: {q} => {want}: " + (", ".join(f"{s['metric']} {s['value'][1]}" for s in result["result"])
                                                if isinstance(result, dict) else str(result)))
        time.sleep(0.5)
    if pending:
        for q, want in pending:
            print(f"FAIL: {q} did not reach '{want}'; last answer: {json.dumps(last.get(q))}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
