"""`crossbuild eval report` and `eval compare`: a headline of figures with 95 % Wilson intervals (what they estimate,
the commits, proof levels per target, flakiness; evaluation/figures.py), success rates per tier and target at each
success level, medians and censored means of steps/tokens/cost/time, per-tool statistics, knowledge-base
attachments, failure categories with run ids; and cell-by-cell comparisons with a paired significance test."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossbuild.evaluation.figures import headline, table, wilson
from crossbuild.evaluation.runner import LEVELS, load_rows
from crossbuild.trace import runs
from crossbuild.trace import store as trace_store


def _level(row: dict[str, Any], level: str) -> bool | None:
    if level == "strict":
        return bool(row.get("strict_success"))
    levels = row.get("levels") or {}
    return levels.get(level) if level in levels else False


def rate_table(rows: list[dict[str, Any]], key: str) -> list[tuple[str, str, int, int, float, float, float]]:
    """(group, level, passed, n, rate, low, high) for every group of KEY (tier/target) and level."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[str(r.get(key))].append(r)
    out = []
    for g in sorted(groups):
        for level in (*LEVELS, "strict"):
            vals = [_level(r, level) for r in groups[g]]
            vals = [v for v in vals if v is not None]  # functional: only projects that define a check
            n, k = len(vals), sum(1 for v in vals if v)
            lo, hi = wilson(k, n)
            out.append((g, level, k, n, k / n if n else 0.0, lo, hi))
    return out


def censored(rows: list[dict[str, Any]], field: str, budget: float) -> tuple[float, float]:
    """Median over all cells, and the mean with failed cells counted at the budget."""
    vals = [float(r.get(field) or 0) for r in rows]
    cens = [float(r.get(field) or 0) if r.get("status") == "verified" else budget for r in rows]
    return (statistics.median(vals) if vals else 0.0), (statistics.fmean(cens) if cens else 0.0)


def failure_category(row: dict[str, Any]) -> str:
    if row.get("status") == "crashed":
        return "crashed (runner)"
    kb = row.get("kb_attached") or []
    stop = row.get("stop_reason") or row.get("status")
    if stop == "verified" and not row.get("strict_success"):
        return "verified but not strict (expected artifact or functional check missing)"
    msg = (row.get("message") or "").lower()
    for needle, label in (("not verified", "built, not verified"), ("depth limit", "dependency depth"),
                          ("cross-building", "dependency failed"), ("no build system", "no build system"),
                          ("could not switch", "no other build system")):
        if needle in msg:
            return f"{stop}: {label}" + (f" [{kb[-1]}]" if kb else "")
    return f"{stop}" + (f": last knowledge entry {kb[-1]}" if kb else ": no knowledge entry matched")


@dataclass
class Report:
    markdown: str
    plots: list[Path]


def tool_stats(db: Path, run_ids: list[str]) -> tuple[dict[str, list[int]], Counter, Counter]:
    if not db.is_file():
        return defaultdict(lambda: [0, 0]), Counter(), Counter()
    conn = trace_store.connect(db)
    try:
        return runs.tool_outcomes(conn, run_ids)
    finally:
        conn.close()


def build_report(results_dir: Path, *, command: str | None = None) -> Report:
    results = results_dir / "results.jsonl"
    if not results.is_file():
        raise FileNotFoundError(f"{results} does not exist: run `crossbuild eval run ... --out {results_dir}` first")
    rows = load_rows(results)
    meta = json.loads((results_dir / "run.json").read_text()) if (results_dir / "run.json").is_file() else {}
    plots = _plots(rows, results_dir)
    sections = (_summary(rows, meta, results_dir, command), _success_tables(rows),
                _effort(rows, meta.get("config", {})), _tools_and_knowledge(rows, results_dir / "runs.db"),
                _failures(rows), _plot_section(plots))
    return Report("\n".join(line for section in sections for line in section), plots or [])


def _summary(rows: list[dict[str, Any]], meta: dict[str, Any], results_dir: Path, command: str | None) -> list[str]:
    lines = [f"# Evaluation: {results_dir.name}", ""]
    if command:
        lines += ["Made with:", "", "```sh", command, "```", ""]
    if not rows:
        return lines + ["No cells.", ""]
    projects = len({r["project"] for r in rows})
    target_names = ", ".join(sorted({r["target"] for r in rows}))
    return lines + [
        f"{len(rows)} cells ({projects} projects × targets {target_names} × {meta.get('repeats', 1)} repeat(s)), "
        f"model `{meta.get('config', {}).get('model', '?')}`, crossbuild {meta.get('crossbuild_version', '?')}"
        + ("; without source hints (each workspace without debian/)" if meta.get("config", {}).get("source_hints")
           is False else "") + ".", "", *headline(rows, meta, results_dir)]


def _success_tables(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for key in ("tier", "target"):
        rates = rate_table(rows, key)
        cells = [[group] + [f"{k}/{n} {rate:.0%} [{lo:.0%}–{hi:.0%}]" if n else "–"
                            for g, level, k, n, rate, lo, hi in rates if g == group]
                 for group in sorted({t[0] for t in rates})]
        lines += [f"## Success by {key} (95 % Wilson interval)", "", *table((key, *LEVELS, "strict"), cells)]
    return lines


def _effort(rows: list[dict[str, Any]], cfg: dict[str, Any]) -> list[str]:
    budgets = {"steps": cfg.get("max_steps", 60), "tokens": 3_000_000, "cost_usd": 5.0,
               "wall_s": cfg.get("timeout_s", 3600)}
    cells = []
    for field, budget in budgets.items():
        if not any(r.get(field) for r in rows):  # the offline planner spends no tokens and no money
            cells.append([field, 0, "0 (none spent)", budget])
            continue
        med, cmean = censored(rows, field, budget)
        cells.append([field, f"{med:.1f}", f"{cmean:.1f}", budget])
    return ["## Effort (median; censored mean with failures counted at the budget)", "",
            *table(("measure", "median", "censored mean", "budget"), cells)]


def _tools_and_knowledge(rows: list[dict[str, Any]], db: Path) -> list[str]:
    tools, attached, helped = tool_stats(db, [r["run_id"] for r in rows if r.get("run_id")])
    lines = []
    if tools:
        lines += ["## Tool calls", "", *table(("tool", "calls", "failed", "failure rate"), [
            [name, calls, failed, f"{failed / calls:.0%}"]
            for name, (calls, failed) in sorted(tools.items(), key=lambda kv: -kv[1][0])])]
    if attached:
        lines += ["## Knowledge-base attachments", "", *table(("entry", "attached", "in runs that were verified"), [
            [entry, n, helped[entry]] for entry, n in attached.most_common()])]
    return lines


def _failures(rows: list[dict[str, Any]]) -> list[str]:
    failed = [r for r in rows if not r.get("strict_success")]
    if not failed:
        return []
    lines = ["## Failures by category", ""]
    cats: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in failed:
        cats[failure_category(r)].append(r)
    for cat, rs in sorted(cats.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"- **{cat}** ({len(rs)}): " + ", ".join(
            f"{r['project']}/{r['target']} (`{r.get('run_id', '-')}`)" for r in rs))
    cells = []
    for r in sorted(failed, key=lambda r: (r["project"], r["target"])):
        lv = r.get("levels") or {}
        msg = (r.get("message") or r.get("error") or "").replace("|", "\\|").replace("\n", " ")[:220]
        cells.append([r["project"], r["target"], r.get("stop_reason") or r.get("status"),
                      ",".join(k for k in LEVELS if lv.get(k)) or "-", msg])
    return lines + ["", "## Failed cells", "", *table(("project", "target", "stop", "levels", "message"), cells)]


def _plot_section(plots: list[Path] | None) -> list[str]:
    if plots:
        return ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    if plots is None:
        return ["Plots skipped: matplotlib is not installed (`pip install 'crossbuild[report]'`).", ""]
    return []


def _plots(rows: list[dict[str, Any]], out: Path) -> list[Path] | None:
    """The report's plots, or None when matplotlib (the `report` extra) is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    paths: list[Path] = []
    rates = rate_table(rows, "target")
    targets = sorted({t[0] for t in rates})
    levels = (*LEVELS, "strict")
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(1, len(targets))
    for i, t in enumerate(targets):
        vals = [next(x[4] for x in rates if x[0] == t and x[1] == lv) for lv in levels]
        ax.bar([j + i * width for j in range(len(levels))], vals, width, label=t)
    ax.set_xticks([j + width * (len(targets) - 1) / 2 for j in range(len(levels))], levels, rotation=20)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of cells")
    ax.set_title("Success by target and level")
    paths.append(_save(plt, fig, ax, out / "success_by_target.png"))
    fig, ax = plt.subplots(figsize=(7, 4))
    for ok, colour, label in ((True, "tab:green", "strict success"), (False, "tab:red", "failed")):
        xs = [r.get("wall_s") or 0 for r in rows if bool(r.get("strict_success")) == ok]
        ys = [r.get("steps") or 0 for r in rows if bool(r.get("strict_success")) == ok]
        ax.scatter(xs, ys, c=colour, label=label, alpha=0.7)
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("steps")
    ax.set_title("Time and steps vs success")
    paths.append(_save(plt, fig, ax, out / "time_vs_success.png"))
    return paths


def _save(plt, fig, ax, path: Path) -> Path:
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- compare --------------------------------------------------------------------------------------------------

@dataclass
class Comparison:
    rescued: list[str]
    regressed: list[str]
    both_failed: list[str]
    both_passed: list[str]
    step_deltas: dict[str, int]
    success_p: float  # exact McNemar test on the discordant cells
    steps_p: float  # sign test on the step deltas of cells that passed in both
    only_in_a: list[str]
    only_in_b: list[str]

    def text(self) -> str:
        n = len(self.rescued) + len(self.regressed) + len(self.both_failed) + len(self.both_passed)
        lines = [f"{n} cells in both: rescued {len(self.rescued)}, regressed {len(self.regressed)}, both failed "
                 f"{len(self.both_failed)}, both passed {len(self.both_passed)}"]
        for label, cells in (("rescued", self.rescued), ("regressed", self.regressed)):
            if cells:
                lines.append(f"  {label}: {', '.join(cells)}")
        if self.step_deltas:
            d = list(self.step_deltas.values())
            lines.append(f"step delta (B - A) on cells passed in both: median {statistics.median(d):+.1f}, "
                         f"total {sum(d):+d}")
        verdict = "larger than run-to-run noise" if self.success_p < 0.05 else "within run-to-run noise"
        lines.append(f"success difference: McNemar exact p = {self.success_p:.3f} ({verdict})")
        verdict = "larger than run-to-run noise" if self.steps_p < 0.05 else "within run-to-run noise"
        lines.append(f"steps difference: sign test p = {self.steps_p:.3f} ({verdict})")
        if self.only_in_a or self.only_in_b:
            lines.append(f"cells only in A: {len(self.only_in_a)}, only in B: {len(self.only_in_b)}")
        return "\n".join(lines)


def _binom_two_sided(k: int, n: int) -> float:
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(k, n - k) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def compare(a_dir: Path, b_dir: Path) -> Comparison:
    def by_cell(d: Path) -> dict[str, dict[str, Any]]:
        rows = load_rows(d / "results.jsonl")
        return {f"{r['project']}|{r['target']}|{r.get('repeat', 1)}": r for r in rows}

    a, b = by_cell(a_dir), by_cell(b_dir)
    common = sorted(set(a) & set(b))
    res = Comparison([], [], [], [], {}, 1.0, 1.0, sorted(set(a) - set(b)), sorted(set(b) - set(a)))
    for c in common:
        pa, pb = bool(a[c].get("strict_success")), bool(b[c].get("strict_success"))
        label = c.rsplit("|", 1)[0].replace("|", "/")
        if pa and pb:
            res.both_passed.append(label)
            res.step_deltas[label] = int(b[c].get("steps") or 0) - int(a[c].get("steps") or 0)
        elif pb:
            res.rescued.append(label)
        elif pa:
            res.regressed.append(label)
        else:
            res.both_failed.append(label)
    res.success_p = _binom_two_sided(len(res.rescued), len(res.rescued) + len(res.regressed))
    nonzero = [d for d in res.step_deltas.values() if d]
    res.steps_p = _binom_two_sided(sum(1 for d in nonzero if d > 0), len(nonzero))
    return res
