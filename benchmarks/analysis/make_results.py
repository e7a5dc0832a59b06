#!/usr/bin/env python3
"""Regenerates benchmarks/RESULTS.md (and its plots) from a results directory of `baton bench`
output, in one command:

    .venv/bin/python benchmarks/analysis/make_results.py benchmarks/results

An experiment is a directory with one subdirectory per deployment, each with the goodput.json of
`baton bench goodput --output-dir` and optionally a reference.jsonl (bench_results.py). RESULTS_DIR
is one experiment or holds several below it (benchmarks/results/<model>/<workload>/), each then a
section of its own next to a table of disaggregated vs best colocated goodput.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import plots  # noqa: E402
from bench_results import (Deployment, attainment, completed, latency_values, load_results,  # noqa: E402
                           mean_phases, measured, misses, percentile)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _ms(value: float) -> str:
    return "–" if value != value else f"{1e3 * value:.1f}"  # NaN prints as a dash


def faults_cell(goodput: dict) -> str:
    """The search's `--fault` specs and how many faults its runs dealt ("none" without faults)."""
    specs = goodput.get("faults") or []
    if not specs:
        return "none"
    dealt = sum(1 for run in goodput["runs"] for fault in run["summary"].get("faults", [])
                if not fault["error"])
    return f"{', '.join(specs)} ({dealt} dealt)"


def goodput_table(deployments: list[Deployment]) -> list[str]:
    lines = ["| deployment | workload | SLO (TTFT / TPOT) | target | faults | goodput (req/s) | runs | search |",
             "|---|---|---|---|---|---|---|---|"]
    for d in deployments:
        g = d.goodput
        if g is None:
            lines.append(f"| {d.name} | – | – | – | – | no search | – | – |")
            continue
        state = "converged" if g["converged"] else ("bracketed" if g["bracketed"] else "not bracketed")
        if g.get("error"):
            state += f"; stopped: {g['error']}"
        lines.append(
            f"| {d.name} | {g['workload']} | {_ms(g['slo']['ttft_s'])} ms / {_ms(g['slo']['tpot_s'])} ms"
            f" | {100 * g['target_attainment']:.0f}% | {faults_cell(g)} | **{g['goodput_per_s']:.3g}**"
            f" | {len(g['runs'])}"
            f" | {state} |")
    return lines


def latency_table(deployments: list[Deployment]) -> list[str]:
    lines = ["| deployment | reference run | requests (completed) | TTFT p50 / p90 / p99 (ms)"
             " | TPOT p50 / p90 / p99 (ms) | attainment | missed: TTFT only / TPOT only / both / failed |",
             "|---|---|---|---|---|---|---|"]
    for d in deployments:
        if not d.reference:
            continue
        ttft = latency_values(d.reference, "ttft_s")
        tpot = latency_values(d.reference, "tpot_s")
        att = "–" if d.slo is None else f"{100 * attainment(d.reference, *d.slo):.1f}%"
        missed = "–" if d.slo is None else " / ".join(
            f"{100 * share:.0f}%" for share in misses(d.reference, *d.slo).values())
        lines.append(
            f"| {d.name} | `{d.reference_name}` | {len(measured(d.reference))}"
            f" ({len(completed(d.reference))})"
            f" | {' / '.join(_ms(percentile(ttft, q)) for q in (50, 90, 99))}"
            f" | {' / '.join(_ms(percentile(tpot, q)) for q in (50, 90, 99))} | {att} | {missed} |")
    return lines


def find_experiments(root: Path) -> list[Path]:
    """`root` itself when it holds deployment subdirectories, else every directory below it that
    does (e.g. results/<model>/<workload>), sorted."""
    if load_results(root):
        return [root]
    return sorted(d for d in root.rglob("*") if d.is_dir() and d.name != "plots" and load_results(d))


def _fault_free_searches(deployments: list[Deployment]) -> list[Deployment]:
    """The deployments with a goodput search not run under `--fault` (a search under faults is
    compared with its own fault-free run in its experiment's table)."""
    return [d for d in deployments if d.goodput is not None and not d.goodput.get("faults")]


def _best_against(ours: list[Deployment], theirs: Deployment) -> tuple[Deployment, str]:
    """The best of `ours` by goodput, and its goodput over `theirs`' as a table cell."""
    best = max(ours, key=lambda d: d.goodput["goodput_per_s"])
    g_ours, g_theirs = best.goodput["goodput_per_s"], theirs.goodput["goodput_per_s"]
    return best, "–" if g_theirs == 0 else f"{g_ours / g_theirs:.2f}×"


def comparison_table(experiments: list[tuple[str, list[Deployment]]]) -> list[str]:
    """Disaggregated (names starting "disagg") against the best colocated ("coloc") deployment, both
    fault-free."""
    lines = ["| experiment | disaggregated | goodput | best colocated | goodput | ratio |",
             "|---|---|---|---|---|---|"]
    for title, deployments in experiments:
        searched = _fault_free_searches(deployments)
        disagg = [d for d in searched if d.name.startswith("disagg")]
        coloc = [d for d in searched if d.name.startswith("coloc")]
        if not disagg or not coloc:
            continue
        best_coloc = max(coloc, key=lambda d: d.goodput["goodput_per_s"])
        best_disagg, ratio = _best_against(disagg, best_coloc)
        lines.append(f"| {title} | {best_disagg.name} | {best_disagg.goodput['goodput_per_s']:.3g} | "
                     f"{best_coloc.name} | {best_coloc.goodput['goodput_per_s']:.3g} | {ratio} |")
    return lines if len(lines) > 2 else []


def llama_server_table(experiments: list[tuple[str, list[Deployment]]]) -> list[str]:
    """Baton's best deployment against llama-server ("llama-server"), in every experiment that
    searched both (benchmarks/comparison/compare_llama_server.py), fault-free."""
    lines = ["| experiment | llama-server goodput | best Baton deployment | goodput | ratio |",
             "|---|---|---|---|---|"]
    for title, deployments in experiments:
        searched = _fault_free_searches(deployments)
        theirs = next((d for d in searched if d.name == "llama-server"), None)
        ours = [d for d in searched if d.name != "llama-server"]
        if theirs is None or not ours:
            continue
        best, ratio = _best_against(ours, theirs)
        lines.append(f"| {title} | {theirs.goodput['goodput_per_s']:.3g} | {best.name} | "
                     f"{best.goodput['goodput_per_s']:.3g} | {ratio} |")
    return lines if len(lines) > 2 else []


def miss_table(deployments: list[Deployment]) -> list[str]:
    """Where each deployment loses requests: the lowest rate that missed the target, which objective
    the misses broke, and the mean TTFT breakdown and TPOT there."""
    lines = ["| deployment | rate (req/s) | attainment | missed: TTFT only / TPOT only / both / failed"
             " | mean queue / prefill / KV transfer (ms) | TPOT p50 / p90 (ms) |",
             "|---|---|---|---|---|---|"]
    for d in deployments:
        if not d.first_failing or d.slo is None:
            continue
        missed = " / ".join(f"{100 * share:.0f}%" for share in misses(d.first_failing, *d.slo).values())
        phases = mean_phases(d.first_failing)
        breakdown = "–" if phases is None else " / ".join(
            _ms(phases[key]) for key in ("queue_s", "prefill_s", "kv_transfer_s"))
        tpot = latency_values(d.first_failing, "tpot_s")
        lines.append(f"| {d.name} | {d.first_failing_rate:.3g} | "
                     f"{100 * attainment(d.first_failing, *d.slo):.1f}% | {missed} | {breakdown}"
                     f" | {_ms(percentile(tpot, 50))} / {_ms(percentile(tpot, 90))} |")
    return lines if len(lines) > 2 else []


def experiment_section(title: str, deployments: list[Deployment], plots_dir: Path, out: Path,
                       level: str) -> list[str]:
    plots_dir.mkdir(parents=True, exist_ok=True)
    target = next((d.goodput["target_attainment"] for d in deployments if d.goodput), 0.9)
    figures = [
        ("Attainment vs rate", plots.attainment_vs_rate(deployments, plots_dir / "attainment_vs_rate.png", target)),
        ("Attainment vs SLO scale", plots.attainment_vs_slo_scale(
            deployments, plots_dir / "attainment_vs_slo_scale.png", target=target)),
        ("Latency CDFs", plots.latency_cdfs(deployments, plots_dir / "latency_cdfs.png")),
        ("TTFT breakdown", plots.ttft_breakdown(deployments, plots_dir / "ttft_breakdown.png")),
    ]
    lines = [f"{level} {title}", ""] if title else []
    lines += [f"{level}# Goodput", "", *goodput_table(deployments), "",
              f"{level}# Latency of the reference runs", "", *latency_table(deployments), ""]
    losses = miss_table(deployments)
    if losses:
        lines += [f"{level}# Where requests are lost (first rate below the target)", "", *losses, ""]
    for d in deployments:
        if d.goodput and d.goodput.get("notes"):
            lines += [f"Notes for {d.name}: " + "; ".join(d.goodput["notes"]) + ".", ""]
    lines += [f"{level}# Figures", ""]
    for caption, path in figures:
        lines += [f"{level}## {caption}", "", f"![{caption}]({os.path.relpath(path, out.parent)})", ""]
    return lines


def write_results(results_dir: Path, out: Path, plots_dir: Path | None = None) -> Path:
    """RESULTS.md for every experiment under `results_dir`; each one's PNGs go to its plots/
    (or to `plots_dir` when `results_dir` is a single experiment)."""
    experiment_dirs = find_experiments(results_dir)
    if not experiment_dirs:
        raise SystemExit(f"{results_dir}: no deployment subdirectory with goodput.json or "
                         "reference.jsonl")
    experiments = [(str(d.relative_to(results_dir)).replace(os.sep, " / ") if d != results_dir else "",
                    load_results(d)) for d in experiment_dirs]
    command_dir = (str(results_dir.relative_to(REPO_ROOT)) if results_dir.is_relative_to(REPO_ROOT)
                   else str(results_dir))
    lines = [
        "# Baton benchmark results",
        "",
        "Generated by `benchmarks/analysis/make_results.py " + command_dir + "` from `baton bench`"
        " output; do not edit by hand. Definitions: `benchmarks/bench/metrics.h` (TTFT, TPOT,"
        " phases) and `benchmarks/bench/goodput_search.h` (the search and its steady-state rule).",
        "",
    ]
    titled = [(title or directory.name, deployments)
              for (title, deployments), directory in zip(experiments, experiment_dirs)]
    comparison = comparison_table(titled)
    if comparison:
        lines += ["## Disaggregated vs colocated", "", *comparison, ""]
    against_llama_server = llama_server_table(titled)
    if against_llama_server:
        lines += ["## Against llama-server", "", *against_llama_server, ""]
    single = len(experiments) == 1
    for (title, deployments), directory in zip(experiments, experiment_dirs):
        section_plots = plots_dir if (single and plots_dir is not None) else directory / "plots"
        lines += experiment_section(title, deployments, section_plots.resolve(), out,
                                    "#" if single and not title else "##")
    out.write_text("\n".join(lines), encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--plots-dir", type=Path, default=None,
                        help="where the PNGs go for a single experiment (default: its plots/)")
    args = parser.parse_args(argv)
    out = write_results(args.results_dir.resolve(), args.out.resolve(), args.plots_dir)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
