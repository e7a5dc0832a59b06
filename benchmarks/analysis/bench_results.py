"""Reading `baton bench` output: per-request JSONL records, run summaries and goodput.json.

A record line is written by benchmarks/bench/record_io.cc; completed requests carry the derived
ttft_s, tpot_s, e2e_s and, when the server reported them, phases {queue_s, prefill_s,
kv_transfer_s, first_decode_s}. The definitions (benchmarks/bench/metrics.h) are not repeated here:
this module only reads them, so the Python figures and the C++ summary cannot disagree.

A results directory holds one subdirectory per deployment (its name labels the plots):

    RESULTS/<deployment>/goodput.json         `baton bench goodput --output-dir RESULTS/<deployment>`
    RESULTS/<deployment>/run-NN-rate-R.jsonl  the search's runs (named in goodput.json)
    RESULTS/<deployment>/reference.jsonl      optional: a `baton bench --output` run at a fixed rate,
                                              used for the CDFs, the breakdown and the SLO scale

Without reference.jsonl the run at the goodput rate (the highest that attained) stands in for it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path


def load_records(path: Path) -> list[dict]:
    """Every record of a JSONL file, in file order."""
    records = []
    with open(path, encoding="utf-8") as f:
        for line_number, line in enumerate(f, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{line_number}: {e}") from e
    return records


def measured(records: list[dict]) -> list[dict]:
    """The requests that count: not warm-up, not cancelled by the client."""
    return [r for r in records if not r["warmup"] and not r["cancelled"]]


def completed(records: list[dict]) -> list[dict]:
    return [r for r in measured(records) if "ttft_s" in r]


def meets_slo(record: dict, ttft_s: float, tpot_s: float) -> bool:
    """Both objectives; a one-token output (tpot_s null) meets any TPOT objective."""
    if "ttft_s" not in record:
        return False
    tpot = record.get("tpot_s")
    return record["ttft_s"] <= ttft_s and (tpot is None or tpot <= tpot_s)


def attainment(records: list[dict], ttft_s: float, tpot_s: float) -> float:
    """Share of measured requests that completed and met both objectives (failures are misses)."""
    pool = measured(records)
    if not pool:
        return 0.0
    return sum(meets_slo(r, ttft_s, tpot_s) for r in pool) / len(pool)


def misses(records: list[dict], ttft_s: float, tpot_s: float) -> dict[str, float]:
    """Where the measured requests miss, as shares of them: only the TTFT objective, only the TPOT
    objective, both, or no result at all (failed)."""
    pool = measured(records)
    counts = {"ttft_only": 0, "tpot_only": 0, "both": 0, "failed": 0}
    for r in pool:
        if "ttft_s" not in r:
            counts["failed"] += 1
            continue
        late_first = r["ttft_s"] > ttft_s
        slow_rest = r.get("tpot_s") is not None and r["tpot_s"] > tpot_s
        if late_first and slow_rest:
            counts["both"] += 1
        elif late_first:
            counts["ttft_only"] += 1
        elif slow_rest:
            counts["tpot_only"] += 1
    return {k: (v / len(pool) if pool else 0.0) for k, v in counts.items()}


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks, as numpy.percentile and the C++ summary."""
    if not values:
        return math.nan
    s = sorted(values)
    rank = q / 100 * (len(s) - 1)
    lo = math.floor(rank)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (rank - lo)


def latency_values(records: list[dict], key: str) -> list[float]:
    """ttft_s, tpot_s or e2e_s of the completed measured requests (TPOT only where defined)."""
    return [r[key] for r in completed(records) if r.get(key) is not None]


def mean_phases(records: list[dict]) -> dict[str, float] | None:
    """Mean server phases and the client-side rest of TTFT, in seconds; None when any completed
    request lacks the server's timing. "other" is TTFT minus queue and prefill: the network, the
    scheduler's own work and the client."""
    done = completed(records)
    if not done or any("phases" not in r for r in done):
        return None

    def mean(values):
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else 0.0

    queue = mean(r["phases"]["queue_s"] for r in done)
    prefill = mean(r["phases"]["prefill_s"] for r in done)
    ttft = mean(r["ttft_s"] for r in done)
    return {
        "queue_s": queue,
        "prefill_s": prefill,
        "other_s": max(0.0, ttft - queue - prefill),
        "kv_transfer_s": mean(r["phases"]["kv_transfer_s"] for r in done),
        "first_decode_s": mean(r["phases"]["first_decode_s"] for r in done),
        "ttft_s": ttft,
    }


@dataclass
class Deployment:
    """One deployment's results: its goodput search (if any) and its reference run."""

    name: str
    goodput: dict | None = None
    runs: list[tuple[float, float]] = field(default_factory=list)  # (rate, attainment), by rate
    reference: list[dict] = field(default_factory=list)
    reference_name: str = ""
    # The lowest-rate run that missed the target (where the deployment starts losing requests).
    first_failing: list[dict] = field(default_factory=list)
    first_failing_rate: float = 0.0
    directory: Path | None = None

    def records_at(self, rate: float) -> list[dict]:
        """The records of this deployment's search run at `rate` (empty if none)."""
        for run in (self.goodput or {}).get("runs", []):
            if run["rate_per_s"] == rate and self.directory is not None:
                return load_records(self.directory / run["records"])
        return []

    @property
    def slo(self) -> tuple[float, float] | None:
        if self.goodput and self.goodput.get("slo"):
            return self.goodput["slo"]["ttft_s"], self.goodput["slo"]["tpot_s"]
        return None


def load_deployment(directory: Path) -> Deployment:
    deployment = Deployment(name=directory.name, directory=directory)
    goodput_path = directory / "goodput.json"
    if goodput_path.exists():
        deployment.goodput = json.loads(goodput_path.read_text(encoding="utf-8"))
        deployment.runs = sorted((run["rate_per_s"], run["attainment"])
                                 for run in deployment.goodput["runs"])
    failing = sorted((run for run in (deployment.goodput or {}).get("runs", [])
                      if run["attainment"] < deployment.goodput["target_attainment"]),
                     key=lambda run: run["rate_per_s"])
    if failing and (directory / failing[0]["records"]).exists():
        deployment.first_failing = load_records(directory / failing[0]["records"])
        deployment.first_failing_rate = failing[0]["rate_per_s"]
    reference = directory / "reference.jsonl"
    if reference.exists():
        deployment.reference = load_records(reference)
        deployment.reference_name = reference.name
    elif deployment.goodput and deployment.goodput["runs"]:
        best = deployment.goodput["goodput_per_s"]
        runs = deployment.goodput["runs"]
        chosen = min(runs, key=lambda run: abs(run["rate_per_s"] - best))
        deployment.reference = load_records(directory / chosen["records"])
        deployment.reference_name = chosen["records"]
    return deployment


def common_rate(deployments: list[Deployment]) -> float | None:
    """The highest rate at which every deployment with a goodput search has a run, or None."""
    searched = [d for d in deployments if d.goodput and d.goodput.get("runs")]
    if not searched:
        return None
    rates = set.intersection(*({run["rate_per_s"] for run in d.goodput["runs"]} for d in searched))
    return max(rates) if rates else None


def load_results(results_dir: Path) -> list[Deployment]:
    """Every deployment subdirectory that holds goodput.json or reference.jsonl, sorted by name."""
    deployments = []
    for sub in sorted(p for p in results_dir.iterdir() if p.is_dir()):
        if (sub / "goodput.json").exists() or (sub / "reference.jsonl").exists():
            deployments.append(load_deployment(sub))
    return deployments
