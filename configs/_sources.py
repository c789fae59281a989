"""Where every ``--protocol modern`` recipe value comes from (issue 51): one entry per recipe and
config key, beside the recipes' values in configs/<task>.py and configs/_recipes.py, not inside them.

Read by ``lra.recipe_sources`` (the generated tables of docs/families-and-protocols.md "Where each
recipe value comes from", ``python -m lra.run ... --print-config --sources`` and the test that every
recipe value has a source). An entry says one of:

* ``same``: the source sets this value; ``ref`` is the file and line (or paper and table).
* ``departure``: ours differs; ``note`` says what the source has and why ours differs.
* ``ours``: the source has no such value (a width the mixer never reads, the evaluation cadence);
  ``note`` gives the reason or how it is derived.
* ``unverified``: the source could not be read here; ``note`` says what is missing.

A ``ref`` is relative to its recipe's repository: ``{file}`` is the recipe's file for the task and
``{line}`` the task's entry of ``lines`` (in ``TASKS`` order). A key whose entries differ per task
holds a tuple of entries, each naming its ``tasks``. ``around`` holds what the code around the keys
does (decoder, final norm, positions, ...): not a config key, but part of the recipe.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from lra.configs._recipes import NO_LRA_RECIPE

TASKS = ("listops", "text", "retrieval", "image", "pathfinder", "pathx")
PIXEL_TASKS = ("image", "pathfinder", "pathx")
SAME, DEPARTURE, OURS, UNVERIFIED = "same", "departure", "ours", "unverified"
VERDICTS = (SAME, DEPARTURE, OURS, UNVERIFIED)


@dataclass(frozen=True)
class Source:
    """One value's source for the tasks in ``tasks`` (see the module docstring)."""

    ref: str = ""
    verdict: str = SAME
    note: str = ""
    lines: tuple[int, ...] = ()  # per task of ``tasks``, in order; empty when ``ref`` has no {line}
    tasks: tuple[str, ...] = TASKS
    ours: str = ""  # for an ``around`` row: what this suite does
    in_repo: bool = True  # False: ``ref`` names a paper, not a file of the recipe's repository


@dataclass(frozen=True)
class Recipe:
    """The sources of one recipe: ``keys`` (config key -> Source or tuple of Sources) and ``around``."""

    title: str
    repo: str  # "owner/name@commit"; "" for a recipe of this suite's own
    file: str  # the per-task file as the docs show it ("run_lra_<task>.sh")
    files: dict[str, str]
    keys: dict[str, Source | tuple[Source, ...]]
    around: dict[str, Source | tuple[Source, ...]] = field(default_factory=dict)
    base: str = ""  # another recipe whose entries this one falls back to


def same(ref: str, *lines: int, tasks: tuple[str, ...] = TASKS, note: str = "",
         paper: bool = False) -> Source:
    return Source(ref, SAME, note, tuple(lines), tasks, in_repo=not paper)


def departure(ref: str, note: str, *lines: int, tasks: tuple[str, ...] = TASKS, ours: str = "",
              paper: bool = False) -> Source:
    return Source(ref, DEPARTURE, note, tuple(lines), tasks, ours, in_repo=not paper)


def ours(note: str, *, tasks: tuple[str, ...] = TASKS, what: str = "") -> Source:
    return Source("", OURS, note, (), tasks, what, in_repo=False)


def unverified(note: str, ref: str = "", *, tasks: tuple[str, ...] = TASKS,
               paper: bool = False) -> Source:
    return Source(ref, UNVERIFIED, note, (), tasks, in_repo=not paper)


def only(*names: str) -> tuple[str, ...]:
    return tuple(t for t in TASKS if t in names)


def but(*names: str) -> tuple[str, ...]:
    return tuple(t for t in TASKS if t not in names)


# Statements shared by several recipes (one definition each).
NO_QKV = ours("not read: the mixer has no query/key projection (its width is model.emb_dim)")
NO_HEADS = ours("not read: the mixer has no heads")
NO_ATTENTION_DROPOUT = ours("not read: the mixer has no attention weights to drop")
HEAD_WIDTH = ours("not read: the channel mixer is the GLU and the head has no hidden layer of "
                  "this width (the Retrieval decoder's is model.emb_dim, as the source's)")
EPOCH = ours("derived: one epoch (train examples // batch); the source validates once per epoch")
CHECKPOINT = ours("derived: one epoch; checkpoints are this suite's (a killed run resumes)")
POSITIONS = ("every encoder here adds the task's positions (sinusoidal or learned, from the LRA "
             "config); the recipe adds none")
LINEAR_HEAD_ACTIVATION = ours("not read: the head is one Dense layer, with no hidden activation "
                              "(the value is the Retrieval decoder's)")
STEP_COUNT = ("here t counts optimizer steps from 1 (lra/optim.py), so the first update runs at "
              "lr/W")
SCHEDULE_STEPS = {
    "s5": (f"{STEP_COUNT}; S5 writes each step's rate after the step (s5/train_helpers.py:49-58, "
           "355-356), so its first update runs at the optimizer's initial rate, the "
           "peak (s5/train_helpers.py:163), and every later one a step behind ours"),
    "s4": (f"{STEP_COUNT}; transformers' schedule is stepped after each update from step 0, so "
           "S4's first update runs at 0 and every later one a step behind ours"),
    "mega": (f"{STEP_COUNT}; fairseq sets the rate after each update from `--warmup-init-lr` "
             "1e-7 (fairseq/optim/lr_scheduler/linear_decay_schedule.py:46, 73-80), so Mega's "
             "first update runs at 1e-7 and every later one a step behind ours"),
}
BN_REAL_TOKENS = ("BatchNorm's statistics are taken over real tokens only; the source's include "
                  "the pads (no pads on the pixel tasks)")
HALF_GLU2 = ("S5's half_glu2 runs as the encoder's half-GLU (S5's half_glu1): the encoder has "
             "one GLU form")
S5_NORM = (
    "S5's ssm label list also names `norm`, but `map_nested_fn` (s5/train_helpers.py:68-80) "
    "labels leaves, which are `scale` and `bias`, never the `norm` module, so BatchNorm's "
    "parameters train in S5's regular AdamW group, as here: issue 51's item 5 read the list, not "
    "the labels")
S5_NORM_GROUP = "Lambda, B and log step: Adam at ssm_lr, no weight decay, as here. " + S5_NORM
S5_OPT_CONFIG = (
    "same rate; the groups differ where the script leaves S5's default grouping: ListOps and "
    "Image (`BfastandCdecay`) train B in the regular AdamW group, Path-X (`BandCdecay`) with "
    "AdamW at ssm_lr and weight decay, Text and Retrieval (`dt_global`) train log step at the "
    "global lr with weight decay; here B and log step are always in the ssm group (Adam, no "
    "weight decay): the encoder has no option for these groupings. " + S5_NORM)
S4_FFTCONV_DROPOUT = (
    "tied as here, where S4's blocks drop (after the activation, s4block.py:118-119, 176; on the "
    "residual branch, backbones/block.py:76-77); S4's FFTConv drops its convolution output a "
    "third time, element-wise (src/models/sequence/kernels/fftconv.py:78-79, 136: S4Block keeps "
    "`tie_dropout` for itself, s4block.py:54-57, so FFTConv gets the untied default), which this "
    "encoder does not")
S4_KERNEL_LR_C = (
    "dt, A and B at 0.001 without weight decay, as here; S4's scalar `lr` also applies to C "
    "(src/models/sequence/kernels/kernel.py:82-83, ssm.py:531), so C trains at 0.001 with "
    "weight decay there, here in the default group at the task's lr (0.01 Image, 0.004 "
    "Pathfinder): no option puts C alone at the ssm lr")
MEGA_CLASSIFIER = (
    "one hidden layer of the FFN width, as here; Mega's classifier also drops out its hidden "
    "layer (fairseq/models/lra/model.py:55), has no bias on its last layer (lines 62-66), and on "
    "Retrieval reads [u, v] (lines 191-194, 515), where this suite's two-tower head reads "
    "[u, v, u*v, u-v] (tasks/_heads.py)")
LRU_TABLE = "P-LRU's table as read from its ar5iv text; the PDF itself was not read here"


S5 = Recipe(
    title="S5", repo="lindermanlab/S5@3c18fdb", file="bin/run_experiments/run_lra_<task>.sh",
    files={t: f"bin/run_experiments/run_lra_{f}.sh" for t, f in
           zip(TASKS, ("listops", "imdb", "aan", "cifar", "pathfinder", "pathx"))},
    keys={
        "model.num_layers": same("{file}:{line} `--n_layers`", 3, 5, 3, 3, 4, 3),
        "model.emb_dim": same("{file}:{line} `--d_model`", 2, 3, 2, 2, 2, 2),
        "model.qkv_dim": NO_QKV,
        "model.mlp_dim": HEAD_WIDTH,
        "model.num_heads": NO_HEADS,
        "model.norm": same("{file}:{line} `--batchnorm=True`", 1, 2, 1, 1, 1, 1),
        "model.prenorm": same("run_train.py:57 `--prenorm` (default True)"),
        "model.channel_mixer": (
            departure("{file}:{line} `--activation_fn=half_glu2`", HALF_GLU2, 1, 1,
                      tasks=only("listops", "text")),
            same("run_train.py:43 `--activation_fn` (default half_glu1)", tasks=but("listops", "text"))),
        "model.bn_momentum": (
            same("run_train.py:61 `--bn_momentum` (default 0.95)", tasks=but("pathfinder", "pathx")),
            same("{file}:{line} `--bn_momentum`", 2, 2, tasks=only("pathfinder", "pathx"))),
        "model.dropout": same("{file}:{line} `--p_dropout`", 4, 5, 4, 4, 4, 4),
        "model.dropout_form": same("s5/layers.py:49-53 (`broadcast_dims=[0]` over one example's "
                                   "[L, H]: one mask per channel for the whole sequence)"),
        "model.input_dropout": same("s5/seq_model.py:39, 64-67 (a Dense encoder, then the layers: "
                                    "no dropout before them)"),
        "model.final_norm": same("s5/seq_model.py:64-67 (no norm after the last layer)"),
        "model.head": (
            same("s5/seq_model.py:143 (one Dense)", tasks=but("retrieval")),
            same("s5/seq_model.py:206-207, 218-220 (`RetrievalDecoder`: Dense(d)-GELU-Dense), "
                 "312 (on [u, v, u-v, u*v])", tasks=only("retrieval"))),
        "model.head_activation": (
            replace(LINEAR_HEAD_ACTIVATION, tasks=but("retrieval")),
            same("s5/seq_model.py:219 (`nn.gelu`)", tasks=only("retrieval"))),
        "model.attention_dropout": NO_ATTENTION_DROPOUT,
        "model.pooling": same("run_train.py:39 `--mode` (default pool: s5/seq_model.py:70 masked mean)"),
        "model.input_encoder": same("s5/seq_model.py:39 (a Dense encoder of the pixel value)",
                                    tasks=PIXEL_TASKS),
        "data.max_length": same("s5/dataloaders/lra.py:27 (IMDB `l_max` 4096)", tasks=only("text")),
        "attn.state_size": same("{file}:{line} `--ssm_size_base`", 4, 6, 4, 4, 5, 4),
        "attn.blocks": same("{file}:{line} `--blocks`", 2, 2, 2, 2, 2, 2),
        "attn.c_init": same("{file}:{line} `--C_init`", 1, 1, 1, 1, 1, 1),
        "attn.clip_eigs": (
            same("{file}:{line} `--clip_eigs=True`", 2, tasks=only("image")),
            same("run_train.py:47 `--clip_eigs` (default False)", tasks=but("image"))),
        "attn.dt_min": (
            same("run_train.py:51 `--dt_min` (default 0.001)", tasks=but("pathx")),
            same("{file}:{line} `--dt_min`", 3, tasks=only("pathx"))),
        "attn.dt_max": same("run_train.py:53 `--dt_max` (default 0.1)"),
        "attn.conj_sym": same("run_train.py:45 `--conj_sym` (default True)"),
        "attn.discretization": same("run_train.py:38 `--discretization` (default zoh)"),
        "train.lr": same("{file}:{line} `--lr_factor` x `--ssm_lr_base` (s5/train.py:37)",
                         3, 4, 3, 3, 3, 3),
        "train.ssm_lr": (
            same("{file}:{line} `--ssm_lr_base`, `--opt_config=standard` (line 4); "
                 "s5/train_helpers.py:146-167 (the ssm group)", 4, tasks=only("pathfinder"),
                 note=S5_NORM_GROUP),
            departure("{file}:{line} `--ssm_lr_base`; `--opt_config`, `--dt_global` (the "
                      "script's lines 3-4); s5/train_helpers.py:141-211", S5_OPT_CONFIG,
                      4, 5, 4, 4, 4,
                      tasks=but("pathfinder"))),
        "train.weight_decay": same("{file}:{line} `--weight_decay`", 4, 6, 5, 4, 5, 5),
        "train.schedule": departure(
            "run_train.py:77 `--cosine_anneal` (default True); s5/train.py:167-176; "
            "s5/train_helpers.py:12-21",
            "the same warm-up and cosine (`cosine_s5`: counted from the run's start over T - W "
            "steps, at lr_min for the last W); the step counting differs by one: "
            + SCHEDULE_STEPS["s5"], ours="cosine_s5"),
        "train.lr_min": same("run_train.py:75 `--lr_min` (default 0)"),
        "train.b1": same("s5/train_helpers.py:163 (optax.adamw's default 0.9)"),
        "train.b2": same("s5/train_helpers.py:163 (optax.adamw's default 0.999)"),
        "train.eps": same("s5/train_helpers.py:163 (optax.adamw's default 1e-8)"),
        "train.grad_clip": same("s5/train_helpers.py:159-167 (no clipping in the optimizer)"),
        "train.batch_size": same("{file}:{line} `--bsz`", 2, 2, 2, 2, 2, 2),
        "train.num_steps": same("{file}:{line} `--epochs` x (train examples // batch), s5/train.py:163",
                                3, 4, 3, 3, 3, 3),
        "train.warmup_steps": same("{file}:{line} `--warmup_end` (epochs) x steps per epoch, "
                                   "s5/train.py:170", 4, 6, 5, 4, 5, 5),
        "train.eval_every": EPOCH,
        "train.checkpoint_every": CHECKPOINT,
    },
    around={
        "direction": same("{file}:{line} `--bidirectional=True`", 2, 2, 1, 1, 1, 1,
                          note="bidirectional"),
        "BatchNorm statistics": (
            departure("s5/layers.py:44 (batch statistics over every position)", BN_REAL_TOKENS,
                      tasks=only("listops", "text", "retrieval"), ours="real tokens only"),
            same("s5/layers.py:44", tasks=PIXEL_TASKS, note="no pads")),
        "positions": departure("s5/seq_model.py:39 (the encoder adds none)", POSITIONS,
                               ours="the LRA config's positions"),
    },
)


S4D = Recipe(
    title="S4D", repo="state-spaces/s4@e757cef", file="configs/experiment/lra/s4-<task>.yaml",
    files={t: f"configs/experiment/lra/s4-{f}.yaml" for t, f in
           zip(TASKS, ("listops", "imdb", "aan", "cifar", "pathfinder", "pathx"))},
    keys={
        "model.num_layers": same("{file}:{line} `n_layers`", 9, 12, 12, 10, 13, 13),
        "model.emb_dim": same("{file}:{line} `d_model`", 10, 13, 14, 11, 15, 15),
        "model.qkv_dim": NO_QKV,
        "model.mlp_dim": HEAD_WIDTH,
        "model.num_heads": NO_HEADS,
        "model.norm": same("{file}:{line} `norm: batch`", 12, 15, 15, 13, 16, 16),
        "model.prenorm": same("{file}:{line} `prenorm`", 11, 14, 13, 12, 14, 14),
        "model.channel_mixer": departure(
            "configs/model/layer/s4.yaml:10 `final_act: glu`",
            "S4's GLU (a d -> 2d linear, then GLU) runs as the encoder's half-GLU (S5's half_glu1): "
            "the encoder has one GLU form"),
        "model.dropout": same("{file}:{line} `dropout`", 8, 11, 11, 8, 12, 12),
        "model.dropout_form": (
            same("configs/model/s4.yaml:6 `tie_dropout: true`", tasks=but("image"),
                 note="the rate is 0"),
            departure("configs/model/s4.yaml:6 `tie_dropout: true` (s4-cifar.yaml:9 too)",
                      S4_FFTCONV_DROPOUT, tasks=only("image"))),
        "model.input_dropout": same("src/models/sequence/backbones/model.py:53, 61-63 (`dropinp` "
                                    "0, which no LRA config sets)"),
        "model.head": (
            same("src/tasks/decoders.py:43 (`SequenceDecoder`: one Linear after the pooling)",
                 tasks=but("retrieval")),
            same("configs/pipeline/aan.yaml:7-13 (`retrieval`, `nli: true`); src/tasks/decoders.py:"
                 "193-197, 211-216 (Linear(4d, d)-act-Linear on [u, v, u-v, u*v])",
                 tasks=only("retrieval"))),
        "model.head_activation": (
            replace(LINEAR_HEAD_ACTIVATION, tasks=but("retrieval")),
            same("configs/pipeline/aan.yaml:12 `activation: gelu`", tasks=only("retrieval"))),
        "model.attention_dropout": NO_ATTENTION_DROPOUT,
        "model.pooling": (
            same("{file}:{line} `decoder: mode: pool`", 26, 8, 8, 27,
                 tasks=only("listops", "text", "retrieval", "pathfinder")),
            same("configs/pipeline/<task>.yaml `decoder: mode: pool` (cifar.yaml:18)",
                 tasks=only("image", "pathx"))),
        "model.input_encoder": same("configs/pipeline/cifar.yaml:14 `encoder: linear`",
                                    tasks=PIXEL_TASKS),
        "data.max_length": same("{file}:{line} `l_max: 4096`", 29, tasks=only("text")),
        "attn.state_size": same("{file}:{line} `d_state`", 14, 17, 17, 15, 18, 18),
        "attn.init": departure(
            "{file}:{line} `init: legs`",
            "S4D-Inv here (this suite has S4D-Lin and S4D-Inv, attention/s4d.py); S4's diagonal "
            "LegS initialisation is not implemented", 21, 24, 24, 19, 22, 22),
        "attn.n_ssm": same("{file}:{line} `n_ssm: 1`", 23, 26, 26, 21,
                           tasks=only("listops", "text", "retrieval", "image"),
                           note="one A for every channel, dt per channel; S4 ties B with A, here "
                                "B is folded into C (per channel), which spans the same kernels "
                                "(attention/s4d.py)"),
        "attn.dt_min": same("{file}:{line} `dt_min`", 19, 22, 22, 17, 20, 20),
        "attn.dt_max": same("{file}:{line} `dt_max`", 20, 23, 23, 18, 21, 21),
        "attn.discretization": same("src/models/sequence/kernels/ssm.py (`disc='zoh'`, the default)"),
        "train.lr": same("{file}:{line} `optimizer: lr`", 32, 36, 32, 30, 33, 30),
        "train.ssm_lr": (
            same("{file}:{line} `lr: {dt: null, A: 0.001, B: 0.001}`", 15, 18, 18,
                 tasks=only("listops", "text", "retrieval"),
                 note="A and B at 0.001 without weight decay (configs/model/layer/s4.yaml:30 "
                      "`wd: 0.0`; src/models/sequence/kernels/kernel.py:90-91, 111-122); dt: see "
                      "train.dt_group; C at the global lr with weight decay, as here"),
            departure("{file}:{line} `layer: lr: 0.001`", S4_KERNEL_LR_C, 16, 19,
                      tasks=only("image", "pathfinder")),
            same("{file}:{line} `layer: lr: 0.001`", 19, tasks=only("pathx"),
                 note="dt, A and B at 0.001 without weight decay; S4's scalar lr also puts C at "
                      "0.001 with weight decay, which is Path-X's global lr: as here")),
        "train.dt_group": (
            same("{file}:{line} `lr: dt: null` (log dt at the global lr; weight decay 0: "
                 "configs/model/layer/s4.yaml:30 `wd: 0.0`, src/models/sequence/kernels/kernel.py:"
                 "82-94, ssm.py:524)", 16, 19, 19, tasks=only("listops", "text", "retrieval")),
            same("{file}:{line} `layer: lr: 0.001` (log dt with A and B)", 16, 19, 19,
                 tasks=PIXEL_TASKS)),
        "train.weight_decay": same("{file}:{line} `weight_decay`", 33, 37, 33, 31, 34, 31,
                                   note="on what S4 decays: see train.decay_exclude"),
        "train.decay_exclude": same(
            "configs/config.yaml:42-44 `optimizer_param_grouping`; src/utils/optim_groups.py:25-38; "
            "train.py:459-460 (applied to the backbone only)",
            note="no weight decay on the blocks' biases and norms nor the final norm; the "
                 "embedding or pixel encoder and the decoder keep theirs, there as here"),
        "train.schedule": departure(
            "{file}:5 `override /scheduler: cosine_warmup`; src/utils/registry.py:17 "
            "(transformers' `get_cosine_schedule_with_warmup`)",
            "the same warm-up and half cosine to 0 at `num_training_steps` (`cosine_to_min`); the "
            "step counting differs by one: " + SCHEDULE_STEPS["s4"], ours="cosine_to_min"),
        "train.lr_min": same("configs/scheduler/cosine_warmup.yaml:5 (transformers' cosine with "
                             "warm-up decays to 0)"),
        "train.schedule_horizon": same(
            "{file}:{line} `num_training_steps` / the run's steps", 36, 40, 36, 37, 8, 8,
            note="1 but on Retrieval: 50,000 scheduled, 45,960 run, so the run ends part-way "
                 "down the cosine, as S4's"),
        "train.b1": same("configs/optimizer/adamw.yaml:5 `betas: [0.9, 0.999]`"),
        "train.b2": same("configs/optimizer/adamw.yaml:5 `betas: [0.9, 0.999]`"),
        "train.eps": same("configs/optimizer/adamw.yaml (torch AdamW's default eps 1e-8)"),
        "train.grad_clip": same("configs/trainer/default.yaml:9 `gradient_clip_val: null`"),
        "train.batch_size": same("{file}:{line} `loader: batch_size`", 29, 33, 29, 27, 30, 27),
        "train.num_steps": (
            same("{file}:{line} `num_training_steps`", 36, 40, 37, 8, 8,
                 tasks=but("retrieval")),
            same("{file}:{line} `max_epochs: 20` (`num_training_steps: 50000`, line 36)", 40,
                 tasks=only("retrieval"),
                 note="the run stops at max_epochs 20 = 20 x 2,298 = 45,960 steps, before "
                      "num_training_steps")),
        "train.warmup_steps": same("{file}:{line} `num_warmup_steps`", 37, 41, 37, 38, 9, 9),
        "train.eval_every": ours("derived: num_training_steps // max_epochs (one epoch); S4 "
                                 "validates once per epoch"),
        "train.checkpoint_every": CHECKPOINT,
    },
    around={
        "shared A (`n_ssm`)": same("{file}:{line} `n_ssm: null`", 24, 24,
                                   tasks=only("pathfinder", "pathx"), note="one A per channel"),
        "direction": same("{file}:{line} `bidirectional: true`", 22, 25, 25, 20, 23, 23,
                          note="bidirectional"),
        "final norm": replace(
            same("src/models/sequence/backbones/model.py:102-110 (a final norm under pre-norm "
                 "only)", note="model.final_norm's default"),
            ours="a final BatchNorm under pre-norm (Text, Retrieval, Pathfinder, Path-X)"),
        "positions": departure("src/models/sequence/backbones/model.py (the backbone adds none)",
                               POSITIONS, ours="the LRA config's positions"),
    },
)


def _lru_paper(what: str, tasks: tuple[str, ...] = TASKS) -> Source:
    return same(f"P-LRU App. D, Tables 8-9 ({what}, <task> row)", paper=True, note=LRU_TABLE,
                tasks=tasks)


LRU = Recipe(
    title="LRU", repo="NicolasZucchet/minimal-LRU@bbd71b1",
    file="Orvieto et al. 2023, arXiv 2303.06349 (P-LRU), App. D; code: minimal-LRU",
    files={t: "run_train.py" for t in TASKS},
    keys={
        "model.num_layers": same("P-LRU App. D (6 residual blocks)", paper=True, note=LRU_TABLE),
        "model.emb_dim": _lru_paper("H"),
        "model.qkv_dim": NO_QKV,
        "model.mlp_dim": HEAD_WIDTH,
        "model.num_heads": NO_HEADS,
        "model.norm": same("P-LRU App. D (BatchNorm); run_train.py:57", note=LRU_TABLE),
        "model.prenorm": same("P-LRU App. D (pre-norm); run_train.py:58", note=LRU_TABLE),
        "model.channel_mixer": departure(
            "lru/model.py:111-112, 127 (W1 x * sigmoid(W2 x))",
            "minimal-LRU's two-matrix GLU runs as the encoder's half-GLU (S5's half_glu1): the "
            "encoder has one GLU form"),
        "model.dropout": _lru_paper("dropout"),
        "model.dropout_form": same("lru/model.py:119 (`broadcast_dims=[0]` over one example's "
                                   "[L, H]: one mask per channel for the whole sequence)"),
        "model.input_dropout": same("lru/model.py:147, 160-163 (a Dense encoder, then the layers: "
                                    "no dropout before them)"),
        "model.final_norm": same("lru/model.py:160-164 (no norm after the last layer)"),
        "model.head": (
            same("lru/model.py:191 (one Dense)", tasks=but("retrieval")),
            ours("minimal-LRU has no two-tower model and P-LRU App. D names no Retrieval decoder: "
                 "S5's (Dense(d)-GELU-Dense on the four features)", tasks=only("retrieval"))),
        "model.head_activation": (
            replace(LINEAR_HEAD_ACTIVATION, tasks=but("retrieval")),
            ours("S5's Retrieval decoder's GELU (see model.head)", tasks=only("retrieval"))),
        "model.attention_dropout": NO_ATTENTION_DROPOUT,
        "model.pooling": same("run_train.py:48 `--pooling` (default mean)"),
        "model.input_encoder": same("lru/model.py:147 (a Dense encoder of the input)",
                                    tasks=PIXEL_TASKS),
        "data.max_length": unverified("the LRU paper's Text length was not read here; 4096 as the "
                                      "S5 and S4 recipes", tasks=only("text")),
        "attn.state_size": _lru_paper("N"),
        "attn.r_min": _lru_paper("r_min"),
        "attn.r_max": _lru_paper("r_max"),
        "attn.max_phase": _lru_paper("max phase"),
        "train.lr": departure("run_train.py:69 `--lr_base` (default 1e-3)",
                              "the paper tuned its base lr on a log2 grid and does not tabulate "
                              "it: minimal-LRU's default 1e-3"),
        "train.ssm_lr": same("P-LRU App. D, Tables 8-9 (lr factor, <task> row) x the base lr; "
                             "lru/train_helpers.py:91-105 (nu, theta, gamma, B: Adam, no weight "
                             "decay)", paper=True, note=LRU_TABLE),
        "train.weight_decay": _lru_paper("weight decay"),
        "train.schedule": departure(
            "P-LRU App. D (linear warm-up from 1e-7 over the first 10%, then cosine to 1e-7)",
            "the same shape, peak and end (`cosine_to_min` to lr_min 1e-7 at the last step); the "
            "warm-up starts at 0 here, at 1e-7 there (at most 1e-7 apart), and " + STEP_COUNT
            + ", where the paper's step counting is not published", paper=True,
            ours="cosine_to_min"),
        "train.lr_min": same("run_train.py:70 `--lr_min` (default 1e-7), P-LRU App. D's floor",
                             note=LRU_TABLE),
        "train.b1": same("lru/train_helpers.py:100 (optax.adamw's default 0.9)"),
        "train.b2": same("lru/train_helpers.py:100 (optax.adamw's default 0.999)"),
        "train.eps": same("lru/train_helpers.py:100 (optax.adamw's default 1e-8)"),
        "train.grad_clip": same("lru/train_helpers.py:97-105 (no clipping in the optimizer)"),
        "train.batch_size": _lru_paper("batch"),
        "train.num_steps": _lru_paper("iterations"),
        "train.warmup_steps": same("P-LRU App. D (warm-up over the first 10% of the run)",
                                   paper=True, note=LRU_TABLE),
        "train.eval_every": EPOCH,
        "train.checkpoint_every": CHECKPOINT,
        "model.bn_momentum": same("lru/model.py:116-118 (flax BatchNorm's default momentum, "
                                  "0.99)"),
    },
    around={
        "direction": (
            departure("P-LRU App. D (unidirectional except Pathfinder and Path-X)",
                      "bidirectional on every task here", paper=True,
                      tasks=only("listops", "text", "retrieval", "image"), ours="bidirectional"),
            same("P-LRU App. D (bidirectional on Pathfinder and Path-X)", paper=True,
                 tasks=only("pathfinder", "pathx"), note="bidirectional")),
        "input": departure("P-LRU App. D (colour sCIFAR)", "grey LRA-Image here; the published "
                           "row is colour sCIFAR", paper=True, tasks=only("image"),
                           ours="grey CIFAR-10 (LRA-Image)"),
        "positions": departure("lru/model.py:147 (the encoder adds none)", POSITIONS,
                               ours="the LRA config's positions"),
    },
)


MEGA = Recipe(
    title="Mega", repo="facebookresearch/mega@aeaa4b4", file="examples/mega/README.lra.md",
    files={t: "examples/mega/README.lra.md" for t in TASKS},
    keys={
        "model.num_layers": same("{file}:{line} `--encoder-layers`", 32, 50, 68, 86, 104, 122),
        "model.emb_dim": same("fairseq/models/lra/model.py:{line} `encoder_embed_dim`",
                              415, 470, 512, 569, 629, 657),
        "model.qkv_dim": ours("not read by mega (its widths are attn.z_dim and attn.hidden_dim); "
                              "model.emb_dim"),
        "model.mlp_dim": same("fairseq/models/lra/model.py:359 (FFN width = `encoder_hidden_dim`), "
                              "line {line}", 410, 465, 507, 564, 624, 652),
        "model.num_heads": NO_HEADS,
        "model.norm": (
            same("{file}:{line} `--norm-type`", 34, 88, 106, 124,
                 tasks=only("listops", "image", "pathfinder", "pathx"),
                 note="Path-X's syncbatchnorm is BatchNorm across devices"),
            departure("{file}:{line} `--norm-type 'scalenorm'`", "ScaleNorm runs as LayerNorm (the "
                      "encoder has LayerNorm and BatchNorm)", 52, 70, tasks=only("text", "retrieval"))),
        "model.prenorm": (
            same("{file}:{line} (no `--encoder-normalize-before`: post-norm)", 34, 52, 70,
                 tasks=only("listops", "text", "retrieval")),
            same("{file}:{line} `--encoder-normalize-before`", 88, 106, 124, tasks=PIXEL_TASKS)),
        "model.channel_mixer": same(
            "fairseq/modules/mega_sentence_encoder_layer.py:53-56, 112-113 (an FFN after each "
            "Mega layer, `NormalizedFeedForwardNetwork`)"),
        "model.mlp_activation": same("{file}:{line} `--activation-fn 'silu'`",
                                     33, 51, 69, 87, 105, 123),
        "model.dropout": (
            departure("{file}:{line} `--dropout`, `--act-dropout 0.0`",
                      "the same rate on the embedding, the layers' outputs and the classifier; "
                      "Mega's FFN drops its hidden activation at `--act-dropout` 0 "
                      "(fairseq/modules/normalized_feedforward_network.py:63-64; "
                      "fairseq/models/lra/model.py:308), this encoder's MLP at model.dropout: "
                      "no option sets that dropout apart", 37, 55, 73,
                      tasks=only("listops", "text", "retrieval")),
            same("{file}:{line} `--dropout`", 91, 109, 127, tasks=PIXEL_TASKS,
                 note="every rate 0")),
        "model.attention_dropout": same("{file}:{line} `--attention-dropout`",
                                        37, 55, 73, 91, 109, 127),
        "model.pooling": same("{file}:{line} `--sen-rep-type 'mp'`", 34, 52, 70, 88, 106, 124),
        "model.input_encoder": same("{file}:{line} `--pixel-normalization`", 85, 103, 121,
                                    tasks=PIXEL_TASKS),
        "data.max_length": same("fairseq/models/lra/model.py:475 (`max_positions` 4002)",
                                tasks=only("text"), note="Mega reads up to 4,000 bytes and 2 markers"),
        "attn.ndim": same("{file}:{line} `--n-dim 16`", 32, 50, 68, 86, 104, 122),
        "attn.z_dim": same("fairseq/models/lra/model.py:{line} `z_dim`", 411, 466, 508, 565, 625, 653),
        "attn.hidden_dim": same("fairseq/models/lra/model.py:{line} `encoder_hidden_dim`",
                                410, 465, 507, 564, 624, 652),
        "attn.attn_fn": same("{file}:{line} `--attention-activation-fn`", 33, 51, 69, 87, 105, 123),
        "attn.chunk_size": same("{file}:21 `CHUNK` (-1: one chunk, full attention: Mega, not "
                                "Mega-chunk)"),
        "train.lr": same("{file}:{line} `--lr`", 36, 54, 72, 90, 108, 126),
        "train.ssm_lr": same("{file}:{line} `--optimizer adam` (one parameter group, decay on "
                             "every parameter)", 36, 54, 72, 90, 108, 126),
        "train.weight_decay": same("{file}:{line} `--weight-decay`", 37, 55, 73, 91, 109, 127),
        "train.schedule": departure(
            "{file}:{line} `--lr-scheduler linear_decay --total-num-update` (= `--max-update`)",
            "the same linear warm-up and linear decay to 0 at the last update (`linear_decay`); "
            "the warm-up starts at 0 here, at `--warmup-init-lr 1e-07` there (at most 1e-7 "
            "apart), and the step counting differs by one: " + SCHEDULE_STEPS["mega"],
            39, 57, 75, 93, 111, 129, ours="linear_decay"),
        "train.lr_min": same("{file}:{line} `--end-learning-rate 0.0`", 39, 57, 75, 93, 111, 129),
        "train.warmup_power": (
            same("fairseq/optim/lr_scheduler/linear_decay_schedule.py:54 (`--warmup-power`, "
                 "default 1)", tasks=but("pathx")),
            same("{file}:{line} `--warmup-power 2`", 130, tasks=only("pathx"))),
        "model.head": departure(
            "fairseq/models/lra/model.py:{line} `classifier_layers` 1, `classifier_out_dim` (= "
            "the FFN width)", MEGA_CLASSIFIER, 416, 471, 513, 571, 631, 659),
        "model.head_activation": same("fairseq/models/lra/model.py:379 "
                                      "`classifier_activation_fn` (default gelu)"),
        "train.b1": same("{file}:{line} `--adam-betas '(0.9, 0.98)'`", 36, 54, 72, 90, 108, 126),
        "train.b2": same("{file}:{line} `--adam-betas '(0.9, 0.98)'`", 36, 54, 72, 90, 108, 126),
        "train.eps": same("{file}:{line} `--adam-eps 1e-8`", 36, 54, 72, 90, 108, 126),
        "train.grad_clip": same("{file}:{line} `--clip-norm 1.0`", 36, 54, 72, 90, 108, 126),
        "train.batch_size": same("{file}:{line} `--batch-size` x `--update-freq` (Path-X: x 8 GPUs, "
                                 "line 12)", 38, 56, 74, 92, 110, 128),
        "train.grad_accum": same("{file}:{line} `--update-freq`", 38, 56, 74, 92, 110, 128),
        "train.num_steps": same("{file}:{line} `--max-update`", 38, 56, 74, 92, 110, 128),
        "train.warmup_steps": same("{file}:{line} `--warmup-updates`", 40, 58, 76, 94, 112, 130),
        "train.eval_every": ours("derived: max-update // epochs (one epoch); fairseq validates "
                                 "once per epoch"),
        "train.checkpoint_every": CHECKPOINT,
    },
    around={
        "EMA truncation": departure(
            "fairseq/models/lra/model.py:{line} `truncation_length`",
            "the EMA kernel is not truncated here (Mega: 1024, Path-X 4096)",
            419, 474, 517, 575, 635, 663, ours="none"),
        "positions": departure("fairseq/models/lra/model.py (no positional embedding in Mega's "
                               "LRA encoder)", POSITIONS, ours="the LRA config's positions"),
    },
)


HGRN2 = Recipe(
    title="GLA with HGRN2's recipe", repo="OpenNLPLab/HGRN2@b154c39", file="run_lra.py",
    files={t: "run_lra.py" for t in TASKS},
    keys={
        "model.num_layers": same("{file}:{line} `n_layers_dict`", 38, 37, 41, 36, 39, 40),
        "model.emb_dim": same("{file}:{line} `d_model_dict`", 29, 28, 32, 27, 30, 31),
        "model.qkv_dim": ours("d, as HGRN2's input and output widths"),
        "model.mlp_dim": departure(
            "{file}:{line} `expand_ratio_glu_dict` x d",
            "HGRN2's GLU channel mixer of this width runs as the encoder's MLP of the same width",
            110, 109, 113, 108, 111, 112),
        "model.num_heads": same("{file}:{line} `expand_ratio_dict` (heads = d / expand_ratio)",
                                119, 118, 122, 117, 120, 121),
        "model.norm": same("{file}:{line} `norm_dict`", 47, 46, 50, 45, 48, 49,
                           note="synbatch runs as BatchNorm"),
        "model.prenorm": same("{file}:{line} `prenorm_dict`", 83, 82, 86, 81, 84, 85),
        "model.channel_mixer": departure("{file}:{line} `expand_ratio_glu_dict` (a GLU)",
                                         "the GLU runs as the encoder's MLP (GELU)",
                                         110, 109, 113, 108, 111, 112),
        "model.dropout": same("{file}:{line} `dropout_dict`", 74, 73, 77, 72, 75, 76),
        "model.attention_dropout": NO_ATTENTION_DROPOUT,
        "model.pooling": same("script_lra_others.sh:55 `decoder.mode=pool`"),
        "model.input_encoder": unverified("the S4-style harness that reads the pixels "
                                          "(`program_path`) is not in HGRN2's repository; a linear "
                                          "encoder as S4's pipelines", tasks=PIXEL_TASKS),
        "data.max_length": unverified("the harness's data pipeline is not in HGRN2's repository; "
                                      "4096 as S4's `l_max`", tasks=only("text")),
        "attn.expand_k": departure(
            "{file}:{line} `expand_ratio_dict`",
            "the recipe runs GLA (attn.variant default) with key width d, HGRN2's forget-gate "
            "width, in place of GLA's d / 2; HGRN2 itself is `--set attn.variant=hgrn2`, with one "
            "fixed lower bound where HGRN2 learns one per layer (`use_lower_bound_dict`, line 134)",
            119, 118, 122, 117, 120, 121),
        "train.lr": same("{file}:{line} `lr_dict`", 56, 55, 59, 54, 57, 58),
        "train.ssm_lr": same("{file}:{line} `wd_dict` (one parameter group)", 65, 64, 68, 63, 66, 67),
        "train.weight_decay": same("{file}:{line} `wd_dict`", 65, 64, 68, 63, 66, 67),
        "train.schedule": unverified(
            "the harness's experiment config (`experiment=${ARCH}-lra-${TASK}`, "
            "script_lra_others.sh:37), which names the scheduler, is not in HGRN2's repository; "
            "S4's `cosine_warmup` (warm-up, then a half cosine to 0 at `num_training_steps`: "
            "`cosine_to_min`) is assumed, as the `scheduler.num_warmup_steps` and "
            "`scheduler.num_training_steps` it sets (lines 42-43) suggest"),
        "train.schedule_horizon": same(
            "{file}:{line} `training_steps_dict` / the run's steps (`scheduler.num_training_steps`, "
            "script_lra_others.sh:43)", 101, 100, 104, 99, 102, 103,
            note="a horizon of 50,000 or 500,000 steps, not the run's length: the run ends "
                 "part-way down the cosine, or on Image past the horizon, as the harness's"),
        "train.lr_min": unverified("0, the end of S4's `cosine_warmup`, the scheduler assumed "
                                   "(see train.schedule)"),
        "train.b1": unverified("the harness's AdamW (`program_path`) is not in HGRN2's repository; "
                               "S4's (0.9, 0.999)"),
        "train.b2": unverified("the harness's AdamW (`program_path`) is not in HGRN2's repository; "
                               "S4's (0.9, 0.999)"),
        "train.eps": unverified("the harness's AdamW (`program_path`) is not in HGRN2's repository; "
                                "torch's default 1e-8"),
        "train.grad_clip": same("{file}:{line} `gradient_clip_dict`", 164, 163, 167, 162, 165, 166),
        "train.batch_size": same("{file}:{line} `batches` (the global batch, run_lra.py:252-253)",
                                 11, 10, 14, 9, 12, 13),
        "train.num_steps": same("{file}:{line} `training_epochs_dict` x (train examples // batch)",
                                128, 127, 131, 126, 129, 130),
        "train.warmup_steps": same("{file}:{line} `warmup_steps_dict`", 92, 91, 95, 90, 93, 94),
        "train.eval_every": EPOCH,
        "train.checkpoint_every": CHECKPOINT,
    },
    around={
        "mixer scan": (
            departure("{file}:171-174 (`hgrn2_2d` on the pixel tasks)", "the 1-D bidirectional "
                      "form runs here", tasks=PIXEL_TASKS, ours="1-D, bidirectional"),
            same("{file}:170-171 (`hgrn2_1d`)", tasks=only("listops", "text", "retrieval"),
                 note="1-D")),
        "precision": departure("script_lra_others.sh:39 `trainer.precision=bf16`",
                               "float32 here: the recipe is compared with the other float32 "
                               "recipes; `--set model.dtype=bfloat16` is the nearest to "
                               "HGRN2's mixed precision", ours="float32"),
        "use_series": (
            departure("{file}:{line} `use_series_dict`", "an option of HGRN2's model in the "
                      "harness, which its repository does not hold: what it does could not be "
                      "read here, so it is not modelled", 157, tasks=only("pathx"),
                      ours="not modelled"),
            same("{file}:{line} `use_series_dict` (False)", 155, 154, 158, 153, 156,
                 tasks=but("pathx"), note="off")),
        "positions": (
            departure("{file}:{line} `encoder_dict` ('id': no positions)", POSITIONS, 145, 147,
                      tasks=only("text", "pathfinder"), ours="the LRA config's positions"),
            same("{file}:{line} `encoder_dict` ('position')", 146, 149, 144, 148,
                 tasks=only("listops", "retrieval", "image", "pathx"),
                 note="positions added, as here")),
        "decoder": departure("script_lra_others.sh:55 `decoder.mode=pool` (the decoder itself "
                             "is the harness's)", "the harness's decoder is not in HGRN2's "
                             "repository, so LRA's head is kept (`model.head` lra); `--set "
                             "model.head=linear` is S4's pooled linear decoder, the likeliest",
                             ours="Dense(d)-ReLU-Dense, LRA's head (Retrieval: on [u, v, u*v, "
                                  "u-v])"),
    },
)


NO_RECIPE = Recipe(
    title="Families without a published LRA recipe (" + ", ".join(NO_LRA_RECIPE) + ")",
    repo="", file="", files={}, base="s5",
    keys={"model.num_heads": ours("no published LRA recipe: the task's LRA head count "
                                  "(configs/<task>.py BASE); every other value is S5's, as in "
                                  "the S5 table")},
)


COMMON = Recipe(
    title="Every other family under --protocol modern (the \"*\" layer)", repo="", file="",
    files={},
    keys={
        "model.pooling": ours("the modern recipes' encoder (mean over real tokens), for families "
                              "with no published modern recipe"),
        "model.prenorm": ours("the modern recipes' encoder (pre-norm), for families with no "
                              "published modern recipe"),
        "model.input_encoder": ours("pixels as normalised values through a linear encoder, as the "
                                    "S5, S4 and Mega recipes read them", tasks=PIXEL_TASKS),
        "data.max_length": ours("4096 bytes, as the S5 and S4 recipes (LRA: 1000)",
                                tasks=only("text")),
    },
)


RECIPES: dict[str, Recipe] = {"s5": S5, "s4d": S4D, "lru": LRU, "mega": MEGA, "hgrn2": HGRN2,
                              "no_recipe": NO_RECIPE, "*": COMMON}

# The recipe whose sources a family's MODERN entry follows.
FAMILY_RECIPE: dict[str, str] = {"s5": "s5", "s4d": "s4d", "lru": "lru", "mega": "mega",
                                 "gla": "hgrn2", **{name: "no_recipe" for name in NO_LRA_RECIPE}}
