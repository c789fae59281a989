"""The published recipes of the modern families as config keys, for ``MODERN`` in configs/<task>.py.

Each function takes the numbers one task's published run used (the task file passes them, with
their source) and returns the ``--protocol modern`` layer of that family: model, options, optimiser,
schedule and the full budget (``paper`` scale). Sources: the papers and repositories cited per recipe below
(S5 section 1, S4D section 2, LRU section 3, Mega section 4). Steps per epoch are derived here as
train examples // batch (the trainer drops no example: it draws epoch permutations).

What this suite cannot express, and what runs instead (S5's ``half_glu2``, ``dt_global`` and
``opt_config``; S4D-LegS; S4's second element-wise dropout inside ``FFTConv``; LRU's
one-directional runs and untabulated base lr; Mega's ScaleNorm, EMA truncation, FFN hidden
dropout (``--act-dropout 0``) and classifier (dropout, no last bias, [u, v] on Retrieval); HGRN2's
bf16, ``use_series`` and unpublished decoder; the encoder's positions), is stated per value,
with the source of every value, in configs/_sources.py (docs/families-and-protocols.md "Where
each recipe value comes from" shows it as tables).

Around the mixer the recipes set what each source does (``model.dropout_form``,
``model.input_dropout``, ``model.final_norm``, ``model.head``, ``model.head_activation``,
``model.mlp_activation``, ``model.bn_momentum``, ``attn.n_ssm``); a family without an LRA recipe
(``no_lra_recipe``) inherits S5's.

Also not modelled (each also in configs/_sources.py):

* Every warm-up starts from 0 (LRU's paper and Mega's scripts start it at 1e-7). The schedules
  count steps from 1 where S4 (transformers) and fairseq count from 0 and S5 sets each step's rate
  after it: up to one or two steps apart.
* S4D on Image, Pathfinder and Path-X: S4's scalar ``layer.lr: 0.001`` applies to every
  parameter the kernel registers, C included (src/models/sequence/kernels/kernel.py lines 83-84,
  ssm.py line 531), so C trains at 1e-3 with weight decay there; here C is in the default group
  (the task's lr). HGRN2's harness (S4's trainer) has weight decay 0, so S4's decay exclusions
  change nothing there and are not set.
"""

from __future__ import annotations

# Every family under the modern protocol: the encoder of the modern recipes.
COMMON = {"model.pooling": "mean", "model.prenorm": True}
PIXELS = {"model.input_encoder": "linear"}  # normalised pixel values (task.pixel_stats), not 256 ids


def _budget(train_examples: int, batch: int, epochs: int, warmup_epochs: float) -> dict:
    per_epoch = train_examples // batch
    return {"train.batch_size": batch, "train.num_steps": epochs * per_epoch,
            "train.warmup_steps": int(warmup_epochs * per_epoch), "train.eval_every": per_epoch,
            "train.checkpoint_every": per_epoch}


# Around the mixer, S5@3c18fdb: dropout tied across the sequence (s5/layers.py lines 49-53,
# broadcast_dims=[0] on one example's [L, H]), no input dropout (s5/seq_model.py lines 39, 64-67: a
# Dense encoder, then the layers), no final norm (the same lines), a linear decoder (line 143), and
# for Retrieval Dense(d) -> GELU -> Dense (RetrievalDecoder, lines 188-219).
_S5_ENCODER = {"model.dropout_form": "tied", "model.input_dropout": False,
               "model.final_norm": False, "model.head": "linear", "model.head_activation": "gelu"}


def s5(*, layers: int, d: int, p: int, j: int, c_init: str, clip_eigs: bool, dt_min: float,
       bn_momentum: float, dropout: float, ssm_lr: float, lr_factor: float, weight_decay: float,
       warmup_epochs: int, epochs: int, batch: int, train_examples: int) -> dict:
    """S5@3c18fdb bin/run_experiments/run_lra_<task>.sh (table 1.1); defaults of run_train.py
    (prenorm, BatchNorm, conj_sym, ZOH, cosine annealing to ``lr_min`` 0 as S5's loop computes it:
    ``cosine_s5``, lra/optim.py; AdamW). S5's norm parameters train with its regular group (AdamW
    at lr, with weight decay), as here: its ``ssm`` label list names ``norm``, but
    ``map_nested_fn`` (s5/train_helpers.py lines 68-80) labels the leaves ``scale`` and ``bias``,
    never the ``norm`` module, so that entry matches nothing (s5/train_helpers.py 146-151). The
    encoder around the mixer as ``_S5_ENCODER`` says."""
    return {
        "model.num_layers": layers, "model.emb_dim": d, "model.qkv_dim": d, "model.mlp_dim": d,
        "model.num_heads": 1, "model.norm": "batch", "model.prenorm": True,
        "model.channel_mixer": "glu", "model.bn_momentum": bn_momentum, "model.dropout": dropout,
        "model.attention_dropout": 0.0, **_S5_ENCODER,
        "attn.state_size": p, "attn.blocks": j, "attn.c_init": c_init, "attn.clip_eigs": clip_eigs,
        "attn.dt_min": dt_min, "attn.dt_max": 0.1, "attn.conj_sym": True,
        "attn.discretization": "zoh",
        "train.lr": lr_factor * ssm_lr, "train.ssm_lr": ssm_lr, "train.weight_decay": weight_decay,
        "train.schedule": "cosine_s5", "train.lr_min": 0.0, "train.b1": 0.9, "train.b2": 0.999,
        "train.eps": 1e-8, "train.grad_clip": 0.0,
        **_budget(train_examples, batch, epochs, warmup_epochs),
    }


def s4d(*, d: int, n: int, n_ssm: int | None = None, prenorm: bool, dropout: float, dt_min: float,
        lr: float, weight_decay: float, batch: int, steps: int, warmup: int, epochs: int,
        dt_group: str = "ssm", schedule_steps: int | None = None) -> dict:
    """S4@e757cef configs/experiment/lra/s4-<task>.yaml with ``model.layer.mode=diag`` (table 2.4): 6
    layers, BatchNorm, bidirectional, mean pooling, AdamW (0.9, 0.999), kernel parameters at lr 1e-3
    without weight decay, no weight decay on the backbone's biases and norm parameters
    (configs/config.yaml lines 42-44: ``decay_exclude="bias_norm"``, lra/optim.py), the transformers
    cosine with warm-up (configs/scheduler/cosine_warmup.yaml) to 0 at ``scheduler.num_training_steps``
    (``schedule_steps``; default ``steps``). ``steps`` is the run: S4 stops at ``trainer.max_epochs`` when
    that comes first (Retrieval). ``dt_group="no_decay"`` where the config sets ``lr.dt: null`` (log dt at
    the global lr, weight decay 0: src/models/sequence/kernels/kernel.py lines 83-86 and 111-122).
    ``n_ssm``: the config's ``n_ssm`` (1: one A for every channel; None, the S4 default for Pathfinder and
    Path-X: one per channel). Around the mixer: dropout tied across the sequence (configs/model/s4.yaml
    line 6, ``tie_dropout: true``), no input dropout (src/models/sequence/backbones/model.py lines 53, 63:
    ``dropinp`` 0), a final norm under pre-norm only (the same file, lines 102-110), the pooled linear
    decoder (src/tasks/decoders.py ``SequenceDecoder``, line 43) and for Retrieval Dense(d) -> GELU ->
    Dense (configs/pipeline/aan.yaml, decoders.py ``RetrievalHead``, lines 178-205)."""
    return {
        "model.num_layers": 6, "model.emb_dim": d, "model.qkv_dim": d, "model.mlp_dim": d,
        "model.num_heads": 1, "model.norm": "batch", "model.prenorm": prenorm,
        "model.channel_mixer": "glu", "model.dropout": dropout, "model.attention_dropout": 0.0,
        "model.dropout_form": "tied", "model.input_dropout": False, "model.head": "linear",
        "model.head_activation": "gelu",
        "attn.state_size": n, "attn.init": "inv", "attn.dt_min": dt_min, "attn.dt_max": 0.1,
        "attn.discretization": "zoh", **({} if n_ssm is None else {"attn.n_ssm": n_ssm}),
        "train.lr": lr, "train.ssm_lr": 1e-3, "train.weight_decay": weight_decay,
        "train.dt_group": dt_group, "train.decay_exclude": "bias_norm",
        "train.schedule": "cosine_to_min", "train.lr_min": 0.0,
        "train.schedule_horizon": (schedule_steps or steps) / steps,
        "train.b1": 0.9, "train.b2": 0.999, "train.eps": 1e-8,
        "train.grad_clip": 0.0, "train.batch_size": batch, "train.num_steps": steps,
        "train.warmup_steps": warmup, "train.eval_every": steps // epochs,
        "train.checkpoint_every": steps // epochs,
    }


LRU_BASE_LR = 1e-3  # mLRU@bbd71b1 run_train.py lr_base (the paper's tuned base lr is not tabulated)
LRU_LR_MIN = 1e-7  # P-LRU App. D: cosine annealing to 1e-7 (mLRU@bbd71b1 run_train.py line 70 too)


def lru(*, d: int, n: int, steps: int, batch: int, lr_factor: float, weight_decay: float,
        dropout: float, r_min: float, r_max: float, max_phase: float, train_examples: int) -> dict:
    """P-LRU App. D, Tables 8-9 (table 3.2): 6 blocks, BatchNorm, pre-norm, GLU, AdamW, warm-up over
    the first 10% then cosine to 1e-7 at the end of the run (``cosine_to_min``, ``lr_min`` 1e-7);
    Lambda, B, gamma at lr = base x factor, no weight decay. Around the
    mixer, mLRU@bbd71b1 lru/model.py: dropout tied across the sequence (line 119,
    ``broadcast_dims=[0]``), no input dropout and no final norm (lines 147, 160-163: a Dense
    encoder, then the layers), one Dense decoder (line 191), flax BatchNorm's default momentum 0.99 (lines
    116-118). mLRU has no two-tower model: Retrieval decodes as S5's (Dense(d) -> GELU -> Dense)."""
    per_epoch = train_examples // batch
    return {
        "model.num_layers": 6, "model.emb_dim": d, "model.qkv_dim": d, "model.mlp_dim": d,
        "model.num_heads": 1, "model.norm": "batch", "model.prenorm": True,
        "model.channel_mixer": "glu", "model.dropout": dropout, "model.attention_dropout": 0.0,
        "model.bn_momentum": 0.99, **_S5_ENCODER,
        "attn.state_size": n, "attn.r_min": r_min, "attn.r_max": r_max, "attn.max_phase": max_phase,
        "train.lr": LRU_BASE_LR, "train.ssm_lr": LRU_BASE_LR * lr_factor,
        "train.weight_decay": weight_decay, "train.schedule": "cosine_to_min",
        "train.lr_min": LRU_LR_MIN, "train.b1": 0.9,
        "train.b2": 0.999, "train.eps": 1e-8, "train.grad_clip": 0.0, "train.batch_size": batch,
        "train.num_steps": steps, "train.warmup_steps": steps // 10,
        "train.eval_every": per_epoch, "train.checkpoint_every": per_epoch,
    }


def mega(*, layers: int, d: int, hidden: int, z: int, attn_fn: str, norm: str, prenorm: bool,
         lr: float, weight_decay: float, dropout: float, batch: int, update_freq: int, steps: int,
         warmup: int, epochs: int, warmup_power: int = 1) -> dict:
    """MEGA@aeaa4b4 examples/mega/README.lra.md and fairseq/models/lra/model.py (table 4.4): EMA
    ndim 16, full attention (Mega, not Mega-chunk), FFN dim = hidden, Adam (0.9, 0.98) eps 1e-8 with
    decoupled weight decay on every parameter (one group), gradient clipping at 1.0, fairseq's
    ``linear_decay`` to ``--end-learning-rate 0`` at ``--total-num-update`` (= the run's steps),
    warm-up to the power ``--warmup-power`` (2 on Path-X). The FFN's
    activation is SiLU (``activation_fn`` of every ``mega_lra_*`` architecture, e.g. model.py line
    414) and the classifier one hidden layer of the FFN width with GELU (``classifier_layers`` 1,
    ``classifier_out_dim`` = hidden, ``classifier_activation_fn`` gelu, lines 53-66, 379, 416-417).
    Mega's classifier drops out its hidden layer and has no bias on the last one; on Retrieval it
    reads [u, v] where this suite's two-tower head reads [u, v, u*v, u-v] (tasks/_heads.py)."""
    return {
        "model.num_layers": layers, "model.emb_dim": d, "model.qkv_dim": d, "model.mlp_dim": hidden,
        "model.num_heads": 1, "model.norm": norm, "model.prenorm": prenorm,
        "model.channel_mixer": "mlp", "model.dropout": dropout, "model.attention_dropout": 0.0,
        "model.mlp_activation": "silu", "model.head": "mlp", "model.head_activation": "gelu",
        "attn.ndim": 16, "attn.z_dim": z, "attn.hidden_dim": hidden, "attn.attn_fn": attn_fn,
        "attn.chunk_size": 0,
        "train.lr": lr, "train.ssm_lr": 0.0, "train.weight_decay": weight_decay,
        "train.schedule": "linear_decay", "train.lr_min": 0.0, "train.warmup_power": warmup_power,
        "train.b1": 0.9, "train.b2": 0.98, "train.eps": 1e-8,
        "train.grad_clip": 1.0, "train.batch_size": batch * update_freq,
        "train.grad_accum": update_freq, "train.num_steps": steps, "train.warmup_steps": warmup,
        "train.eval_every": steps // epochs, "train.checkpoint_every": steps // epochs,
    }


# The 2023-25 mixers (issue 26). Of them only HGRN2 published an LRA recipe (used for ``gla``);
# mamba, mamba2, retnet, gated_deltanet and mlstm have none (none of their papers reports LRA).
NO_LRA_RECIPE = ("mamba", "mamba2", "retnet", "gated_deltanet", "mlstm")


def hgrn2(*, layers: int, d: int, expand_ratio: int, expand_ratio_glu: int, norm: str, lr: float,
          weight_decay: float, dropout: float, warmup: int, batch: int, grad_clip: float,
          epochs: int, schedule_steps: int, train_examples: int) -> dict:
    """OpenNLPLab/HGRN2@b154c39 run_lra.py (per-task dictionaries) and script_lra_*.sh: the S4-style
    harness with pre-norm, mean pooling over true lengths ("decoder.mode=pool"), AdamW with a cosine
    schedule after ``warmup`` steps, bf16, seed 2222, the layer-wise lower bound on. HGRN2's state
    expansion ``expand_ratio`` is the width of one head (heads = d / expand_ratio); its GLU channel
    mixer (width ``expand_ratio_glu`` x d) runs as the encoder's MLP of that width; the key width is
    d (``attn.expand_k=1``, HGRN2's forget-gate width, in place of GLA's d / 2); "synbatch" runs
    as BatchNorm. The recipe keeps ``attn.variant`` at the family's default (GLA): HGRN2 itself is
    ``--set attn.variant=hgrn2`` on top (attention/gla.py: with one fixed lower bound, not a learned
    layer-wise one). Image, Pathfinder and Path-X ran a 2-D four-direction scan (``hgrn2_2d``);
    here they run the 1-D bidirectional form. Budget: ``epochs`` (trainer.max_epochs) of
    train_examples // batch steps; the cosine (with warm-up, to 0) is scheduled over the harness's
    own horizon ``schedule_steps`` (scheduler.num_training_steps, run_lra.py lines 98-105), which
    is not the run's length: the run ends part-way down the cosine (ListOps at 18% of the peak,
    Pathfinder at 93%) or, on Image, past the horizon where the cosine rises again (4.5%), as in
    the harness. The scheduler's type is set by the harness's experiment config, which HGRN2's
    repository does not hold; the S4 repository's ``cosine_warmup`` is assumed, as the
    ``scheduler.num_warmup_steps`` / ``num_training_steps`` keys it sets suggest."""
    return {
        "model.num_layers": layers, "model.emb_dim": d, "model.qkv_dim": d,
        "model.mlp_dim": expand_ratio_glu * d, "model.num_heads": d // expand_ratio,
        "model.norm": norm, "model.prenorm": True, "model.channel_mixer": "mlp",
        "model.dropout": dropout, "model.attention_dropout": 0.0, "attn.expand_k": 1.0,
        "train.lr": lr, "train.ssm_lr": 0.0, "train.weight_decay": weight_decay,
        "train.schedule": "cosine_to_min", "train.lr_min": 0.0,
        "train.schedule_horizon": schedule_steps / (epochs * (train_examples // batch)),
        "train.b1": 0.9, "train.b2": 0.999, "train.eps": 1e-8, "train.grad_clip": grad_clip,
        **_budget(train_examples, batch, epochs, 0), "train.warmup_steps": warmup,
    }


def no_lra_recipe(s5_recipe: dict) -> dict:
    """A family without a published LRA recipe (``NO_LRA_RECIPE``) runs the task's S5 recipe (model
    size, BatchNorm, GLU, optimiser with ``ssm_lr`` for the state-space core, budget), without S5's
    own options (``attn.*``) and its single head (the task's LRA head count is kept). The encoder
    around the mixer is part of that recipe and stays S5's (tied dropout, no input dropout, no
    final norm, S5's decoders): only S5's mixer is swapped out."""
    return {k: v for k, v in s5_recipe.items() if not k.startswith("attn.") and k != "model.num_heads"}
