"""benchplot: the pictures the benchmarks write with --plot FILE, from the figures they print.

The benchmarks import it and call check() and draw(); the drawing itself runs in Debian's
python3 (/usr/bin/python3, for which python3-matplotlib is installed), whichever python3
runs the benchmark: `benchplot.py KIND FILE TITLE` with the data as JSON on stdin.
"""
import json, os, subprocess, sys

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def check():
    """Exits with a hint unless matplotlib can be imported (before a benchmark measures)."""
    r = subprocess.run([PYTHON, "-c", "import matplotlib"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench: --plot needs matplotlib for {PYTHON}\nhint: scripts/setup installs python3-matplotlib")


def draw(kind, path, title, data, *extra):
    """kind: latency_cdf or grouped_bars (below); extra: their further arguments (strings)."""
    subprocess.run([PYTHON, os.path.abspath(__file__), kind, path, title, *extra], input=json.dumps(data), text=True,
                   check=True)


def pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


def latency_cdf(path, title, curves):
    """curves: {label: [0th..100th percentile, 99.9th] in us}: one line each, latency against percentile."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, pct in curves.items():
        xs = pct[:101] + [pct[101]]
        ys = list(range(101)) + [99.9]
        order = sorted(range(len(xs)), key=lambda i: (ys[i], xs[i]))
        ax.plot([xs[i] for i in order], [ys[i] for i in order], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("round trip (us, log scale)")
    ax.set_ylabel("percentile")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"bench: wrote {path}", file=sys.stderr)


def grouped_bars(path, title, groups, ylabel="time per element (us)"):
    """groups: {group: {bar label: value}}: one cluster of bars per group, values printed on them."""
    plt = pyplot()
    labels = list(next(iter(groups.values())).keys())
    fig, ax = plt.subplots(figsize=(8, 5))
    width = 0.8 / len(labels)
    for j, label in enumerate(labels):
        xs = [i + j * width for i in range(len(groups))]
        ys = [g[label] for g in groups.values()]
        bars = ax.bar(xs, ys, width, label=label)
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.set_xticks([i + width * (len(labels) - 1) / 2 for i in range(len(groups))], list(groups.keys()))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"bench: wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    kind, path, title = sys.argv[1:4]
    {"latency_cdf": latency_cdf, "grouped_bars": grouped_bars}[kind](path, title, json.load(sys.stdin), *sys.argv[4:])
