"""What a measured table measured: its budget (input lengths, model size, training steps, batch,
seeds) and its hardware (the device, the host CPU, the library versions), read from the runs'
resolved configs, task facts and device records, never from typed text. Every accuracy output
states it (docs/results.md "Budget and hardware")."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from lra.leaderboard import names
from lra.leaderboard.load import task_columns

# The libraries whose versions a page and caption name (a result file records more).
VERSION_KEYS = ("jax", "jaxlib", "flax", "optax")

# The budget behind the published LRA-protocol rows (LRA's paper, Section 3 and its configs): what
# a reader needs beside a measured row of another budget.
LRA_PUBLISHED_BUDGET = ("LRA's budget: ListOps lengths 500-2,000, depth ≤ 10, a 4 x 512 model, "
                        "5,000 steps; Text 4,000 bytes; Retrieval 2 x 4,000 bytes; Image and "
                        "Pathfinder 1,024 pixels")
MODERN_PUBLISHED_BUDGET = ("each paper's own budget: full-length inputs, models of 4-12 layers, "
                           "10-100x LRA's steps")


def _count(n: int) -> str:
    return f"{n:,}"


def data_words(record: dict[str, Any]) -> str:
    """The inputs of one run: ``lengths 20-150, depth ≤ 6`` (a generated ListOps), else the
    task's input length (``length 1,024``)."""
    data = (record.get("config") or {}).get("data") or {}
    facts = record.get("task_facts") or {}
    if data.get("min_length") is not None and data.get("max_length") is not None:
        words = f"lengths {_count(data['min_length'])}-{_count(data['max_length'])}"
    elif facts.get("max_len"):
        words = f"length {_count(facts['max_len'])}"
    else:
        words = "length unrecorded"
    if data.get("max_depth") is not None:
        words += f", depth ≤ {data['max_depth']}"
    return words


def model_words(record: dict[str, Any]) -> str:
    """``2 × 64`` (layers × width) of one run's resolved model config."""
    model = (record.get("config") or {}).get("model") or {}
    layers, width = model.get("num_layers"), model.get("emb_dim")
    return f"{layers} × {width}" if layers and width else "size unrecorded"


def train_words(record: dict[str, Any]) -> str:
    train = (record.get("config") or {}).get("train") or {}
    steps, batch = train.get("num_steps"), train.get("batch_size")
    return (f"{_count(steps)} steps" if steps else "steps unrecorded") + (
        f" of batch {batch}" if batch else "")


def _either(values: list[str]) -> str:
    """One value, or every distinct one (most common first) joined by " or "."""
    counts = Counter(values)
    return " or ".join(sorted(counts, key=lambda v: (-counts[v], v)))


def _seeds(runs: list[dict[str, Any]]) -> str:
    """The usual number of seeds of a cell (a cell: a task and a row), ``3 seeds``."""
    seeds = Counter(len({r["seed"] for r in runs if (r["task"], r.get("_row")) == key})
                    for key in {(r["task"], r.get("_row")) for r in runs})
    n = max(seeds, key=lambda k: (seeds[k], k))
    return f"{n} seed{'' if n == 1 else 's'}" + (" (most cells)" if len(seeds) > 1 else "")


def task_budget(runs: list[dict[str, Any]]) -> str:
    """The budget of one task's runs, without the task's name: ``lengths 20-150, depth ≤ 6, a
    2 x 64 model, 1,000 steps of batch 32``. Values that differ between runs are all named."""
    return (f"{_either([data_words(r) for r in runs])}, a {_either([model_words(r) for r in runs])} "
            f"model, {_either([train_words(r) for r in runs])}")


def budgets(runs: list[dict[str, Any]]) -> dict[str, str]:
    """{task: its budget and the seeds} of a table's runs (a CSV row's budget)."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        by_task[r["task"]].append(r)
    return {t: f"{task_budget(rs)}; {_seeds(rs)}" for t, rs in by_task.items()}


def budget(runs: list[dict[str, Any]]) -> str:
    """The budget of a table's runs, in words: per task (LRA's order) its inputs, model and
    steps, then the seeds: ``ListOps lengths 20-150, depth ≤ 6, a 2 x 64 model, 1,000 steps of
    batch 32; 3 seeds``."""
    if not runs:
        return ""
    present = {r["task"] for r in runs}
    order = [t for t in task_columns([{"task": t} for t in present]) if t in present]
    per_task = "; ".join(f"{names.task_name(t)} {task_budget([r for r in runs if r['task'] == t])}"
                         for t in order)
    return f"{per_task}; {_seeds(runs)}"


def _cores(n: Any) -> str:
    return f"{n} core{'' if n == 1 else 's'}"


def hardware(runs: list[dict[str, Any]]) -> str:
    """The hardware and libraries of a table's runs, from their device and version records:
    ``1 CPU (AMD EPYC, 2 cores); jax 0.10.2, flax 0.12.8, ...``. On CPU the host's model is
    named (several: each, with its cores); runs written before the host was recorded are
    counted as unrecorded."""
    kinds, hosts, unrecorded = [], defaultdict(set), 0
    for r in runs:
        d = r.get("device") or {}
        kind = "CPU" if d.get("kind") == "cpu" else str(d.get("kind", "device"))
        count = d.get("count", 1)
        kinds.append(f"{count} × {kind}" if count != 1 else f"1 {kind}")
        host = d.get("host")
        if d.get("platform", d.get("kind")) != "cpu":
            continue
        if host:
            hosts[str(host.get("cpu"))].add(host.get("cores"))
        else:
            unrecorded += 1
    models = [f"{cpu}, {' or '.join(_cores(c) for c in sorted(cores, key=str))}"
              for cpu, cores in sorted(hosts.items())]
    if unrecorded:
        models.append(f"{unrecorded} of {len(runs)} runs unrecorded" if models else "model unrecorded")
    versions = []
    for key in VERSION_KEYS:
        found = sorted({str((r.get("versions") or {}).get(key)) for r in runs
                        if (r.get("versions") or {}).get(key)})
        if found:
            versions.append(f"{key} {' or '.join(found)}")
    return (_either(kinds) + (f" ({'; '.join(models)})" if models else "")
            + ("; " + ", ".join(versions) if versions else ""))
