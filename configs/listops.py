"""ListOps: hierarchical list operations, 10 classes, up to 2000 tokens (LRA section 1).

    python -m lra.run --task listops --attn softmax                   # paper protocol
    python -m lra.run --task listops --attn cosformer --preset small  # minutes on a laptop CPU
    python -m lra.run --task listops --attn softmax --preset tiny     # smoke run, < 1 minute

``BASE`` is the LRA repository config (google-research/long-range-arena): 4 layers, d 512, 8 heads, qkv 512,
MLP 1024, dropout 0.1, CLS pooling, sinusoidal positions, batch 32, lr 0.05 with 1000 warm-up steps
and rsqrt decay (peak 1.58e-3), weight decay 0.1, 5000 steps, validation every 50 steps.
``small`` trains on a shorter ListOps (lengths 20-150, depth <= 6) that a small model learns on a CPU.
"""

import math

from lra.configs import _recipes
from lra.configs._recipes import COMMON

TRAIN_EXAMPLES = 96_000  # training examples of the full task (steps per epoch = this // batch)

BASE = {
    "model.emb_dim": 512, "model.num_heads": 8, "model.num_layers": 4, "model.qkv_dim": 512,
    "model.mlp_dim": 1024, "model.dropout": 0.1, "model.attention_dropout": 0.1,
    "model.pooling": "cls", "model.positional": "sinusoidal",
    "train.batch_size": 32, "train.lr": 0.05, "train.schedule": "rsqrt",
    "train.warmup_steps": 1000, "train.weight_decay": 0.1, "train.num_steps": 5000,
    "train.eval_every": 50, "train.checkpoint_every": 500,
}

PRESETS = {
    "paper": {},
    "small": {
        "data.min_length": 20, "data.max_length": 150, "data.max_depth": 6,
        "data.train_size": 20000, "data.val_size": 1000, "data.test_size": 1000,
        "model.emb_dim": 64, "model.num_heads": 4, "model.num_layers": 2, "model.qkv_dim": 64,
        "model.mlp_dim": 128, "model.dropout": 0.0, "model.attention_dropout": 0.0,
        "train.batch_size": 32, "train.lr": 0.05, "train.warmup_steps": 300,
        "train.weight_decay": 0.01, "train.num_steps": 1000, "train.eval_every": 200,
        "train.checkpoint_every": 500,
    },
    "tiny": {
        "data.min_length": 5, "data.max_length": 40, "data.max_depth": 3,
        "data.train_size": 256, "data.val_size": 64, "data.test_size": 64,
        "model.emb_dim": 32, "model.num_heads": 2, "model.num_layers": 1, "model.qkv_dim": 32,
        "model.mlp_dim": 64, "train.batch_size": 16, "train.warmup_steps": 5,
        "train.num_steps": 20, "train.eval_every": 10, "train.checkpoint_every": 10,
        "train.log_every": 5,
    },
}

# Per-family deltas that LRA's ListOps configs set (google-research/long-range-arena): the ListOps
# Performer ran softmax FAVOR+ with 2 random features (the other tasks ran the ReLU kernel).
# (With CLS pooling, lra.config makes the CLS token global for every family that has a
# ``global_tokens`` option: local, sparse, longformer.)
ATTENTION: dict[str, dict] = {
    "performer": {"attn.kernel": "softmax", "attn.nb_features": 2},
}


# --protocol modern (lra.config's docstring; docs/families-and-protocols.md "Two protocols"): "*" applies to
# every family on this task, the named entries are the families' published recipes at their full budget
# (configs/_recipes.py maps them to config keys and lists what this suite runs differently). Attention
# families keep their LRA size and budget above, with mean pooling and pre-norm.
MODERN: dict[str, dict] = {
    "*": dict(COMMON),
    # S5@3c18fdb bin/run_experiments/run_lra_listops.sh
    "s5": _recipes.s5(layers=8, d=128, p=16, j=8, c_init="lecun_normal", clip_eigs=False, dt_min=1e-3,
        bn_momentum=0.95, dropout=0.0, ssm_lr=1e-3, lr_factor=3, weight_decay=0.04,
        warmup_epochs=1, epochs=40, batch=50,
        train_examples=TRAIN_EXAMPLES),
    # S4@e757cef configs/experiment/lra/s4-listops.yaml, model.layer.mode=diag
    "s4d": _recipes.s4d(d=256, n=4, n_ssm=1, prenorm=False, dropout=0.0, dt_min=1e-3, lr=0.01,
        weight_decay=0.05, batch=32, steps=120_000, warmup=12_000, epochs=40,
        dt_group="no_decay"),  # s4-listops.yaml line 16: lr.dt null
    # P-LRU App. D, Tables 8-9 (listops row)
    "lru": _recipes.lru(d=128, n=256, steps=80_000, batch=32, lr_factor=0.5, weight_decay=0.05,
        dropout=0.0, r_min=0.0, r_max=0.99, max_phase=2 * math.pi,
        train_examples=TRAIN_EXAMPLES),
    # MEGA@aeaa4b4 examples/mega/README.lra.md + fairseq/models/lra/model.py (listops)
    "mega": _recipes.mega(layers=6, d=80, hidden=160, z=64, attn_fn="softmax", norm="layer",
        prenorm=False, lr=1e-3, weight_decay=0.01, dropout=0.1, batch=64,
        update_freq=1, steps=90_000, warmup=3_000, epochs=60),
}

# The 2023-25 mixers (issue 26). gla: HGRN2's LRA recipe, OpenNLPLab/HGRN2@b154c39 run_lra.py
# (task 'listops'); the others published none: the S5 recipe above (configs/_recipes.py).
MODERN["gla"] = _recipes.hgrn2(
    layers=5, d=64, expand_ratio=4, expand_ratio_glu=1, norm="batch", lr=0.0005, weight_decay=0.0,
    dropout=0.0, warmup=5000, batch=128, grad_clip=0.0, epochs=50, schedule_steps=50_000,
    train_examples=TRAIN_EXAMPLES)
MODERN.update({name: _recipes.no_lra_recipe(MODERN["s5"]) for name in _recipes.NO_LRA_RECIPE})
