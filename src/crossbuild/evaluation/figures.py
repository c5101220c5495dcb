"""The figures a report leads with: every rate as k/n with its 95 % Wilson interval, what the rates estimate (the
population a random sample was drawn from, or no population for a hand-picked corpus), the commit(s) that ran the
cells, the proof levels per target, and the cells whose repeats disagree (flakiness)."""

from __future__ import annotations

import json
import math
import tomllib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

Z95 = 1.959964
PROOF_LEVELS = ("tested", "exercised", "built")
RULE = "rule: README 'The population and the development sample'"


def wilson(successes: int, n: int) -> tuple[float, float]:
    if n == 0:
        return 0.0, 0.0
    p = successes / n
    denom = 1 + Z95 ** 2 / n
    centre = (p + Z95 ** 2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 ** 2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(k: int, n: int) -> str:
    """`k/n (p %, 95 % CI a–b %)`, the form of every rate the headline gives."""
    if n == 0:
        return "0/0 (no cells)"
    lo, hi = wilson(k, n)
    return f"{k}/{n} ({100 * k / n:.1f} %, 95 % CI {100 * lo:.1f}–{100 * hi:.1f} %)"


def table(header: tuple[str, ...], rows: list[list[Any]]) -> list[str]:
    """A Markdown table and the blank line after it."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(c) for c in row) + " |" for row in rows), ""]


def proof_of(row: dict[str, Any]) -> str | None:
    """A cell's proof level: None when not verified, `unknown` for a verified row that records none (older rows)."""
    if row.get("status") != "verified":
        return None
    return row.get("proof") or "unknown"


def headline(rows: list[dict[str, Any]], meta: dict[str, Any], results_dir: Path) -> list[str]:
    """The report's first figures, after its title: what they estimate, the commit(s), the proof levels per target,
    verified and strict success overall, and flakiness; then the proof-level table and the flaky cells."""
    total = len(rows)
    lines = ["**Proof levels on the target** (share of all cells; k/n, 95 % Wilson interval):", ""]
    targets = sorted({r["target"] for r in rows})
    for target in targets + (["all targets"] if len(targets) > 1 else []):
        lines.append(_proof_line(target, [r for r in rows if target == "all targets" or r["target"] == target]))
    verified = sum(1 for r in rows if r.get("status") == "verified")
    strict = sum(1 for r in rows if r.get("strict_success"))
    lines += ["", f"**All cells: verified {rate(verified, total)}; strict success (right target, every expected "
              f"artifact, functional check, clean rebuild) {rate(strict, total)}.**", ""]
    flaky, measured = flaky_cells(rows)
    if measured:
        lines += [f"Flakiness: {rate(len(flaky), measured)} of the cells (project, target) with more than one repeat "
                  "disagree (verified in some repeats and not in others, or at different proof levels)"
                  + ("; listed under “Flaky cells”." if flaky else "."),
                  "", "Repeats of a cell are not independent draws: the intervals above, which count every repeat "
                  "as a cell, are narrower than the uncertainty about the projects.", ""]
    else:
        lines += ["Flakiness: no repeats: flakiness not measured.", ""]
    lines += [f"**What these figures estimate:** {estimates(rows, meta, results_dir)}", "", *commits(rows, meta)]
    return lines + proof_table(rows) + _flaky_section(flaky)


def _proof_line(label: str, rows: list[dict[str, Any]]) -> str:
    n = len(rows)
    levels = Counter(proof_of(r) for r in rows)
    verified = n - levels[None]
    head = f"- **{label}** ({n} cells): "
    if verified and levels["unknown"] == verified:
        return head + f"proof levels not recorded (rows from before proof levels); verified {rate(verified, n)}"
    line = (head + f"tested {rate(levels['tested'], n)}; exercised or above "
            f"{rate(levels['tested'] + levels['exercised'], n)}; verified (any level) {rate(verified, n)}")
    return line + (f" ({levels['unknown']} verified cells record no level)" if levels["unknown"] else "")


def proof_table(rows: list[dict[str, Any]]) -> list[str]:
    """Cells by what ran on the target (proof levels) per target, as shares of the target's cells with intervals;
    verified rows from before the levels count as `unknown`."""
    cells = []
    targets = sorted({r["target"] for r in rows})
    for target in targets + (["all targets"] if len(targets) > 1 else []):
        mine = [r for r in rows if target == "all targets" or r["target"] == target]
        levels = Counter(proof_of(r) for r in mine)
        counts = [levels[lv] for lv in (*PROOF_LEVELS, "unknown")]
        counts += [levels["tested"] + levels["exercised"], len(mine) - levels[None]]
        cells.append([target, len(mine), *(_short(k, len(mine)) for k in counts)])
    return ["## Cells by proof level (what ran on the target; 95 % Wilson interval)", "",
            *table(("target", "cells", *PROOF_LEVELS, "unknown", "exercised or above", "verified"), cells)]


def _short(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k}/{n} {k / n:.0%} [{lo:.0%}–{hi:.0%}]" if n else "–"


def flaky_cells(rows: list[dict[str, Any]]) -> tuple[list[list[dict[str, Any]]], int]:
    """The cells (project, target) whose repeats disagree, each as its rows by repeat, and how many cells have more
    than one repeat. Repeats agree when all are unverified, or all verified at one proof level."""
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        cells[(r["project"], r["target"])].append(r)
    repeated = [sorted(rs, key=lambda r: r.get("repeat") or 1) for _, rs in sorted(cells.items()) if len(rs) > 1]
    return [rs for rs in repeated if len({proof_of(r) for r in rs}) > 1], len(repeated)


def _outcome(row: dict[str, Any]) -> str:
    level = proof_of(row)
    if level:
        return f"r{row.get('repeat', 1)} verified ({level})"
    stop = row.get("stop_reason")
    return f"r{row.get('repeat', 1)} {row.get('status')}" + (f" ({stop})" if stop and stop != row.get("status") else "")


def _flaky_section(flaky: list[list[dict[str, Any]]]) -> list[str]:
    if not flaky:
        return []
    return ["## Flaky cells (repeats disagree)", "", *table(("project", "target", "repeats"), [
        [rs[0]["project"], rs[0]["target"], "; ".join(_outcome(r) for r in rs)] for rs in flaky])]


def commits(rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """The commit(s) run.json names, with a warning when the rows come from more than one commit (or some record
    none) or from a checkout with uncommitted changes (`+dirty`)."""
    per_row = Counter(r.get("commit") for r in rows)
    named = meta.get("commits") or ([meta["commit"]] if meta.get("commit") else []) or sorted(c for c in per_row if c)
    if not named:
        return ["**Commit:** not recorded (the cells ran before runs recorded their commit).", ""]
    lines = [f"**Commit{'s' if len(named) > 1 else ''}:** " + ", ".join(f"`{c}`" for c in named) + ".", ""]
    if len(per_row) > 1:
        parts = [f"`{c}` {k} rows" if c else f"no commit recorded {k} rows" for c, k in per_row.most_common()]
        lines += [f"**Warning:** the rows come from {len(per_row)} commits ({', '.join(parts)}): the figures mix "
                  "versions of crossbuild.", ""]
    dirty = sorted(c for c in {*per_row, *named} if c and c.endswith("+dirty"))
    if dirty:
        lines += [f"**Warning:** {', '.join(f'`{c}`' for c in dirty)}: cells ran from a checkout with uncommitted "
                  "changes, so the commit does not say exactly what ran.", ""]
    return lines


def estimates(rows: list[dict[str, Any]], meta: dict[str, Any], results_dir: Path) -> str:
    """The population the rates estimate, from the corpus folder the run used: run.json's `corpus` (or the rows'),
    else the folder found whose manifests hold every project of the run at its version."""
    ran = {r["project"]: r.get("version") for r in rows}
    recorded = meta.get("corpus") or next(iter({r["corpus"] for r in rows if r.get("corpus")}), None)
    if recorded:
        folder, how = Path(recorded), ""
        if not folder.is_dir():
            return f"corpus `{recorded}` (run.json names it, but it is not here: what it estimates is unknown)."
    else:
        found = _infer_corpus(ran, list(meta.get("projects") or []), results_dir)
        if found is None:
            return ("unknown: run.json does not name the corpus folder and no folder here holds every project of the "
                    "run (a random sample's folder has an index.json naming its population).")
        folder, mismatched = found
        how = (f" The corpus folder is inferred: run.json does not name it, and `{_shown(folder)}` is the smallest "
               "folder here whose manifests hold every project of the run"
               + (f", though {mismatched} versions differ (the folder changed since)." if mismatched else "."))
    index = _index(folder)
    names = _manifests(folder)
    k = len(set(ran) & set(names)) or len(ran)
    pop, sample = (index or {}).get("population") or {}, (index or {}).get("sample")
    if index is not None and sample:
        text = (f"estimates the population of {pop.get('size', '?')} projects ({RULE}), sample of "
                f"{sample.get('n', len(names))}, seed {sample.get('seed', '?')} (`{_shown(folder)}`)")
        if k < int(sample.get("n") or len(names)):
            text += (f"; this run covers {k} of the sample's projects, so it estimates the population only if the "
                     "others are missing at random")
    elif index is not None:
        size = pop.get("size", len(names))
        text = (f"the whole population of {size} projects ({RULE}; a census, not a sample) (`{_shown(folder)}`)"
                if k >= size else f"{k} of the population's {size} projects ({RULE}), not drawn at random: no "
                f"population estimate (`{_shown(folder)}`)")
    else:
        text = (f"the {len(names)} hand-picked projects of `{_shown(folder)}` (not a random sample: no population "
                "estimate)" + (f"; this run covers {k} of them" if k < len(names) else ""))
    return text + "." + how


def _index(folder: Path) -> dict[str, Any] | None:
    try:
        index = json.loads((folder / "index.json").read_text())
    except (OSError, ValueError):
        return None
    return index if isinstance(index, dict) else None


def _manifests(folder: Path) -> dict[str, str | None]:
    """Project name -> pinned version of a corpus folder's manifests (a generated folder's index lists them)."""
    written = (_index(folder) or {}).get("written")
    if isinstance(written, list) and written:
        return dict((w.split(" ", 1)[0].split("=", 1) + [None])[:2] for w in written)  # "name=version system ..."
    out: dict[str, str | None] = {}
    for f in sorted(folder.glob("*.toml")):
        try:
            m = tomllib.loads(f.read_text())
        except (OSError, ValueError):
            continue
        source = str(m.get("source", ""))
        out[str(m.get("name", f.stem))] = m.get("version") or (source.split("=", 1)[1] if "=" in source else None)
    return out


def _infer_corpus(ran: dict[str, str | None], listed: list[str],
                  results_dir: Path) -> tuple[Path, int] | None:
    """The smallest corpus folder (under a `corpus/` of the working directory, this checkout or a folder around the
    results) holding every project of the run, preferring one whose versions match the rows'; with how many differ."""
    roots = [Path.cwd() / "corpus", Path(__file__).resolve().parents[3] / "corpus",
             *(p / "corpus" for p in results_dir.resolve().parents)]
    best: tuple[int, int, str, Path] | None = None
    for root in dict.fromkeys(r.resolve() for r in roots if r.is_dir()):
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            names = _manifests(folder)
            if not names or not set(ran) | set(listed) <= set(names):
                continue
            mismatched = sum(1 for p, v in ran.items() if v and names[p] and v != names[p])
            key = (mismatched, len(names), str(folder), folder)
            best = key if best is None or key[:3] < best[:3] else best
    return (best[3], best[0]) if best else None


def _shown(folder: Path) -> str:
    try:
        return str(folder.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(folder)
