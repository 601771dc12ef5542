"""The soak benchmark's ledger (every submit, every job seen ended), its per-window table and
its verdicts: every accepted job ended, the last window within 1.5x the second, no process
grew."""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.perf.common import pct


class Ledger:
    """Every submit (its time, latency and answer) and every job seen ended."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.submits: list[tuple[float, float, int]] = []  # (t, ms, status)
        self.accepted: set[str] = set()
        self.ended: dict[str, tuple[float, float, str]] = {}  # id -> (t seen, ready ms, status)

    def window(self, t0: float, t1: float) -> dict[str, Any]:
        with self.lock:
            subs = [s for s in self.submits if t0 <= s[0] < t1]
            ends = [e for e in self.ended.values() if t0 <= e[0] < t1]
        ok = [ms for _, ms, status in subs if status == 202]
        ready = [ms for _, ms, _ in ends]
        return {
            "submits": len(ok),
            "errors": len(subs) - len(ok),
            "submit_p99": pct(ok, 99),
            "completions": len(ends),
            "ready_p50": pct(ready, 50),
            "ready_p99": pct(ready, 99),
        }


SIZES = (
    ("jobs", "heap"),
    ("jobs", "indexes"),
    ("job_attempts", "heap"),
    ("job_attempts", "indexes"),
)
# A size (MB) that grew by less than this did not grow: ``job_attempts`` holds only what a
# kill lost (a few rows), and one more page is 2x of a one-page table, not a trend.
SIZE_SLACK_MB = 64 / 1024


def size_held(second: float, last: float) -> bool:
    """A table part stopped growing: the last window within 1.5x the second, or within
    ``SIZE_SLACK_MB`` of it."""
    return last <= 1.5 * second or last - second <= SIZE_SLACK_MB


def report(
    ws: float,
    rate: float,
    ledger: Ledger,
    snaps: list[dict[str, dict[str, int]]],
    rss: dict[int, dict[str, float]],
    faults: list[tuple[float, str, str]],
    missing: list[str],
    states: dict[str, str],
    say: Any,
) -> dict[str, Any]:
    """Prints the per-window tables and the verdicts; returns them."""
    rows = []
    for w in range(len(snaps) - 1):
        row = ledger.window(w * ws, (w + 1) * ws)
        now, before = snaps[w + 1], snaps[w]
        for table, part in SIZES:
            row[f"{table} {part}"] = now[table][part] / 2**20
        for table in ("jobs", "job_attempts"):
            row[f"{table} dead"] = now[table]["dead"]
            row[f"{table} live"] = now[table]["live"]
            row[f"{table} autovacuum"] = now[table]["autovacuum"] - before[table]["autovacuum"]
            upd = now[table]["upd"] - before[table]["upd"]
            row[f"{table} hot"] = (now[table]["hot"] - before[table]["hot"]) / upd if upd else 0
        box = {k: now["box"][k] - before["box"][k] for k in now["box"]} if "box" in now else {}
        row["busy %"] = 100 * box["busy"] / box["all"] if box.get("all") else 0.0
        row["steal %"] = 100 * box["steal"] / box["all"] if box.get("all") else 0.0
        # USER_HZ is 100: a tick is 10 ms of one core
        row["cpu ms"] = 10 * box["busy"] / row["completions"] if box and row["completions"] else 0
        row["faults"] = sum(1 for t, _, _ in faults if w * ws <= t < (w + 1) * ws)
        row["rss"] = rss.get(w, {})
        rows.append(row)
    say(
        "| window | submits/s | refused | submit p99 ms | completions/s | ready p50 / p99 "
        "ms | jobs heap / idx MB | attempts heap / idx MB | dead tuples jobs / attempts | "
        "autovacuum runs | HOT % jobs | box busy / steal % | box CPU ms a job | faults |"
    )
    say("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for w, r in enumerate(rows):
        say(
            f"| {span(w, ws)} | {r['submits'] / ws:.0f} | {r['errors']} "
            f"| {r['submit_p99']:.0f} | {r['completions'] / ws:.0f} | {r['ready_p50']:.0f} / "
            f"{r['ready_p99']:.0f} | {r['jobs heap']:.1f} / {r['jobs indexes']:.1f} | "
            f"{r['job_attempts heap']:.1f} / {r['job_attempts indexes']:.1f} | "
            f"{r['jobs dead']} / {r['job_attempts dead']} | {r['jobs autovacuum']} / "
            f"{r['job_attempts autovacuum']} | {100 * r['jobs hot']:.0f} | "
            f"{r['busy %']:.0f} / {r['steal %']:.1f} | {r['cpu ms']:.2f} | {r['faults']} |"
        )
    roles = sorted({role for r in rows for role in r["rss"]})
    say(
        "\n| RSS MB (largest in the window, shared memory excluded) | "
        + " | ".join(f"w{w + 1}" for w in range(len(rows)))
        + " |"
    )
    say("|---|" + "---|" * len(rows))
    for role in roles:
        say(f"| {role} | " + " | ".join(f"{r['rss'].get(role, 0):.0f}" for r in rows) + " |")
    say("\nfaults: " + "; ".join(f"{t:.0f} s {kind}: {what}" for t, kind, what in faults))
    verdict = verdicts(rows, missing, states, ledger)
    ended = len(ledger.accepted & ledger.ended.keys())
    say(
        f"\naccepted {len(ledger.accepted)}, of them seen ended {ended}, not seen ended "
        f"{len(missing)} {dict(list(states.items())[:5])}; verdicts: {json.dumps(verdict)}"
    )
    return {
        "rate": rate,
        "rows": rows,
        "missing": missing,
        "states": states,
        "faults": faults,
        "verdicts": verdict,
        "accepted": len(ledger.accepted),
    }


def span(w: int, ws: float) -> str:
    """Window ``w``'s span: minutes for long windows, seconds for short ones."""
    if ws >= 60:
        return f"{w * ws / 60:g}–{(w + 1) * ws / 60:g} min"
    return f"{w * ws:g}–{(w + 1) * ws:g} s"


def verdicts(
    rows: list[dict[str, Any]], missing: list[str], states: dict[str, str], ledger: Ledger
) -> dict[str, Any]:
    """Every accepted job ended; the last window within 1.5× the second (p99s; sizes, or within
    64 kB of it); no process grew (last ≤ 1.1 × second + 5 MB)."""
    out: dict[str, Any] = {"every accepted job ended": not missing}
    if len(rows) < 3:
        return out
    second, last = rows[1], rows[-1]
    for key in ("submit_p99", "ready_p99", *(f"{t} {p}" for t, p in SIZES)):
        ratio = last[key] / second[key] if second[key] else float("inf")
        out[f"{key} last/second"] = round(ratio, 2)
        sized = not key.endswith("p99")  # a size may also grow by a page or so
        out[f"{key} within 1.5x"] = size_held(second[key], last[key]) if sized else ratio <= 1.5
    grew = [
        role
        for role, mb in last["rss"].items()
        if role in second["rss"] and mb > 1.1 * second["rss"][role] + 5
    ]
    out["processes that grew"] = grew
    return out
