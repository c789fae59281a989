"""Run configuration: typed dataclasses, presets from configs/<task>.py, command-line overrides.

Two protocols (``--protocol``; docs/families-and-protocols.md "Two protocols"), orthogonal to the
preset (the scale):

* ``lra`` (the default): dataclass defaults < the task's ``BASE`` < the task's ``ATTENTION[attention]``
  deltas (tuned per family by LRA or the family's paper) < the task's ``PRESETS[preset]`` <
  ``--set key=value`` overrides. The preset comes after the family so that ``tiny`` and ``small``
  stay tiny and small for every family (a family's size or budget delta is the paper's, which a
  scaled-down run overrides); the delta's other keys (attention options, pooling, weight decay)
  still apply. ``paper`` sets nothing, so there the family's delta stands.
* ``modern`` (the published recipes of S4D, S5, LRU and Mega): dataclass defaults < ``BASE`` <
  ``ATTENTION[attention]`` (an attention family's LRA model size) < the task's ``MODERN["*"]`` (every
  family under the modern protocol on that task: mean pooling, pre-norm, pixels as values) <
  ``MODERN[attention]`` (the family's published recipe at its full budget) < the scale keys of
  ``PRESETS[preset]`` (``SCALE_KEYS``: data sizes, model widths and depth, batch, steps; ``paper`` has
  none, so ``paper`` is the published budget; the recipe's optimiser, norm and options stay) <
  ``--set`` overrides.

The config records its protocol (``Config.protocol``; a config or result file without one is
``lra``). Keys are dotted (``train.lr``, ``model.num_layers``, ``attn.eps``,
``data.max_length``); ``attn.*`` are the attention family's options and ``data.*`` the task's data
options, both checked against what the family / task accepts. An unknown key is an error that lists
close matches.

One rule follows the layers: when the model pools by CLS and the family has a ``global_tokens``
option that no layer set, it is set to 1, so the CLS token (position 0) attends to, and is attended
by, every position. Without it a windowed or block pattern (local, sparse, longformer) would let the
pooled vector see only the first block or window of the input (tests/attention/test_comparability.py checks
every (task, family) for this). ``--set attn.global_tokens=0`` turns it off.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib
import inspect
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lra import attention, tasks

PRESETS = ("tiny", "small", "paper")
SCHEDULES = ("rsqrt", "cosine", "constant", "cosine_to_min", "cosine_s5", "linear_decay")
PROTOCOLS = ("lra", "modern")

# What a preset may change under --protocol modern: the scale of a run, never its recipe.
SCALE_KEYS = ("model.emb_dim", "model.num_heads", "model.num_layers", "model.qkv_dim",
              "model.mlp_dim", "train.batch_size", "train.num_steps", "train.warmup_steps",
              "train.eval_every", "train.eval_batches", "train.checkpoint_every", "train.log_every")


class ConfigError(ValueError):
    """A configuration the user asked for cannot be built; the message says why."""


def option(default: Any, *, choices: tuple | None = None, low: float | None = None,
           high: float | None = None, low_open: bool = False, high_open: bool = False):
    """A config field with what it may hold, declared once, beside its default: ``validate`` reads
    it from here. ``choices``: the allowed values; ``low``/``high``: bounds (None = unbounded; open
    bounds exclude the value itself). An int default accepts integers only, a float default any
    finite number, a bool default true or false."""
    return field(default=default, metadata={"choices": choices, "low": low, "high": high,
                                            "low_open": low_open, "high_open": high_open})


@dataclass(frozen=True)
class ModelConfig:
    """The encoder's options (lra/encoder.py takes this whole). Adding one: a field here, with its
    allowed values, and the code in lra/encoder.py that reads it."""

    emb_dim: int = option(512, low=1)
    num_heads: int = option(8, low=1)
    num_layers: int = option(4, low=1)
    qkv_dim: int = option(512, low=1)
    mlp_dim: int = option(1024, low=1)
    dropout: float = option(0.1, low=0, high=1, high_open=True)
    attention_dropout: float = option(0.1, low=0, high=1, high_open=True)
    # "cls" (prepend a CLS token) | "mean" (masked mean)
    pooling: str = option("cls", choices=("cls", "mean"))
    # "none": no positional encoding (Zoology's MQAR models: the short convolution gives order)
    positional: str = option("sinusoidal", choices=("sinusoidal", "learned", "none"))
    # compute dtype; parameters stay float32
    dtype: str = option("float32", choices=("float32", "bfloat16"))
    remat: bool = option(False)  # recompute each block in the backward pass (saves activation memory)
    # "layer" | "batch" (statistics over real tokens; lra/encoder.py)
    norm: str = option("layer", choices=("layer", "batch"))
    prenorm: bool = option(True)  # False: post-norm, x = norm(x + f(x))
    # "mlp" (LRA) | "glu" (S5's half-GLU after the mixer, no MLP) | "none" (the mixer alone: Zoology)
    channel_mixer: str = option("mlp", choices=("mlp", "glu", "none"))
    # > 0: before the mixer, each block has Zoology's BaseConv residual sublayer of this kernel:
    # h + Linear(h) * conv(h), a depthwise convolution, causal when the task is causal; 0 = none
    short_conv: int = option(0, low=0)
    bn_momentum: float = option(0.9, low=0, high=1, high_open=True)  # running statistics of norm="batch"
    # "embed" (token ids) | "linear" (normalised pixel values)
    input_encoder: str = option("embed", choices=("embed", "linear"))
    # The recipe around the mixer (docs/families-and-protocols.md "Encoder options (the modern recipes)"):
    # "elementwise": every dropout draws one mask entry per element (LRA); "tied": one draw per
    # (example, channel), the same at every position (S5, S4, minimal-LRU)
    dropout_form: str = option("elementwise", choices=("elementwise", "tied"))
    input_dropout: bool = option(True)  # drop the input embedding at model.dropout (LRA; S4, S5: no)
    final_norm: bool = option(True)  # the norm after the last block, pre-norm only (S5, LRU: none)
    mlp_activation: str = option("gelu", choices=("gelu", "silu"))  # channel_mixer="mlp" (Mega: silu)
    # "lecun": lecun-normal kernels, zero biases (flax's default) | "lra": LRA's MlpBlock,
    # xavier-uniform kernels and N(0, 1e-6) biases
    mlp_init: str = option("lecun", choices=("lecun", "lra"))
    # the task's head (tasks/_heads.py): "lra" (LRA's MLP heads) | "linear" (the state-space codes'
    # decoders) | "mlp" (one hidden layer of mlp_dim, Mega's classifier)
    head: str = option("lra", choices=("lra", "linear", "mlp"))
    head_activation: str = option("relu", choices=("relu", "gelu"))


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = option(32, low=1)  # global batch, split over all devices
    lr: float = option(0.05, low=0, low_open=True)
    # "rsqrt" (warmup + rsqrt decay) | "cosine" (warmup + LRA's cosine cycle) | "constant" |
    # "cosine_to_min" | "cosine_s5" | "linear_decay" (the modern recipes' schedules; lra/optim.py)
    schedule: str = option("rsqrt", choices=SCHEDULES)
    warmup_steps: int = option(1000, low=0)
    warmup_power: int = option(1, low=1)  # warm-up (t / warmup) ** power; Mega's Path-X: 2
    # where cosine_to_min and linear_decay reach lr_min, in units of num_steps (1: at the last step)
    schedule_horizon: float = option(1.0, low=0, low_open=True)
    lr_min: float = option(0.0, low=0)  # the floor of cosine_to_min, cosine_s5 and linear_decay
    weight_decay: float = option(0.1, low=0)
    b1: float = option(0.9, low=0, high=1, high_open=True)
    b2: float = option(0.98, low=0, high=1, high_open=True)
    eps: float = option(1e-9, low=0, low_open=True)
    grad_clip: float = option(0.0, low=0)  # global-norm clip; 0 = off
    # > 0: state-space parameters get Adam at this lr, no weight decay (lra/optim.py)
    ssm_lr: float = option(0.0, low=0)
    # the state-space step sizes (log dt): "ssm" (with the ssm group) | "no_decay" (train.lr, no decay)
    dt_group: str = option("ssm", choices=("ssm", "no_decay"))
    # "none" | "bias_norm": no weight decay on the blocks' biases and norm parameters (lra/optim.py)
    decay_exclude: str = option("none", choices=("none", "bias_norm"))
    grad_accum: int = option(1, low=1)  # micro-batches per step; the global batch (and the result) stays
    num_steps: int = option(5000, low=1)
    eval_every: int = option(50, low=1)
    eval_batches: int = option(0, low=0)  # batches per validation pass; 0 = the whole split
    checkpoint_every: int = option(500, low=1)
    log_every: int = option(10, low=1)
    # evaluations in a row at chance before a notice (docs/running.md "Watching a run learn"); 0 = off
    chance_patience: int = option(3, low=0)


@dataclass(frozen=True)
class Config:
    task: str
    attention: str
    preset: str = "paper"
    seed: int = 0
    protocol: str = "lra"  # "lra" | "modern" (lra.config's module docstring)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: dict[str, Any] = field(default_factory=dict)  # the task's data options
    attn: dict[str, Any] = field(default_factory=dict)  # the attention family's options

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Config:
        return cls(task=d["task"], attention=d["attention"], preset=d["preset"], seed=d["seed"],
                   protocol=d.get("protocol", "lra"),
                   model=ModelConfig(**d["model"]), train=TrainConfig(**d["train"]),
                   data=dict(d["data"]), attn=dict(d["attn"]))


def with_protocol(config: dict[str, Any]) -> dict[str, Any]:
    """A config dict (a result file's, a checkpoint's) with its protocol stated: written before
    protocols existed, it is ``lra``. Used wherever saved configs are compared with resolved ones."""
    return config if "protocol" in config else {**config, "protocol": "lra"}


def _parse_value(text: str, like: Any, key: str) -> Any:
    """Parse ``text`` to the type of ``like`` (the current value); literals otherwise."""
    if isinstance(like, bool):
        lowered = text.lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise ConfigError(f"{key}: expected true/false, got {text!r}")
    if isinstance(like, int):
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{key}: expected an integer, got {text!r}") from None
    if isinstance(like, float):
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{key}: expected a number, got {text!r}") from None
    if isinstance(like, str):
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def close_matches(key: str, known) -> list[str]:
    """Known keys that ``key`` probably meant: shared prefixes first, then difflib's matches."""
    stem = key.split("_")[0]
    prefix = [k for k in sorted(known) if key.startswith(k) or k.startswith(key) or k == stem]
    similar = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6)
    return list(dict.fromkeys(prefix + similar))[:3]


def _unknown(key: str, known: list[str], where: str) -> ConfigError:
    close = close_matches(key, known)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return ConfigError(f"unknown {where} key {key!r}.{hint} Valid keys: {', '.join(sorted(known))}")


def _apply(cfg: dict[str, Any], key: str, value: Any, *, attn_options: dict[str, Any],
           data_options: dict[str, Any], from_text: bool) -> None:
    section, _, name = key.partition(".")
    sections = {"model": cfg["model"], "train": cfg["train"], "attn": cfg["attn"], "data": cfg["data"]}
    if not name:
        top = ["seed", *(f"{s}.{k}" for s in ("model", "train") for k in cfg[s]),
               *(f"attn.{k}" for k in attn_options), *(f"data.{k}" for k in data_options)]
        if key == "seed":
            cfg["seed"] = _parse_value(value, 0, key) if from_text else value
            return
        raise _unknown(key, top, "config")
    if section not in sections:
        raise _unknown(section, list(sections), "config section")
    if section == "attn":
        known = attn_options
    elif section == "data":
        known = data_options
    else:
        known = sections[section]
    if name not in known:
        raise _unknown(name, list(known), f"{section}")
    like = known[name] if section in ("attn", "data") else cfg[section][name]
    if section in ("attn", "data") and name in cfg[section]:
        like = cfg[section][name]
    sections[section][name] = _parse_value(value, like, key) if from_text else value


def layers(module: Any, attention_name: str, preset: str, protocol: str) -> list[dict[str, Any]]:
    """The config layers of one run, lowest first (the module docstring's order), from the task's
    ``configs/<task>.py`` ``module``; no JAX needed (the leaderboard resolves presets with it)."""
    delta = getattr(module, "ATTENTION", {}).get(attention_name, {})
    if protocol == "lra":
        return [module.BASE, delta, module.PRESETS.get(preset, {})]
    modern = getattr(module, "MODERN", None)
    if modern is None:
        raise ConfigError(f"{module.__name__} defines no MODERN recipes: --protocol modern is not "
                          f"available for this task")
    scale = {k: v for k, v in module.PRESETS.get(preset, {}).items()
             if k in SCALE_KEYS or k.startswith("data.")}
    return [module.BASE, delta, modern.get("*", {}), modern.get(attention_name, {}), scale]


def load(task: str, attention_name: str, *, preset: str = "paper", seed: int = 0,
         overrides: list[str] | dict[str, Any] | None = None, protocol: str = "lra",
         config_file=None) -> Config:
    """Resolve the configuration of one (task, attention, preset, protocol) run (the order of the
    layers: the module docstring). ``config_file``: a ``lra.config_file.ConfigFile`` (``--config``),
    one layer between the preset and ``overrides``."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {protocol!r}; choose from {', '.join(PROTOCOLS)}")
    tasks.family(task)  # raises with the valid choices
    attn_options = attention.options(attention_name)
    data_options = tasks.data_options(task)
    module = importlib.import_module(f"lra.configs.{task}")
    cfg: dict[str, Any] = {
        "task": task, "attention": attention_name, "preset": preset, "seed": seed,
        "protocol": protocol,
        "model": dataclasses.asdict(ModelConfig()), "train": dataclasses.asdict(TrainConfig()),
        "data": {}, "attn": {},
    }
    for layer in layers(module, attention_name, preset, protocol):
        for key, value in layer.items():
            _apply(cfg, key, value, attn_options=attn_options, data_options=data_options,
                   from_text=False)
    if config_file is not None:
        _apply_file(cfg, config_file, attn_options=attn_options, data_options=data_options)
    items = overrides.items() if isinstance(overrides, dict) else parse_overrides(overrides or [])
    for key, value in items:
        _apply(cfg, key, value, attn_options=attn_options, data_options=data_options,
               from_text=isinstance(value, str))
    if (cfg["model"]["pooling"] == "cls" and "global_tokens" in attn_options
            and "global_tokens" not in cfg["attn"]):
        cfg["attn"]["global_tokens"] = 1
    config = Config.from_dict(cfg)
    try:
        validate(config)
    except ConfigError as err:
        raise _named_in_file(err, config_file, [k for k, _ in items]) from None
    return config


def _named_in_file(err: ConfigError, config_file, set_keys: list[str]) -> ConfigError:
    """A value check that failed on a value of the ``--config`` file (not one ``--set`` gave
    after it) names the file and the line."""
    if config_file is not None:
        for key in config_file.values("", ""):
            if str(err).startswith(f"{key}=") and key not in set_keys:
                return ConfigError(f"--config {config_file.where(key)}: {err}")
    return err


def _apply_file(cfg: dict[str, Any], config_file, *, attn_options: dict[str, Any],
                data_options: dict[str, Any]) -> None:
    """The ``--config`` file's layer. An attn.* / data.* value equal to what holds already (a
    default ``--print-config`` lists) is left out, so that the resolved config, and a result's
    identity, are those of the config the file was printed from; an integer where a number is
    expected becomes that number, as ``--set`` parses it."""
    options = {"attn": attn_options, "data": data_options}
    for key, value in config_file.values(cfg["task"], cfg["attention"]).items():
        section, _, name = key.partition(".")
        if section in options and name in options[section]:
            if value == cfg[section].get(name, options[section][name]):
                continue
            like = cfg[section].get(name, options[section][name])
        else:
            like = cfg.get(section, {}).get(name) if isinstance(cfg.get(section), dict) else None
        if isinstance(like, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        try:
            _apply(cfg, key, value, attn_options=attn_options, data_options=data_options,
                   from_text=False)
        except ConfigError as err:
            raise ConfigError(f"--config {config_file.where(key)}: {err}") from None


def parse_overrides(pairs: list[str]) -> list[tuple[str, str]]:
    """``--set key=value`` arguments -> [(key, value text)], in order (every command line's
    ``--set`` goes through here; ``load`` types the values, ``parse_options`` for flat options)."""
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        out.append((key.strip(), value.strip()))
    return out


def parse_options(pairs: list[str], defaults: dict[str, Any], where: str) -> dict[str, Any]:
    """``--set key=value`` arguments for flat options (a task's data options): each key must be
    one of ``defaults`` and its value is parsed to the default's type. ``where`` names the options
    in the error ("task 'listops' data" -> "unknown task 'listops' data key ...")."""
    options: dict[str, Any] = {}
    for key, text in parse_overrides(pairs):
        if key not in defaults:
            raise _unknown(key, list(defaults), where)
        options[key] = _parse_value(text, defaults[key], key)
    return options


SEED_RANGE = (0, 2**32 - 1)  # grain's shuffle takes a uint32 seed


def _allowed(kind: str, low, high, low_open: bool, high_open: bool) -> str:
    what = "an integer" if kind == "int" else "a number"
    if low is not None and high is not None:
        return (f"{what} in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}")
    if low is not None:
        return f"{what} {'>' if low_open else '>='} {low}"
    return what


def _check_value(key: str, value: Any, kind: str, low, high, low_open: bool, high_open: bool) -> None:
    ok = (isinstance(value, int) if kind == "int" else isinstance(value, int | float)
          ) and not isinstance(value, bool)
    if ok and kind == "float":
        ok = math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        raise ConfigError(f"{key}={value!r}: expected {_allowed(kind, low, high, low_open, high_open)}")


def _check_like(key: str, value: Any, default: Any) -> None:
    """An attn.* / data.* value must have its default's type (an int where a float is expected)."""
    if default is None or default is inspect.Parameter.empty:
        return
    if isinstance(default, bool):
        ok = isinstance(value, bool)
        kind = "true or false"
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
        kind = "an integer"
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        kind = "a finite number"
    elif isinstance(default, str):
        ok, kind = isinstance(value, str), "a string"
    else:
        return
    if not ok:
        raise ConfigError(f"{key}={value!r}: expected {kind}")


def _check_field(key: str, value: Any, f: dataclasses.Field) -> None:
    """Check one model.* / train.* value against what its field declares (``option``)."""
    spec, default = f.metadata, f.default
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{key}={value!r}: expected true or false")
    elif isinstance(default, int | float):
        _check_value(key, value, "int" if isinstance(default, int) else "float", spec.get("low"),
                     spec.get("high"), spec.get("low_open", False), spec.get("high_open", False))
    if spec.get("choices") and value not in spec["choices"]:
        raise ConfigError(f"{key}={value!r}: choose from {', '.join(spec['choices'])}")


def choices(key: str) -> tuple:
    """The allowed values of a model.* / train.* key with a fixed set (``choices("model.norm")``)."""
    section, name = key.split(".", 1)
    cls = {"model": ModelConfig, "train": TrainConfig}[section]
    return next(f.metadata["choices"] for f in dataclasses.fields(cls) if f.name == name)


def validate(config: Config) -> None:
    """Check every value of every key (types, ranges, choices); a ``ConfigError`` names the key,
    the value and what is allowed. Runs once, when the config is resolved (``load``)."""
    _check_value("seed", config.seed, "int", *SEED_RANGE, False, False)
    for section in ("model", "train"):
        value = getattr(config, section)
        for f in dataclasses.fields(value):
            _check_field(f"{section}.{f.name}", getattr(value, f.name), f)
    m, t = config.model, config.train
    if m.qkv_dim % m.num_heads:
        raise ConfigError(f"model.qkv_dim={m.qkv_dim} is not divisible by model.num_heads={m.num_heads}")
    if t.batch_size % t.grad_accum:
        raise ConfigError(f"train.batch_size={t.batch_size} is not divisible by "
                          f"train.grad_accum={t.grad_accum}")
    task = _check_data(config)
    if m.input_encoder == "linear" and task.pixel_stats is None:
        raise ConfigError(f"model.input_encoder='linear' projects pixel values; task "
                          f"{config.task!r} has token inputs (use it on image, pathfinder, pathx, "
                          f"or model.input_encoder=embed)")
    _check_causal(config, task)
    _check_attention(config, task)


def _check_causal(config: Config, task: tasks.Task) -> None:
    """A causal task (``Task.causal``, e.g. mqar's ``data.form=causal``) runs only families with a
    causal mode; the error names them."""
    if not task.causal or attention.has_causal_mode(config.attention):
        return
    causal = [n for n in attention.available() if attention.has_causal_mode(n)]
    hint = (" (or --set data.form=bidirectional, which every family runs)"
            if "form" in tasks.data_options(config.task) else "")
    raise ConfigError(f"{config.attention!r} has no causal mode, and task {config.task!r} as "
                      f"configured is causal; the families with a causal mode: "
                      f"{', '.join(causal)}{hint}")


def _check_data(config: Config) -> tasks.Task:
    """The task's own option checks run on its constructor (which reads no files)."""
    defaults = tasks.data_options(config.task)
    for key, value in config.data.items():
        _check_like(f"data.{key}", value, defaults.get(key))
    try:
        return tasks.build(config.task, Path("."), **config.data)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"data.* of {config.task}: {err}") from None


def _check_attention(config: Config, task: tasks.Task) -> None:
    """Build one attention layer abstractly (no parameters allocated): the family's constructor
    checks its own options (a kernel name, a chunk size) as it would in training."""
    attention.check_options(config.attention, config.attn)
    defaults = attention.options(config.attention)
    for key, value in config.attn.items():
        _check_like(f"attn.{key}", value, defaults.get(key))
    m = config.model
    args = dict(dim=m.emb_dim, num_heads=m.num_heads, qkv_dim=m.qkv_dim, causal=task.causal,
                max_len=task.max_len + (1 if m.pooling == "cls" else 0),
                dropout=m.attention_dropout, **config.attn)
    # The abstract build traces the family's constructor (about 0.1-0.2 s): its verdict is kept per
    # (class, arguments), so resolving many configs of one family (a sweep's plan, lra.reproduce,
    # the leaderboard's identities) builds each distinct layer once per process.
    key = (attention.family(config.attention), repr(sorted(args.items())))
    if key not in _BUILD_VERDICTS:
        _BUILD_VERDICTS[key] = _abstract_build_error(config.attention, args)
    if _BUILD_VERDICTS[key]:
        raise ConfigError(_BUILD_VERDICTS[key])


_BUILD_VERDICTS: dict[tuple[type, str], str] = {}  # "" = builds; else the ConfigError message


def _abstract_build_error(name: str, args: dict[str, Any]) -> str:
    """Build family ``name`` with ``args`` abstractly; "" if it builds, else what is wrong."""
    import jax  # only here: keeps `--help` light
    from flax import nnx

    # The random streams are made in an outer abstract trace (no array is made: the XLA backend
    # stays untouched, as jax.distributed.initialize needs in a multi-process run) and come into
    # the build as an argument. Each draw then updates a count that is an input of the build's
    # trace, and the AttributeError Flax provokes on it and discards (``Variable.set_value`` reads
    # the tracer's ``.sharding``) no longer pretty-prints the whole jaxpr into its message.
    def build(rngs):
        attention.build(name, rngs=rngs, **args)

    try:
        jax.eval_shape(lambda: nnx.eval_shape(build, nnx.Rngs(0)))
    except (ValueError, TypeError, AssertionError) as err:
        return f"attn.* of {name}: {err}"
    except Exception as err:  # a family whose build fails for another reason: its own bug
        return f"attention family {name!r} cannot be built: {type(err).__name__}: {err}"
    return ""


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; used to compare configs key by key."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


ABSENT = "<absent>"  # config_diff's value of a key that one config lacks


def config_diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{dotted key: (a's value, b's value)} of every leaf where two configs (nested dicts, e.g.
    ``Config.to_dict()`` or a saved one) differ, sorted by key; a key one of them lacks has
    ``ABSENT`` on that side. ``{}`` when they are the same. The one comparison of two configs
    (a checkpoint's against the run's, a run's against its preset's)."""
    flat_a, flat_b = flatten(a), flatten(b)
    return {k: (flat_a.get(k, ABSENT), flat_b.get(k, ABSENT))
            for k in sorted(flat_a.keys() | flat_b.keys())
            if flat_a.get(k, ABSENT) != flat_b.get(k, ABSENT)}
