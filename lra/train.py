"""The trainer: one pure, jitted ``train_step`` and the loop around it, for every task and family.

``train_and_evaluate(config, workdir, ...)`` trains, validates every ``train.eval_every`` steps,
records test accuracy at the best-validation step and at the last step, checkpoints with orbax and
writes one result file. Re-running the same command in the same work directory resumes from the last
verified checkpoint (bit-identically on the same device count: data order and randomness are
functions of (seed, step)); once the run has completed it reports the existing result instead.
SIGTERM, SIGINT and SIGUSR2 save a checkpoint and stop cleanly (``lra.stop_signals``). The work
directory is locked while a run uses it, and the splits are checked (not empty, as many examples
as the config asks for) before step 1.

The train state is {step, params, batch_stats, opt_state}: ``batch_stats`` holds BatchNorm's running
statistics (``nnx.BatchStat``, empty unless ``model.norm=batch``). Each step returns them updated,
evaluation runs on them, and checkpoints save and restore them with the parameters (replicated
across devices like the parameters).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.experimental import multihost_utils
from tqdm.auto import tqdm

from lra import data_fingerprint, results, sharding, stop_signals, tasks, xla_cpu
from lra import workdir as workdir_lib
from lra.checkpoint import (
    CheckpointError,
    Checkpoints,
    check_same_config,
    disk_full,
    quiet_background_errors,
)
from lra.config import Config
from lra.data_pipeline import TrainBatches, eval_batches
from lra.encoder import build_model
from lra.metrics_log import AtChance, MetricsLog
from lra.optim import learning_rate, optimizer


class NonFiniteError(RuntimeError):
    """The loss or the gradient became NaN/inf; the message names the step."""


# ----------------------------------------------------------------------------------------------
# Pure functions: the loss, one training step, one evaluation step.


def _reseed(model: nnx.Module, rng: jax.Array) -> None:
    """Every random stream of the model (dropout, feature redraws) from this step's key."""
    nnx.reseed(model, dropout=jax.random.fold_in(rng, 0), default=jax.random.fold_in(rng, 1))


def _loss(model: nnx.Module, batch):
    """(mean cross-entropy, accuracy) over the batch's examples, or, where the batch carries a
    ``target_mask`` (a task with per-position targets, ``tasks.Task.per_position``), over its
    counted positions."""
    logits = model(batch, deterministic=False)
    if "target_mask" in batch:
        counted = batch["target_mask"].astype(jnp.float32)
        n = jnp.maximum(jnp.sum(counted), 1.0)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
        correct = (jnp.argmax(logits, -1) == batch["targets"]).astype(jnp.float32)
        return jnp.sum(ce * counted) / n, jnp.sum(correct * counted) / n
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()
    accuracy = jnp.mean(jnp.argmax(logits, -1) == batch["targets"])
    return loss, accuracy


def split_model(model: nnx.Module):
    """(graphdef, params, batch_stats, rest): the trained parameters (``nnx.Param``), BatchNorm's
    running statistics (``nnx.BatchStat``; an empty State when the model has none) and everything
    else (random streams, fixed positional tables). Params and batch statistics are the train
    state (checkpointed); ``rest`` is rebuilt from the config on every start."""
    return nnx.split(model, nnx.Param, nnx.BatchStat, ...)


def make_train_step(graphdef, tx: optax.GradientTransformation, grad_accum: int,
                    lr_schedule: Callable) -> Callable:
    """train_step(state, rest, batch, rng) -> (state, metrics);
    state = {step, params, batch_stats, opt_state}.

    The step returns the batch statistics the forward pass updated (BatchNorm's running mean and
    variance), so that evaluation and checkpoints see them. ``batch_stats`` may be left out of a
    state only by models without any (then ``rest`` must hold none either: a BatchStat in ``rest``
    would be updated and thrown away, so it is refused).

    With ``grad_accum`` = K the batch is split into K equal micro-batches whose mean gradient equals
    the full batch's, so the optimizer sees the same update with 1/K of the activation memory. The
    running statistics are updated once per micro-batch, in order (as K smaller steps of a BatchNorm
    would; the statistics normalising each micro-batch are that micro-batch's own).
    """
    value_and_grad = nnx.value_and_grad(_loss, argnums=nnx.DiffState(0, nnx.Param), has_aux=True)

    def grad_fn(params, batch_stats, rest, batch, rng):
        model = nnx.merge(graphdef, params, batch_stats, rest)
        _reseed(model, rng)
        (loss, accuracy), grads = value_and_grad(model, batch)
        # the forward pass wrote the new running statistics into the model's BatchStat variables
        return (loss, accuracy), grads, nnx.state(model, nnx.BatchStat)

    def train_step(state, rest, batch, rng):
        params = state["params"]
        if "batch_stats" in state:
            batch_stats = state["batch_stats"]
        elif jax.tree.leaves(nnx.filter_state(rest, nnx.BatchStat)):
            raise ValueError("the model has BatchNorm statistics: keep them in the train state "
                             "(state['batch_stats'], see split_model), not in rest")
        else:
            batch_stats = nnx.State({})
        if grad_accum == 1:
            (loss, accuracy), grads, batch_stats = grad_fn(params, batch_stats, rest, batch, rng)
        else:
            micro = jax.tree.map(
                lambda a: a.reshape(grad_accum, a.shape[0] // grad_accum, *a.shape[1:]), batch)

            def accumulate(carry, xs):
                # params and rest ride in the carry so that the model is rebuilt at this trace
                # level (nnx refuses to mutate rng state created outside the scan).
                p, s, r, g_sum, l_sum, a_sum = carry
                i, mb = xs
                (l, a), g, s = grad_fn(p, s, r, mb, jax.random.fold_in(rng, i))
                return (p, s, r, jax.tree.map(jnp.add, g_sum, g), l_sum + l, a_sum + a), None

            zeros = jax.tree.map(jnp.zeros_like, params)
            (_, batch_stats, _, grads, loss, accuracy), _ = jax.lax.scan(
                accumulate, (params, batch_stats, rest, zeros, 0.0, 0.0),
                (jnp.arange(grad_accum), micro))
            grads = jax.tree.map(lambda g: g / grad_accum, grads)
            loss, accuracy = loss / grad_accum, accuracy / grad_accum
        updates, opt_state = tx.update(grads, state["opt_state"], params)
        new_state = {"step": state["step"] + 1, "params": optax.apply_updates(params, updates),
                     "opt_state": opt_state}
        if "batch_stats" in state:
            new_state["batch_stats"] = batch_stats
        metrics = {"loss": loss, "accuracy": accuracy, "grad_norm": optax.tree.norm(grads),
                   "lr": lr_schedule(state["step"])}
        return new_state, metrics

    return train_step


def make_eval_step(graphdef) -> Callable:
    """eval_step(params, batch_stats, rest, batch) -> weighted sums {correct, loss, count,
    examples}; the model runs deterministically on the trained running statistics. ``count`` is
    the examples counted, or with per-position targets (a ``target_mask`` in the batch) the
    positions counted, which accuracy and loss average over."""

    def eval_step(params, batch_stats, rest, batch):
        model = nnx.merge(graphdef, params, batch_stats, rest)
        logits = model(batch, deterministic=True)
        w = batch["weights"]
        examples = jnp.sum(w)
        if "target_mask" in batch:
            w = w[:, None] * batch["target_mask"].astype(jnp.float32)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
        correct = (jnp.argmax(logits, -1) == batch["targets"]).astype(jnp.float32)
        return {"correct": jnp.sum(correct * w), "loss": jnp.sum(loss * w), "count": jnp.sum(w),
                "examples": examples}

    return eval_step


# ----------------------------------------------------------------------------------------------
# The train state: model, optimizer, sharded state and the jitted step, built in one place.


class TrainSetup(NamedTuple):
    """What ``create_train_state`` builds; ``state`` and ``rest`` are ``train_step``'s arguments."""

    graphdef: nnx.GraphDef
    state: dict[str, Any]  # {step, params, batch_stats, opt_state}, replicated over the mesh
    rest: nnx.State  # random streams and fixed tables (split_model), replicated
    tx: optax.GradientTransformation
    train_step: Callable  # jitted: (state, rest, batch, rng) -> (state, metrics); donates state


INITS = ("jit", "eager", "abstract")


def create_train_state(config: Config, task: tasks.Task, mesh, *, init: str = "jit",
                       max_len: int | None = None) -> TrainSetup:
    """The model of ``config`` on ``task``, its optimizer and train state laid out on ``mesh``, and
    the jitted ``train_step`` (parameters and state replicated, the batch split along ``data``, the
    state donated). The trainer, the bench and the tests build through here.

    The model's random streams start from ``config.seed`` (parameters, dropout, feature redraws).
    ``init`` says how the state comes to exist:

    * ``"jit"`` (the trainer): initialised under ``jax.jit`` straight into the mesh layout; with
      several processes the replicated arrays span devices this process cannot address, which rules
      out ``device_put`` of host values.
    * ``"eager"`` (the bench): built op by op, then placed with ``device_put``; the small eager
      programs are shared by every model of a process, where a jitted initialiser compiles per model.
    * ``"abstract"``: ``jax.ShapeDtypeStruct`` leaves only, nothing allocated (to lower and size
      the step before deciding to run it).

    ``max_len`` overrides the task's longest input (``build_model``).
    """
    if init not in INITS:
        raise ValueError(f"init={init!r}: choose from {', '.join(INITS)}")
    t = config.train
    repl = sharding.replicated(mesh)

    def build():
        return build_model(config, task, max_len=max_len, rngs=nnx.Rngs(
            params=config.seed, dropout=config.seed, default=config.seed))

    def initial():
        _, params, batch_stats, rest = split_model(build())
        return {"step": jnp.zeros((), jnp.int32), "params": params, "batch_stats": batch_stats,
                "opt_state": tx.init(params)}, rest

    abstract = nnx.eval_shape(build)
    graphdef = split_model(abstract)[0]
    tx = optimizer(t, abstract)  # the module tree gives the parameter groups (lra/optim.py)
    if init == "jit":
        state, rest = jax.jit(initial, out_shardings=repl)()
    elif init == "eager":
        state, rest = jax.device_put(initial(), repl)
    else:
        state, rest = jax.tree.map(_as_struct, nnx.eval_shape(initial))
    return TrainSetup(graphdef, state, rest, tx, jit_train_step(graphdef, tx, t, mesh))


def jit_train_step(graphdef, tx: optax.GradientTransformation, t, mesh,
                   compiler_options: dict[str, str] | None = None) -> Callable:
    """The jitted step: parameters and state replicated, the batch split along ``data``, the state
    donated; ``compiler_options`` (e.g. ``lra.xla_cpu.OPTIONS["off"]``) go to XLA."""
    repl = sharding.replicated(mesh)
    return jax.jit(make_train_step(graphdef, tx, t.grad_accum, learning_rate(t)),
                   in_shardings=(repl, repl, sharding.batch_sharding(mesh), repl),
                   out_shardings=(repl, repl), donate_argnums=(0,),
                   compiler_options=compiler_options)


def jit_eval_step(graphdef, mesh) -> Callable:
    """The jitted evaluation step: parameters, statistics and ``rest`` replicated, the batch split
    along ``data``."""
    repl = sharding.replicated(mesh)
    return jax.jit(make_eval_step(graphdef), in_shardings=(repl, repl, repl,
                                                           sharding.batch_sharding(mesh)),
                   out_shardings=repl)


def _as_struct(leaf):
    return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype) if hasattr(leaf, "shape") else leaf


# ----------------------------------------------------------------------------------------------
# The loop.


@dataclass
class History:
    """What a run must remember across restarts (stored in each checkpoint's metadata)."""

    best_val_accuracy: float = -1.0
    best_step: int = -1
    test_at_best: dict[str, float] = field(default_factory=dict)
    last_val: dict[str, float] = field(default_factory=dict)
    last_train: dict[str, float] = field(default_factory=dict)
    wall_time_s: float = 0.0
    train_time_s: float = 0.0
    timed_steps: int = 0
    val_curve: list[list[float]] = field(default_factory=list)  # [step, accuracy, loss] per evaluation
    xla_cpu_fusions: str = ""  # "on"/"off": the step program a resumed run must keep (lra.xla_cpu)
    # [step it started from, commit, dirty] of each session whose code differs from the one before:
    # a run resumed under other code says so in its result file (lra.results.build_record).
    code: list[list] = field(default_factory=list)


# A stop signal seen before this session's first step (set-up, compilation, restoring): nothing
# new to save. Raised at a safe point before the loop, never from the handler.
_Stopped, _check_stop = stop_signals.Stopped, stop_signals.check


def evaluate_split(eval_fn, state, rest, source, batch_size: int, mesh, *, max_batches: int = 0,
                   before_batch: Callable[[], None] | None = None) -> dict:
    """{accuracy, loss, examples} of ``source`` under the jitted ``eval_fn`` (``jit_eval_step``):
    the batches of ``eval_batches`` (the first ``max_batches`` where that is > 0), each one's
    correct count, loss sum and count summed in float64, in batch order. The one evaluation loop:
    validation and test here and ``lra.evaluate`` run it, so that a checkpoint evaluated again
    scores as its run recorded, bit for bit. ``before_batch``: called before each batch (a stop
    check, a progress bar)."""
    sums = {"correct": 0.0, "loss": 0.0, "count": 0.0, "examples": 0.0}
    data_sharding = sharding.batch_sharding(mesh)
    for batch in eval_batches(source, batch_size, max_batches=max_batches,
                              process_index=jax.process_index(),
                              process_count=jax.process_count()):
        if before_batch is not None:
            before_batch()
        out = eval_fn(state["params"], state["batch_stats"], rest,
                      sharding.to_global(batch, data_sharding))
        for k in sums:
            sums[k] += float(out[k])
    n = max(sums["count"], 1.0)
    return {"accuracy": sums["correct"] / n, "loss": sums["loss"] / n,
            "examples": int(sums["examples"])}


def _evaluate(eval_fn, state, rest, source, config: Config, mesh, *, max_batches=0) -> dict:
    return evaluate_split(eval_fn, state, rest, source, config.train.batch_size, mesh,
                          max_batches=max_batches)


def params_digest(params) -> str:
    """sha256 of every parameter's bytes in tree order (replicated: this process's copy suffices)."""
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(params):
        h.update(np.asarray(leaf.addressable_data(0)).tobytes())
    return h.hexdigest()


def split_class_counts(splits: dict[str, Any], num_classes: int) -> dict[str, list[int]]:
    """{split: examples per class} of the splits whose source holds its labels as an array
    (``targets``: ListOps); the leaderboard's at-chance rule compares a seed with the majority
    class of its test split (docs/results.md "What a cell shows"). Others are left out: counting
    them would read every example."""
    out = {}
    for name, source in splits.items():
        targets = getattr(source, "targets", None)
        if isinstance(targets, np.ndarray) and targets.ndim == 1:
            out[name] = np.bincount(targets.astype(np.int64), minlength=num_classes).tolist()
    return out


def train_and_evaluate(config: Config, workdir: Path, *, data_dir: Path,
                       results_dir: Path | None = None, progress: bool = True,
                       force: bool = False, xla_cpu_fusions: str = "auto",
                       overrides: list[str] | tuple[str, ...] = (),
                       wandb: Any = None, config_file: dict[str, str] | None = None
                       ) -> dict[str, Any]:
    """Train ``config`` in ``workdir`` (resuming if it holds a checkpoint); return the result record.

    The result file is written under ``results_dir`` when one is given (process 0 only). A work
    directory whose run has completed returns that run's record (``status`` "existing") and
    writes nothing, unless ``force`` (the earlier run's files are moved aside, training restarts).
    ``xla_cpu_fusions``: "auto", "on" or "off", how the step is compiled on CPU (``lra.xla_cpu``).
    ``overrides``: the ``--set KEY=VALUE`` pairs the config was resolved with (the result's
    ``overrides`` names their keys; ``lra.results.overrides``). ``config_file``: the ``--config``
    file's path and SHA-256 the result records (``lra.config_file.ConfigFile.record``).

    SIGTERM, SIGINT and SIGUSR2 (``lra.stop_signals``) stop the run at the next safe point with
    the work directory resumable: the record's ``status`` is then "preempted".
    """
    xla_cpu.resolve(xla_cpu_fusions)  # a bad value fails here, before anything is built
    workdir, data_dir = Path(workdir).absolute(), Path(data_dir).absolute()
    results_dir = Path(results_dir).absolute() if results_dir is not None else None
    workdir_lib.not_a_file(workdir, "--workdir")
    workdir_lib.not_a_file(data_dir, "--data-dir")
    workdir.mkdir(parents=True, exist_ok=True)
    lock = workdir_lib.lock(workdir) if jax.process_index() == 0 else None
    opened: list[Checkpoints] = []
    # The handlers go in before anything slow (data, compilation, restoring); they only set a
    # flag, which the run looks at between stages and between steps.
    with stop_signals.handling() as stops:
        try:
            done = workdir_lib.finished(workdir)
            if done is not None and not force:
                check_same_config(done["config"], config.to_dict())
                _check_same_data(done, config, workdir, data_dir)
                return _existing(done, workdir, results_dir)
            if force and jax.process_index() == 0 and (moved := workdir_lib.move_aside(workdir)):
                print(f"--force: the earlier run's files are moved to {moved}; training from "
                      f"step 0", file=sys.stderr)
            if results_dir is not None and jax.process_index() == 0:
                workdir_lib.check_writable(results_dir)  # before step 1, not after training
            return _train(config, workdir, data_dir=data_dir, results_dir=results_dir,
                          progress=progress, opened=opened, stops=stops,
                          xla_cpu_fusions=xla_cpu_fusions, overrides=list(overrides),
                          wandb=wandb, config_file=config_file)
        except _Stopped as stop:
            for ckpt in opened:
                ckpt.wait()
            # While preparing the data: on a line of its own (it may end a progress bar mid-line).
            when = (f"\n{stop.args[0]}: stopped {stop.args[1]}" if len(stop.args) > 1
                    else f"{stop.args[0]}: stopped before this session's first step")
            print(f"{when}; nothing new to save; re-run the same command to go on", file=sys.stderr)
            return {"status": "preempted", "signal": stop.args[0], "step": None}
        except BaseException as error:
            _end_saves_after(error, opened)
            raise
        finally:
            if lock is not None:
                lock.close()


def _end_saves_after(error: BaseException, opened: list[Checkpoints]) -> None:
    """After a failure (disk full, a second Ctrl-C, ...): let the saves under way complete and be
    verified, so that a re-run resumes from them, and end orbax's writer threads (left running,
    they fail noisily at interpreter shutdown). The original error is the one reported, once, by
    the caller: errors met here are dropped."""
    if opened and disk_full(error):
        quiet_background_errors()
    for ckpt in opened:
        for end in (ckpt.wait, ckpt.close):
            try:
                end()
            except BaseException:
                pass


def _under(path: Path, folder: Path) -> bool:
    return Path(path).absolute().is_relative_to(Path(folder).absolute())


def _check_same_data(record: dict[str, Any], config: Config, workdir: Path, data_dir: Path) -> None:
    """Refuse to report a completed run as the result of the data present now when it was made
    on other data (``lra.data_fingerprint``; the sweep's skip check compares the same way). Files
    the generator would make again may be absent; data that cannot be read at all without preparing
    it is not compared (nothing is read, nothing is trained)."""
    data = record.get("data") if isinstance(record.get("data"), dict) else {}
    if not isinstance(data.get("fingerprint"), dict):
        return  # a run from before fingerprints existed
    try:
        task = tasks.build(config.task, data_dir, **config.data)
        now = data_fingerprint.fingerprint(task.provenance(), data_dir)
    except (tasks.DataError, OSError):
        return
    differ = data_fingerprint.difference(data["fingerprint"], now, absent_ok_if_generated=True)
    if differ:
        raise data_fingerprint.DataMismatchError(
            f"{workdir} holds a run completed on other data than the data now present ({differ}); "
            f"use --force to train again on this data, or the data directory it was trained on")


def _existing(record: dict[str, Any], workdir: Path, results_dir: Path | None) -> dict[str, Any]:
    """Report the completed run of ``workdir``. Its result file is written only where it is
    missing from ``results_dir``: the file it names was never written (killed between the two
    writes), or ``results_dir`` is not where it went (a copy goes there: "done" means under the
    results directory the user gave)."""
    path = Path(record["result_file"]).absolute() if record.get("result_file") else None
    clean = {k: v for k, v in record.items() if k != "result_file"}
    if results_dir is not None and jax.process_index() == 0:
        target = (path if path is not None and _under(path, results_dir)
                  else results_dir / "runs" / path.name if path is not None
                  else results.run_path(results_dir, record))
        if not target.is_file():
            # Killed between result.json and the result file (or the disk was full), or another
            # results directory: the measured record, written once.
            with workdir_lib.naming(target):
                results.write_new(target, clean)
            why = "missing" if target == path else "copied"
            print(f"{workdir} had completed; its {why} result file is written now: {target}",
                  file=sys.stderr)
            return {**record, "result_file": str(target), "status": "existing", "written": True}
        else:
            print(f"{workdir} holds a completed run; nothing is trained or written (use --force "
                  f"to train again from step 0, or another --workdir)", file=sys.stderr)
        return {**record, "result_file": str(target), "status": "existing"}
    print(f"{workdir} holds a completed run; nothing is trained or written (use --force to "
          f"train again from step 0, or another --workdir)", file=sys.stderr)
    return {**record, "status": "existing"}


def _prepare(task: tasks.Task) -> None:
    """``task.prepare()`` (generating or downloading the data can take an hour), stopped at once by
    a stop signal: no XLA runs here, and every data file is written under a temporary name and
    renamed once complete, so the signal raises where the program is (``stop_signals.raising``);
    the generators keep their finished shards, and the re-run goes on from them."""
    try:
        with stop_signals.raising():
            task.prepare()
    except _Stopped as stop:
        raise _Stopped(stop.args[0], "while preparing the data (the parts already complete are "
                                     "kept)") from None


def _data(task: tasks.Task, data_dir: Path) -> tuple[list, tasks.Provenance, dict[str, Any]]:
    """Prepare the task's data on every process, load the splits and check them (before step 1);
    also the data's fingerprint (``lra.data_fingerprint``)."""
    # Process 0 prepares first; the others then find the data (shared filesystem) or make the
    # same deterministic data themselves (separate disks).
    if jax.process_index() == 0:
        _prepare(task)
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices("lra: data prepared")
        if jax.process_index() != 0:
            _prepare(task)
    sources = [task.source(s) for s in ("train", "val", "test")]
    provenance = task.provenance()
    fingerprint = data_fingerprint.fingerprint(provenance, data_dir)
    counts = dict(zip(("train", "val", "test"), map(len, sources)))
    tasks.check_examples(provenance, counts, data_dir)
    if jax.process_index() == 0:
        for note in provenance.notes:
            print(f"note: {note}", file=sys.stderr)
        generator = provenance.generator
        origin = (f"generated by {generator['name']} v{generator['version']}, seed "
                  f"{generator['seed']}" if generator else provenance.origin)
        print(f"data: {data_dir / provenance.folder} ({origin}); examples: "
              + ", ".join(f"{s} {n}" for s, n in counts.items())
              + f"; fingerprint {fingerprint['sha256'][:12]}", file=sys.stderr)
    return sources, provenance, fingerprint


@dataclass
class _Session:
    """What the phases of one training session share: set up by ``_set_up``, the step program
    chosen by ``_compile``."""

    config: Config
    workdir: Path
    task: tasks.Task
    splits: dict[str, Any]  # {"train", "val", "test"}: the sources
    provenance: tasks.Provenance
    fingerprint: dict[str, Any]
    mesh: Any
    graphdef: nnx.GraphDef
    rest: nnx.State
    tx: optax.GradientTransformation
    train_step: Callable
    num_params: int
    ckpt: Checkpoints
    started: float  # when the wall time since the last save began (``tick``)
    eval_step: Callable | None = None
    batches: TrainBatches | None = None
    base_key: Any = None
    fusions: dict[str, Any] = field(default_factory=dict)

    def tick(self, history: History) -> None:
        """Add the wall time since the last tick to ``history``."""
        now = time.perf_counter()
        history.wall_time_s += now - self.started
        self.started = now

    def meta(self, history: History) -> dict[str, Any]:
        # A copy: saves are asynchronous, and the live history moves on while orbax writes.
        return {"config": self.config.to_dict(), "history": asdict(history),
                "data_fingerprint": self.fingerprint}


def _train(config: Config, workdir: Path, *, data_dir: Path, results_dir: Path | None,
           progress: bool, opened: list[Checkpoints], stops: stop_signals.StopSignals,
           xla_cpu_fusions: str, overrides: list[str],
           wandb: Any = None, config_file: dict[str, str] | None = None) -> dict[str, Any]:
    """One training session: set up, resume, compile, the loop, then the result (``_finish``)."""
    started = time.perf_counter()
    source_commit = results.git_commit()  # the code that runs, before anything can change it
    s, state = _set_up(config, workdir, data_dir, stops, started)
    opened.append(s.ckpt)
    state, history = _resume(s.ckpt, config, state, History(), workdir, s.fingerprint)
    _note_code(history, source_commit, int(state["step"]))
    _check_stop(stops, "restore")
    _compile(s, state, history, xla_cpu_fusions)
    _check_stop(stops, "compiled")
    state, step, status, log = _loop(s, state, history, stops, progress=progress,
                                     wandb=wandb)
    if status == "preempted":
        print(f"{stops.requested}: checkpoint saved at step {step} in {s.ckpt.root / 'last'}; "
              f"re-run the same command to resume", file=sys.stderr)
        log.close()
        return {"status": "preempted", "signal": stops.requested, "step": step}
    return _finish(s, state, history, step, log, stops, results_dir=results_dir,
                   overrides=overrides, git=source_commit, config_file=config_file)


def _note_code(history: History, git: dict[str, Any], step: int) -> None:
    """Record this session's code in ``history`` when it differs from the previous session's, and
    warn: the run goes on (its checkpoints are valid), but its result mixes two versions."""
    now = [step, git["commit"], git["dirty"]]
    if history.code and history.code[-1][1:] == now[1:]:
        return
    if history.code and jax.process_index() == 0:
        _, commit, dirty = history.code[-1]
        print(f"warning: steps before {step} ran under commit {commit[:12]}"
              f"{' (uncommitted changes)' if dirty else ''} and this session runs "
              f"{now[1][:12]}{' (uncommitted changes)' if now[2] else ''}; the result file "
              f"records both (git.sessions)", file=sys.stderr)
    history.code.append(now)


def _set_up(config: Config, workdir: Path, data_dir: Path, stops: stop_signals.StopSignals,
            started: float) -> tuple[_Session, dict[str, Any]]:
    """The data (checked), the mesh, the model and its fresh train state, the checkpoints."""
    t = config.train
    _check_stop(stops, "start")
    task = tasks.build(config.task, data_dir, **config.data)
    (train_src, val_src, test_src), provenance, fingerprint = _data(task, data_dir)
    _check_stop(stops, "setup")

    mesh = sharding.make_mesh()
    sharding.check_batch_size(t.batch_size, mesh)
    if t.grad_accum > 1:
        sharding.check_batch_size(t.batch_size // t.grad_accum, mesh,
                                  "train.batch_size / train.grad_accum")
    graphdef, state, rest, tx, train_step = create_train_state(config, task, mesh)
    num_params = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(state["params"]))
    session = _Session(config, workdir, task, {"train": train_src, "val": val_src, "test": test_src},
                       provenance, fingerprint, mesh, graphdef, rest, tx, train_step, num_params,
                       Checkpoints(workdir), started)
    return session, state


def _compile(s: _Session, state, history: History, xla_cpu_fusions: str) -> None:
    """The evaluation step, the batches, and the training step program (compiled and, with "auto",
    timed: ``_choose_step``) unless the resumed run has no step left."""
    t = s.config.train
    data_sharding = sharding.batch_sharding(s.mesh)
    s.eval_step = jit_eval_step(s.graphdef, s.mesh)
    s.batches = TrainBatches(s.splits["train"], t.batch_size, seed=s.config.seed,
                             process_index=jax.process_index(), process_count=jax.process_count())
    s.base_key = jax.random.key(s.config.seed)
    start = int(state["step"])
    if start < t.num_steps:
        stop_signals.test_hook("compile")
        s.train_step, s.fusions = _choose_step(
            xla_cpu_fusions, history, s.train_step,
            lambda options: jit_train_step(s.graphdef, s.tx, t, s.mesh, options), state, s.rest,
            lambda: sharding.to_global(s.batches[start], data_sharding),
            jax.random.fold_in(s.base_key, start))
    else:  # resumed at the last step: nothing to compile or time
        s.fusions = {"choice": history.xla_cpu_fusions or "on", "source": "no step left to run"}
    if jax.process_index() == 0:
        print(f"xla:cpu fusions: {xla_cpu.describe(s.fusions)}", file=sys.stderr)


def _loop(s: _Session, state, history: History, stops: stop_signals.StopSignals, *,
          progress: bool, wandb: Any) -> tuple[Any, int, str, MetricsLog]:
    """Train from the state's step to ``train.num_steps``, or to the first stop signal; validate
    and checkpoint on the way. Returns (state, step, "completed" or "preempted", the open log)."""
    t, config = s.config.train, s.config
    start = int(state["step"])
    log = _metrics_log(s, start, wandb)
    bar = tqdm(total=t.num_steps, initial=start, desc=f"{config.task}/{config.attention}",
               disable=not progress or jax.process_index() != 0, dynamic_ncols=True,
               mininterval=1.0, file=sys.stderr)
    try:
        state, step, status = _steps(s, state, history, stops, log, bar, start)
    except BaseException:
        with contextlib.suppress(Exception):  # a full disk cannot take the last events either
            log.close()
        raise
    s.ckpt.wait()
    s.ckpt.close()
    return state, step, status, log


def _steps(s: _Session, state, history: History, stops: stop_signals.StopSignals,
           log: MetricsLog, bar, start: int) -> tuple[Any, int, str]:
    """``_loop``'s steps: train, log, validate, checkpoint; the last save is started here."""
    t = s.config.train
    data_sharding = sharding.batch_sharding(s.mesh)
    at_chance = AtChance(s.task.chance(1)[0], t.chance_patience)
    status, last_saved, step = "completed", start, start
    while step < t.num_steps:
        s.ckpt.record_checksums()  # of the saves completed in the background
        if step == start + 1:
            stop_signals.test_hook("train")
        if stops.requested:  # the safe point of the loop: between steps
            status = "preempted"
            break
        t0 = time.perf_counter()
        batch = sharding.to_global(s.batches[step], data_sharding)
        state, metrics = s.train_step(state, s.rest, batch, jax.random.fold_in(s.base_key, step))
        loss, grad_norm = float(metrics["loss"]), float(metrics["grad_norm"])
        step += 1
        _check_finite(s.ckpt, step, loss, grad_norm)
        if step > start + 1:  # the first step of a session includes compilation
            history.train_time_s += time.perf_counter() - t0
            history.timed_steps += 1
        history.last_train = {k: float(v) for k, v in metrics.items()}
        if step % t.log_every == 0:
            log.train(step, history.last_train, history.timed_steps, history.train_time_s)
        bar.update(1)
        bar.set_postfix(loss=f"{loss:.3f}", acc=f"{history.last_train['accuracy']:.3f}",
                        val=f"{history.last_val.get('accuracy', float('nan')):.3f}",
                        refresh=False)
        if step % t.eval_every == 0 or step == t.num_steps:
            _validate(s, state, history, step, log, at_chance, bar)
        if step % t.checkpoint_every == 0 and step != last_saved:
            s.tick(history)
            s.ckpt.save("last", step, state, s.meta(history))
            stop_signals.test_hook("save")
            last_saved = step
    bar.close()
    s.tick(history)
    if step != last_saved:
        s.ckpt.save("last", step, state, s.meta(history))
    if stops.requested:
        # It came during the last step's validation or save: the loop has no later safe point.
        # The last step's checkpoint is saved; the re-run only tests it and writes the result.
        status = "preempted"
    return state, step, status


def _metrics_log(s: _Session, start: int, wandb: Any) -> MetricsLog:
    """``metrics.jsonl`` and TensorBoard from ``start`` on (process 0 writes), and wandb if asked
    (``wandb``: a project name or ``lra.tracker.WandbOptions``)."""
    config, tracker = s.config, None
    if wandb and jax.process_index() == 0:
        from lra.tracker import Wandb  # optional: only when asked for

        tracker = Wandb(wandb, s.workdir, name=s.workdir.name, config=config.to_dict())
    return MetricsLog(s.workdir, resume_step=start, enabled=jax.process_index() == 0,
                      run={"task": config.task, "attention": config.attention,
                           "preset": config.preset, "seed": config.seed}, tracker=tracker)


def _check_finite(ckpt: Checkpoints, step: int, loss: float, grad_norm: float) -> None:
    """Raise ``NonFiniteError`` naming the step and the checkpoint kept if either is NaN/inf."""
    if math.isfinite(loss) and math.isfinite(grad_norm):
        return
    ckpt.wait()
    kept = ckpt.newest_verified("last")[0]
    where = (f"the last good checkpoint (step {kept}, verified) is kept in {ckpt.root / 'last'}"
             if kept is not None else "no checkpoint had been written and verified yet")
    raise NonFiniteError(
        f"non-finite {'loss' if not math.isfinite(loss) else 'gradient norm'} at step {step} "
        f"(loss={loss}, grad_norm={grad_norm}); {where}. Lower train.lr or set train.grad_clip.")


def _validate(s: _Session, state, history: History, step: int, log: MetricsLog,
              at_chance: AtChance, bar) -> None:
    """Validate at ``step``; on a new best, evaluate on test and save the ``best`` checkpoint."""
    t = s.config.train
    stop_signals.test_hook("eval")
    val = _evaluate(s.eval_step, state, s.rest, s.splits["val"], s.config, s.mesh,
                    max_batches=t.eval_batches)
    history.last_val = {**val, "step": step}
    log.write(step, "val", val)
    history.val_curve.append([step, val["accuracy"], val["loss"]])
    notice = at_chance.update(step, val["accuracy"], s.task.chance(val["examples"])[1])
    if notice and jax.process_index() == 0:
        bar.write(notice, file=sys.stderr)
    if val["accuracy"] > history.best_val_accuracy:
        test = _evaluate(s.eval_step, state, s.rest, s.splits["test"], s.config, s.mesh)
        history.best_val_accuracy, history.best_step = val["accuracy"], step
        history.test_at_best = test
        log.write(step, "test_at_best_val", test)
        s.ckpt.save("best", step, state, s.meta(history))


def _finish(s: _Session, state, history: History, step: int, log: MetricsLog,
            stops: stop_signals.StopSignals, *, results_dir: Path | None, overrides: list[str],
            git: dict[str, Any], config_file: dict[str, str] | None = None) -> dict[str, Any]:
    """Test at the last step, then the result record: ``result.json`` and the result file.

    A stop signal that comes before the writes (during the test evaluation) stops the run with
    nothing written ("preempted": the last step's checkpoint is saved, so the re-run tests it and
    writes the result); one that comes during the writes (milliseconds) lets them complete, and
    the run says that it has completed despite the signal."""
    test_last = _evaluate(s.eval_step, state, s.rest, s.splits["test"], s.config, s.mesh)
    log.write(step, "test_at_last", test_last)
    tracked = log.tracker.record() if log.tracker is not None else None
    log.close()
    stop_signals.test_hook("finish")
    if stops.requested:
        print(f"{stops.requested}: stopped before the result was written; the checkpoint of the "
              f"last step ({step}) is saved in {s.ckpt.root / 'last'}; re-run the same command to "
              f"test it and write the result", file=sys.stderr)
        return {"status": "preempted", "signal": stops.requested, "step": step}
    stop_signals.test_hook("result")
    record = results.build_record(
        s.config, overrides=overrides, task_facts=s.task.describe(), history=history,
        provenance=s.provenance, fingerprint=s.fingerprint,
        examples={k: len(v) for k, v in s.splits.items()},
        class_counts=split_class_counts(s.splits, s.task.num_classes),
        test_last=test_last, steps=step, num_params=s.num_params,
        params_sha256=params_digest(state["params"]),
        batch_stats_sha256=params_digest(state["batch_stats"]), fusions=s.fusions,
        git=git, status="completed", tracker=tracked, config_file=config_file)
    if jax.process_index() == 0:
        # result.json first, naming the result file: a run killed between the two writes finds
        # it on re-run and writes that file once (never a second result for one run).
        path = results.run_path(results_dir, record) if results_dir is not None else None
        with workdir_lib.naming(s.workdir / workdir_lib.RESULT_FILE):  # a full disk names it
            results.write_json_atomic(s.workdir / workdir_lib.RESULT_FILE,
                                      {**record, **({"result_file": str(path)} if path else {})})
        if path is not None:
            with workdir_lib.naming(path):
                results.write_new(path, record)
            record["result_file"] = str(path)
    if stops.requested:
        print(f"{stops.requested} came while the result was being written: the run has completed "
              f"and its result is written; nothing is left to resume", file=sys.stderr)
        record["signal"] = stops.requested
    return record


def _choose_step(requested: str, history: History, default_step: Callable,
                 make_step: Callable[[dict[str, str] | None], Callable], state, rest,
                 first_batch: Callable[[], Any], key) -> tuple[Callable, dict[str, Any]]:
    """The step program to train with (``lra.xla_cpu``) and its record for the result file.

    "auto" compiles the step with and without XLA:CPU's YNN fusions and times both on copies of the
    state (the step donates it; nothing of the run moves). The choice goes into ``history``, so a
    resumed run keeps the program it started with.
    """
    choice, source = xla_cpu.resolve(requested, history.xla_cpu_fusions or None)
    if source == "requested" and history.xla_cpu_fusions not in ("", choice) \
            and jax.process_index() == 0:
        print(f"warning: this run started with XLA:CPU fusions {history.xla_cpu_fusions} and goes "
              f"on with {choice} as requested: from here it will not match an uninterrupted run "
              f"bit for bit", file=sys.stderr)
    steps = {"on": default_step}

    def step(variant: str) -> Callable:
        if variant not in steps:
            steps[variant] = make_step(xla_cpu.OPTIONS[variant])
        return steps[variant]

    record: dict[str, Any] = {"choice": choice, "source": source}
    if choice == "auto":
        choice, medians = xla_cpu.pick_step(step, state, rest, first_batch(), key)
        record = {"choice": choice, "source": source, "step_s": medians}
    if source in ("auto", "requested", "resumed"):
        history.xla_cpu_fusions = choice
    return step(choice), record


def _resume(ckpt: Checkpoints, config: Config, state, history: History, workdir: Path,
            fingerprint: dict[str, Any]):
    """Restore the newest verified ``last`` checkpoint, if any (``state``/``history`` otherwise);
    refuse one made on other data than ``fingerprint`` describes."""
    if not ckpt.steps("last"):
        if jax.process_index() == 0 and (gone := ckpt.forget_deleted()):
            print(f"warning: {ckpt.root / 'last'} no longer holds the checkpoints recorded in "
                  f"{ckpt.sums} ({', '.join(gone)}); starting again from step 0", file=sys.stderr)
        return state, history
    step, skipped = ckpt.newest_verified("last")
    for line in skipped:
        print(f"warning: not resuming from {line}" + (
            f"; moved to {ckpt.root / 'rejected'} (kept, not used); resuming from the verified "
            f"checkpoint of step {step} instead" if step is not None else ""), file=sys.stderr)
    if step is None:
        raise CheckpointError(f"no checkpoint in {ckpt.root / 'last'} verifies; delete "
                              f"{ckpt.root} to start over from step 0")
    for which in ("last", "best"):  # newer than the resumed step: saved again on the way
        ckpt.set_aside(which, [s for s in ckpt.steps(which) if s > step])
    meta = ckpt.restore_meta("last", step)
    check_same_config(meta["config"], config.to_dict())
    differ = data_fingerprint.difference(meta.get("data_fingerprint"), fingerprint)
    if differ:
        raise data_fingerprint.DataMismatchError(
            f"{ckpt.root / 'last' / str(step)} was trained on other data than the data now "
            f"present ({differ}); use --force to start over on this data, or the data directory "
            f"it was trained on")
    state, meta = ckpt.restore("last", step, state)
    print(f"resuming from step {int(state['step'])} in {workdir} (checkpoint verified)",
          file=sys.stderr)
    return state, History(**meta["history"])
