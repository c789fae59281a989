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

from dataclasses import dataclass, field

from configs._recipes import NO_LRA_RECIPE

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
HEAD_WIDTH = ours("the width of LRA's Dense-ReLU-Dense head, the only reader under "
                  "model.channel_mixer=glu (see the decoder row)")
EPOCH = ours("derived: one epoch (train examples // batch); the source validates once per epoch")
CHECKPOINT = ours("derived: one epoch; checkpoints are this suite's (a killed run resumes)")
POSITIONS = ("every encoder here adds the task's positions (sinusoidal or learned, from the LRA "
             "config); the recipe adds none")
DECODER = "Dense(d)-ReLU-Dense, LRA's head (Retrieval: on [u, v, u*v, u-v])"
DROPOUT_FORM = ("same rate; the form differs: here dropout is i.i.d. per element and the input "
                "embedding is dropped too, where the source ties one mask across the sequence and "
                "has no input dropout (issue 51 item 1)")
SCHEDULE_END = ("the cosine keeps LRA's cycle (progress = (t - warm-up) / steps), so a run ends "
                "above 0 where the source ends at 0 (issue 51 item 4)")
BN_REAL_TOKENS = ("BatchNorm's statistics are taken over real tokens only; the source's include "
                  "the pads (no pads on the pixel tasks)")
HALF_GLU2 = ("S5's half_glu2 runs as the encoder's half-GLU (S5's half_glu1): the encoder has "
             "one GLU form")
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
        "model.dropout": (
            same("{file}:{line} `--p_dropout`", 4, 4, 4, tasks=only("listops", "retrieval", "pathx")),
            departure("{file}:{line} `--p_dropout`; s5/layers.py:49-53 (`broadcast_dims=[0]`)",
                      DROPOUT_FORM, 5, 4, 4, tasks=only("text", "image", "pathfinder"))),
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
        "train.ssm_lr": departure(
            "{file}:{line} `--ssm_lr_base`; s5/train_helpers.py:146-158 (the ssm group)",
            "same rate; the group differs: S5's ssm group also holds BatchNorm's scale and bias "
            "(Adam at ssm_lr, no weight decay), here they are in the AdamW group (issue 51 item 5); "
            "S5's `opt_config` (B fast or decayed, C decayed) and `dt_global` are not modelled: "
            "every state-space core parameter is in the ssm group", 4, 5, 4, 4, 4, 4),
        "train.weight_decay": same("{file}:{line} `--weight_decay`", 4, 6, 5, 4, 5, 5),
        "train.schedule": same("run_train.py:77 `--cosine_anneal` (default True); s5/train.py:172-176",
                               note="warm-up then cosine to lr_min 0; ours ends at 0.15% of peak"),
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
        "final norm": departure("s5/seq_model.py:55-67 (none)", "S5 has no final norm; here pre-norm "
                                "adds one (issue 51 item 7)", ours="a final BatchNorm"),
        "decoder": (
            departure("s5/seq_model.py:143 (one Dense)", "issue 51 item 7", tasks=but("retrieval"),
                      ours=DECODER),
            departure("s5/seq_model.py:206-207 (Dense(d)-GELU-Dense)", "issue 51 item 7",
                      tasks=only("retrieval"), ours=DECODER)),
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
        "model.dropout": (
            same("{file}:{line} `dropout`", 8, 11, 11, 12, 12, tasks=but("image")),
            departure("{file}:{line} `dropout`, `tie_dropout: true` (line 9)", DROPOUT_FORM, 8,
                      tasks=only("image"))),
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
        "attn.dt_min": same("{file}:{line} `dt_min`", 19, 22, 22, 17, 20, 20),
        "attn.dt_max": same("{file}:{line} `dt_max`", 20, 23, 23, 18, 21, 21),
        "attn.discretization": same("src/models/sequence/kernels/ssm.py (`disc='zoh'`, the default)"),
        "train.lr": same("{file}:{line} `optimizer: lr`", 32, 36, 32, 30, 33, 30),
        "train.ssm_lr": (
            departure("{file}:{line} `lr: {dt: null, A: 0.001, B: 0.001}`",
                      "A and B at 0.001 as here; `lr.dt: null` trains log-dt at the global lr "
                      "(0.01) without weight decay (src/models/sequence/kernels/kernel.py:111-122), "
                      "here it is in the ssm group at 0.001 (issue 51 item 3)", 15, 18, 18,
                      tasks=only("listops", "text", "retrieval")),
            same("{file}:{line} `layer: lr: 0.001` (dt, A, B)", 16, 19, 19, tasks=PIXEL_TASKS)),
        "train.weight_decay": departure(
            "{file}:{line} `weight_decay`; configs/config.yaml:42-44",
            "same value; S4 decays no bias, no norm parameter and no embedding "
            "(src/utils/optim_groups.py:25-38), here AdamW decays every non-ssm parameter "
            "(issue 51 item 2)", 33, 37, 33, 31, 34, 31),
        "train.schedule": departure("{file}:5 `override /scheduler: cosine_warmup`", SCHEDULE_END,
                                    ours="warm-up + cosine, ending at 2.4% of peak"),
        "train.b1": same("configs/optimizer/adamw.yaml:5 `betas: [0.9, 0.999]`"),
        "train.b2": same("configs/optimizer/adamw.yaml:5 `betas: [0.9, 0.999]`"),
        "train.eps": same("configs/optimizer/adamw.yaml (torch AdamW's default eps 1e-8)"),
        "train.grad_clip": same("configs/trainer/default.yaml:9 `gradient_clip_val: null`"),
        "train.batch_size": same("{file}:{line} `loader: batch_size`", 29, 33, 29, 27, 30, 27),
        "train.num_steps": (
            same("{file}:{line} `num_training_steps`", 36, 40, 37, 8, 8,
                 tasks=but("retrieval")),
            departure("{file}:{line} `num_training_steps: 50000`, `max_epochs: 20` (line 40)",
                      "the run stops at max_epochs 20 = 20 x 2,298 = 45,960 steps, before "
                      "num_training_steps (issue 51 item 8)", 36, tasks=only("retrieval"))),
        "train.warmup_steps": same("{file}:{line} `num_warmup_steps`", 37, 41, 37, 38, 9, 9),
        "train.eval_every": ours("derived: num_training_steps // max_epochs (one epoch); S4 "
                                 "validates once per epoch"),
        "train.checkpoint_every": CHECKPOINT,
    },
    around={
        "shared A (`n_ssm`)": (
            departure("{file}:{line} `n_ssm: 1`",
                      "S4 ties A and B across the channels (dt per channel); here every channel "
                      "has its own A (issue 51 item 6)", 23, 26, 26, 21,
                      tasks=only("listops", "text", "retrieval", "image"), ours="one A per channel"),
            same("{file}:{line} `n_ssm: null`", 24, 24, tasks=only("pathfinder", "pathx"),
                 note="one A per channel")),
        "direction": same("{file}:{line} `bidirectional: true`", 22, 25, 25, 20, 23, 23,
                          note="bidirectional"),
        "decoder": departure("configs/model/s4.yaml (a pooled linear decoder)", "issue 51 item 7",
                             ours=DECODER),
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
        "model.dropout": (
            _lru_paper("dropout", only("listops", "pathfinder", "pathx")),
            departure("P-LRU App. D, Tables 8-9 (dropout, <task> row); lru/model.py:119 "
                      "(`broadcast_dims=[0]`)", DROPOUT_FORM,
                      tasks=only("text", "retrieval", "image"))),
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
        "train.schedule": departure("P-LRU App. D (linear warm-up, then cosine to 1e-7)",
                                    SCHEDULE_END, paper=True, ours="cosine, ending at 2.4% of peak"),
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
        "model.bn_momentum": departure(
            "lru/model.py:116-118 (flax BatchNorm, momentum 0.99)",
            "the recipe sets none, so the encoder's default 0.9 applies (issue 51 item 8)"),
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
        "final norm": departure("lru/model.py:135-165 (none)", "minimal-LRU has no final norm; here "
                                "pre-norm adds one (issue 51 item 7)", ours="a final BatchNorm"),
        "decoder": departure("lru/model.py:191 (one Dense)", "issue 51 item 7", ours=DECODER),
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
        "model.channel_mixer": departure(
            "{file}:{line} `--activation-fn 'silu'`",
            "an FFN as Mega's; its activation is the MLP's GELU where Mega's is SiLU "
            "(issue 51 item 7)", 33, 51, 69, 87, 105, 123),
        "model.dropout": same("{file}:{line} `--dropout`", 37, 55, 73, 91, 109, 127),
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
            "{file}:{line} `--lr-scheduler linear_decay --end-learning-rate 0.0`",
            "Mega's linear decay to 0 runs as the cosine with LRA's cycle (same warm-up and peak), "
            "which ends at 0.3-34.5% of peak (issue 51 item 4)", 39, 57, 75, 93, 111, 129,
            ours="warm-up + cosine"),
        "train.b1": same("{file}:{line} `--adam-betas '(0.9, 0.98)'`", 36, 54, 72, 90, 108, 126),
        "train.b2": same("{file}:{line} `--adam-betas '(0.9, 0.98)'`", 36, 54, 72, 90, 108, 126),
        "train.eps": same("{file}:{line} `--adam-eps 1e-8`", 36, 54, 72, 90, 108, 126),
        "train.grad_clip": same("{file}:{line} `--clip-norm 1.0`", 36, 54, 72, 90, 108, 126),
        "train.batch_size": same("{file}:{line} `--batch-size` x `--update-freq` (Path-X: x 8 GPUs, "
                                 "line 12)", 38, 56, 74, 92, 110, 128),
        "train.grad_accum": same("{file}:{line} `--update-freq`", 38, 56, 74, 92, 110, 128),
        "train.num_steps": same("{file}:{line} `--max-update`", 38, 56, 74, 92, 110, 128),
        "train.warmup_steps": (
            same("{file}:{line} `--warmup-updates`", 40, 58, 76, 94, 112, tasks=but("pathx")),
            departure("{file}:{line} `--warmup-updates 25000 --warmup-power 2`",
                      "the same length, but Mega's Path-X warm-up is quadratic, ours linear "
                      "(issue 51 item 8)", 130, tasks=only("pathx"))),
        "train.eval_every": ours("derived: max-update // epochs (one epoch); fairseq validates "
                                 "once per epoch"),
        "train.checkpoint_every": CHECKPOINT,
    },
    around={
        "EMA truncation": departure(
            "fairseq/models/lra/model.py:{line} `truncation_length`",
            "the EMA kernel is not truncated here (Mega: 1024, Path-X 4096)",
            419, 474, 517, 575, 635, 663, ours="none"),
        "head activation": departure("fairseq/models/lra/model.py:379 `classifier_activation_fn` "
                                     "gelu", "issue 51 item 7", ours="ReLU"),
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
        "train.schedule": departure(
            "{file}:{line} `training_steps_dict` (the scheduler's horizon)",
            "the harness's cosine runs over a horizon of 50,000 or 500,000 steps that outlasts its "
            "runs (its rate ends at 18-95% of peak); ours keeps LRA's cycle and ends elsewhere "
            "(4-83%); configs/_recipes.py's \"the cosine ends with the run\" describes neither "
            "(issue 51 item 4)", 101, 100, 104, 99, 102, 103, ours="warm-up + cosine"),
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
                               "float32 here (issue 51 item 8)", ours="float32"),
        "use_series": (
            departure("{file}:{line} `use_series_dict`", "not modelled (issue 51 item 8)", 157,
                      tasks=only("pathx"), ours="—"),
            same("{file}:{line} `use_series_dict` (False)", 155, 154, 158, 153, 156,
                 tasks=but("pathx"))),
        "positions": (
            departure("{file}:{line} `encoder_dict` ('id': no positions)", POSITIONS, 145, 147,
                      tasks=only("text", "pathfinder"), ours="the LRA config's positions"),
            same("{file}:{line} `encoder_dict` ('position')", 146, 149, 144, 148,
                 tasks=only("listops", "retrieval", "image", "pathx"),
                 note="positions added, as here")),
        "decoder": departure("script_lra_others.sh:55 (the S4 harness's pooled linear decoder)",
                             "issue 51 item 7", ours=DECODER),
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
