"""Plots of cnntrain runs from their metrics.jsonl (docs/observability.md, "Plots").

Usage: plot_run.py --out DIR RUN_DIR [RUN_DIR ...]   (normally through `cnntrain-data plot`)

Writes DIR/loss_step.png, loss_epoch.png, accuracy_step.png, accuracy_epoch.png (learning rate on a second
axis), throughput.png and rank_breakdown.png (mean step time per rank and phase, from the per-rank events).
Several runs are overlaid, one colour each. A run still in progress works: a last line being written is
skipped. Uses Debian's python3-matplotlib with the non-interactive Agg backend.
"""
import argparse
import json
import os
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:
    sys.exit(f"cnntrain-data plot: matplotlib is missing ({e}); install python3-matplotlib (make deps)")

def fail(msg):
    print("cnntrain-data plot: " + msg, file=sys.stderr)
    sys.exit(2)  # bad input: the exit code of a usage error


WIDTH, HEIGHT, DPI = 10, 6, 100  # 1000 x 600 pixels
PHASES = ["data", "h2d", "forward", "backward", "comm", "optimizer", "checkpoint"]


def read_events(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    try:
        f = open(path)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror} (is {run_dir} a run directory?)")
    events = []
    with f:
        for line in f:
            try:
                events.append(json.loads(line))
            except ValueError:
                pass  # a line still being written by a running job
    return events


class Run:
    def __init__(self, run_dir):
        self.name = os.path.basename(os.path.normpath(run_dir)) or run_dir
        ev = read_events(run_dir)
        start = [e for e in ev if e.get("event") == "start"]
        spe = 0
        if start and start[-1].get("global_batch"):
            spe = start[-1].get("train_samples", 0) // start[-1]["global_batch"]
        self.steps_per_epoch = spe or None
        # A resumed run repeats the steps after its checkpoint: what earlier processes logged after the resumed
        # step is dropped, and the last value of a step wins.
        train, evals, self.ranks = {}, {}, []
        for e in ev:
            kind = e.get("event")
            if kind == "resumed":
                train = {s: t for s, t in train.items() if s <= e["step"]}
                evals = {s: t for s, t in evals.items() if s <= e["step"]}
                self.ranks = [r for r in self.ranks if r["step"] <= e["step"]]
            elif kind == "train":
                train[e["step"]] = e
            elif kind == "eval":
                evals[e["step"]] = e
            elif kind == "ranks":
                self.ranks.append(e)
        self.train = [train[s] for s in sorted(train)]
        self.eval = [evals[s] for s in sorted(evals)]

    def x(self, events, axis):
        steps = [e["step"] for e in events]
        if axis == "epoch":
            return [s / self.steps_per_epoch for s in steps] if self.steps_per_epoch else [e["epoch"] for e in events]
        return steps


def values(events, key):
    return [float("nan") if e.get(key) is None else e[key] for e in events]


def new_figure():
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT), dpi=DPI)
    ax.grid(True, alpha=0.3)
    return fig, ax


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(path)


def curves(runs, out, axis, what):
    fig, ax = new_figure()
    lr_ax = ax.twinx()
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, r in enumerate(runs):
        c = colours[i % len(colours)]
        tag = f"{r.name}: " if len(runs) > 1 else ""
        if what == "loss":
            ax.plot(r.x(r.train, axis), values(r.train, "loss"), color=c, label=f"{tag}train loss")
            if r.eval:
                ax.plot(r.x(r.eval, axis), values(r.eval, "test_loss"), "o--", color=c, label=f"{tag}test loss")
        else:
            ax.plot(r.x(r.train, axis), values(r.train, "train_acc"), color=c, label=f"{tag}train accuracy")
            if r.eval:
                ax.plot(r.x(r.eval, axis), values(r.eval, "test_acc"), "o--", color=c, label=f"{tag}test accuracy")
        lr_ax.plot(r.x(r.train, axis), values(r.train, "lr"), ":", color=c, alpha=0.6, label=f"{tag}lr")
    ax.set_xlabel("step" if axis == "step" else "epoch")
    ax.set_ylabel(what if what == "loss" else "accuracy")
    lr_ax.set_ylabel("learning rate")
    lines = ax.get_legend_handles_labels()
    lr_lines = lr_ax.get_legend_handles_labels()
    ax.legend(lines[0] + lr_lines[0], lines[1] + lr_lines[1], loc="best", fontsize="small")
    ax.set_title(f"{what} and learning rate by {axis}")
    fig.tight_layout()
    save(fig, out, f"{'loss' if what == 'loss' else 'accuracy'}_{axis}.png")


def throughput(runs, out):
    fig, ax = new_figure()
    for r in runs:
        ax.plot(r.x(r.train, "step"), values(r.train, "samples_per_s"), label=r.name)
    ax.set_xlabel("step")
    ax.set_ylabel("samples/s (global)")
    ax.set_title("training throughput")
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    save(fig, out, "throughput.png")


def rank_breakdown(runs, out):
    fig, axes = plt.subplots(1, len(runs), figsize=(WIDTH, HEIGHT), dpi=DPI, squeeze=False)
    for ax, r in zip(axes[0], runs):
        ax.set_title(r.name if len(runs) > 1 else "step time by rank and phase (mean over the run)")
        if not r.ranks:
            ax.text(0.5, 0.5, "no per-rank events yet", ha="center", va="center", transform=ax.transAxes)
            continue
        n = len(r.ranks[-1]["busy_s"])
        events = [e for e in r.ranks if len(e["busy_s"]) == n]  # a resume on another rank count starts anew
        bottom = [0.0] * n
        for p in PHASES:
            key = p + "_s"
            per_rank = [sum(e[key][k] or 0 for e in events) / len(events) for k in range(n)]
            ax.bar(range(n), per_rank, bottom=bottom, label=p)
            bottom = [b + v for b, v in zip(bottom, per_rank)]
        ax.set_xlabel("rank")
        ax.set_ylabel("seconds per step")
        ax.set_xticks(range(n))
        ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    save(fig, out, "rank_breakdown.png")


def main():
    ap = argparse.ArgumentParser(prog="cnntrain-data plot", description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR")
    ap.add_argument("--out", required=True, metavar="DIR")
    a = ap.parse_args()
    runs = [Run(d) for d in a.runs]
    if not any(r.train for r in runs):
        fail("no train events yet in " + ", ".join(a.runs) + " (the first one is written after --log.every_steps "
             "steps)")
    os.makedirs(a.out, exist_ok=True)
    for axis in ("step", "epoch"):
        curves(runs, a.out, axis, "loss")
        curves(runs, a.out, axis, "accuracy")
    throughput(runs, a.out)
    rank_breakdown(runs, a.out)


if __name__ == "__main__":
    main()
