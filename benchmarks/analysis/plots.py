"""The figures of the goodput comparison, each a PNG with every deployment on one chart:
attainment vs rate, attainment vs SLO scale (DistServe's two figures), latency CDFs, and the TTFT
breakdown as stacked bars."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench_results import Deployment, attainment, common_rate, latency_values, mean_phases  # noqa: E402

SLO_SCALES = [0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0]


def _finish(fig, ax, path: Path, title: str) -> Path:
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def attainment_vs_rate(deployments: list[Deployment], path: Path, target: float = 0.9) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    for d in deployments:
        if d.runs:
            rates, values = zip(*d.runs)
            ax.plot(rates, [100 * v for v in values], marker="o", label=d.name)
    ax.axhline(100 * target, color="gray", linestyle="--", linewidth=1)
    ax.set_xlabel("rate (requests/s)")
    ax.set_ylabel("SLO attainment (%)")
    ax.set_ylim(0, 105)
    return _finish(fig, ax, path, "Attainment vs rate")


def attainment_vs_slo_scale(deployments: list[Deployment], path: Path,
                            slo: tuple[float, float] | None = None, target: float = 0.9) -> Path:
    """Attainment with each deployment's SLOs (or `slo`) times each scale, at one request rate for
    all (DistServe's figure): the highest rate every goodput search ran at; without one, each
    deployment's reference run."""
    rate = common_rate(deployments)
    fig, ax = plt.subplots(figsize=(6, 4))
    for d in deployments:
        base = slo or d.slo
        records = d.records_at(rate) if rate is not None else d.reference
        if base is None or not records:
            continue
        values = [100 * attainment(records, base[0] * s, base[1] * s) for s in SLO_SCALES]
        ax.plot(SLO_SCALES, values, marker="o", label=d.name)
    ax.axhline(100 * target, color="gray", linestyle="--", linewidth=1)
    ax.set_xlabel("SLO scale (x both objectives)")
    ax.set_ylabel("SLO attainment (%)")
    ax.set_ylim(0, 105)
    title = "Attainment vs SLO scale" + (f" at {rate:.3g} req/s" if rate is not None else "")
    return _finish(fig, ax, path, title)


def latency_cdfs(deployments: list[Deployment], path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, label in ((axes[0], "ttft_s", "TTFT (ms)"), (axes[1], "tpot_s", "TPOT (ms)")):
        for d in deployments:
            values = sorted(1e3 * v for v in latency_values(d.reference, key))
            if values:
                ys = [(i + 1) / len(values) for i in range(len(values))]
                ax.step(values, ys, where="post", label=d.name)
        ax.set_xlabel(label)
        ax.set_ylabel("fraction of requests")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    axes[0].set_title("TTFT CDF")
    axes[1].set_title("TPOT CDF")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def ttft_breakdown(deployments: list[Deployment], path: Path) -> Path:
    """Mean TTFT split into server queueing, prefill and the rest (network, scheduler, client),
    with the KV transfer and the first decode step stacked above it (hatched): they follow the
    first token in Baton but decide when the second arrives."""
    fig, ax = plt.subplots(figsize=(6, 4))
    segments = [("queue_s", "queue", "tab:orange", ""), ("prefill_s", "prefill", "tab:blue", ""),
                ("other_s", "other (RPC, client)", "tab:gray", ""),
                ("kv_transfer_s", "KV transfer", "tab:green", "//"),
                ("first_decode_s", "first decode step", "tab:purple", "//")]
    names = []
    phases = []
    for d in deployments:
        p = mean_phases(d.reference)
        if p is not None:
            names.append(d.name)
            phases.append(p)
    bottoms = [0.0] * len(names)
    for key, label, color, hatch in segments:
        heights = [1e3 * p[key] for p in phases]
        ax.bar(names, heights, bottom=bottoms, label=label, color=color, hatch=hatch,
               edgecolor="white")
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    ax.set_ylabel("mean time (ms)")
    return _finish(fig, ax, path, "TTFT breakdown (server phases)")
