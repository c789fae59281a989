"""Retrieval: do two AAN papers cite each other? Two documents of 4000 bytes, 2 classes (LRA section 1).

    python -m lra.data fetch-release --out DIR                      # once: the official LRA files
    python -m lra.run --task retrieval --attn softmax --data-dir DIR            # paper protocol
    python -m lra.run --task retrieval --attn linear --preset small --data-dir DIR
    python -m lra.run --task retrieval --attn softmax --preset tiny --data-dir DIR   # smoke run

``BASE`` is the LRA repository config (``matching/configs/base_match_config.py``;
LRA repo): 4 layers, d 128, 4 heads, qkv 128, MLP 512, dropout 0.1, CLS pooling (LRA's dual encoder
prepended no CLS token and pooled the first byte; ours prepends one), sinusoidal positions, batch 32,
lr 0.05 with 8000 warm-up steps and rsqrt decay, so over the 5000 steps the rate only rises (to
3.5e-4; LRA's schedule as it was), weight decay 0.1, validation every 100 steps. One shared encoder
reads both documents; the head is MLP([u, v, u*v, u-v]) (tasks/retrieval.py). LRA's per-model
matching configs change only the model type; the only delta is Performer's kernel.
``small`` reads the first 256 bytes of each document.
"""

import math

from lra.configs import _recipes
from lra.configs._recipes import COMMON

TRAIN_EXAMPLES = 147_086  # training examples of the full task (steps per epoch = this // batch)

BASE = {
    "model.emb_dim": 128, "model.num_heads": 4, "model.num_layers": 4, "model.qkv_dim": 128,
    "model.mlp_dim": 512, "model.dropout": 0.1, "model.attention_dropout": 0.1,
    "model.pooling": "cls", "model.positional": "sinusoidal",
    "train.batch_size": 32, "train.lr": 0.05, "train.schedule": "rsqrt",
    "train.warmup_steps": 8000, "train.weight_decay": 0.1, "train.num_steps": 5000,
    "train.eval_every": 100, "train.checkpoint_every": 500,
}

PRESETS = {
    "paper": {},
    "small": {
        "data.max_length": 256, "data.val_size": 1000, "data.test_size": 2000,
        "model.emb_dim": 64, "model.num_heads": 4, "model.num_layers": 2, "model.qkv_dim": 64,
        "model.mlp_dim": 128, "train.batch_size": 32, "train.lr": 0.05, "train.warmup_steps": 300,
        "train.weight_decay": 0.01, "train.num_steps": 2000, "train.eval_every": 250,
        "train.checkpoint_every": 500,
    },
    "tiny": {
        "data.max_length": 64, "data.train_size": 256, "data.val_size": 64, "data.test_size": 64,
        "model.emb_dim": 32, "model.num_heads": 2, "model.num_layers": 1, "model.qkv_dim": 32,
        "model.mlp_dim": 64, "train.batch_size": 16, "train.warmup_steps": 5,
        "train.num_steps": 20, "train.eval_every": 10, "train.checkpoint_every": 10,
        "train.log_every": 5,
    },
}

# LRA's Performer on Retrieval ran the deterministic ReLU ("generalized") kernel, not FAVOR+.
ATTENTION: dict[str, dict] = {
    "performer": {"attn.kernel": "relu"},
}


# --protocol modern (lra.config's docstring; docs/families-and-protocols.md "Two protocols"): "*" applies to
# every family on this task, the named entries are the families' published recipes at their full budget
# (configs/_recipes.py maps them to config keys and lists what this suite runs differently). Attention
# families keep their LRA size and budget above, with mean pooling and pre-norm.
MODERN: dict[str, dict] = {
    "*": dict(COMMON),
    # S5@3c18fdb bin/run_experiments/run_lra_aan.sh
    "s5": _recipes.s5(layers=6, d=128, p=256, j=16, c_init="trunc_standard_normal", clip_eigs=False,
        dt_min=1e-3, bn_momentum=0.95, dropout=0.0, ssm_lr=1e-3, lr_factor=2,
        weight_decay=0.05, warmup_epochs=1, epochs=20, batch=32,
        train_examples=TRAIN_EXAMPLES),
    # S4@e757cef configs/experiment/lra/s4-aan.yaml, model.layer.mode=diag
    "s4d": _recipes.s4d(d=256, n=4, n_ssm=1, prenorm=True, dropout=0.0, dt_min=1e-3, lr=0.01,
        weight_decay=0.05, batch=64, steps=45_960, warmup=5_000, epochs=20,
        schedule_steps=50_000,  # the run stops at max_epochs 20 = 20 x 2298 steps (s4-aan.yaml 36-40)
        dt_group="no_decay"),  # s4-aan.yaml line 19: lr.dt null
    # P-LRU App. D, Tables 8-9 (retrieval row)
    "lru": _recipes.lru(d=128, n=256, steps=100_000, batch=64, lr_factor=0.5, weight_decay=0.05,
        dropout=0.1, r_min=0.5, r_max=0.9, max_phase=2 * math.pi,
        train_examples=TRAIN_EXAMPLES),
    # MEGA@aeaa4b4 examples/mega/README.lra.md + fairseq/models/lra/model.py (retrieval)
    "mega": _recipes.mega(layers=6, d=128, hidden=256, z=64, attn_fn="softmax", norm="layer",
        prenorm=False, lr=3e-3, weight_decay=0.04, dropout=0.1, batch=8,
        update_freq=8, steps=91_960, warmup=10_000, epochs=40),
}

# The 2023-25 mixers (issue 26). gla: HGRN2's LRA recipe, OpenNLPLab/HGRN2@b154c39 run_lra.py
# (task 'aan'); the others published none: the S5 recipe above (configs/_recipes.py).
MODERN["gla"] = _recipes.hgrn2(
    layers=2, d=256, expand_ratio=2, expand_ratio_glu=2, norm="batch", lr=0.005, weight_decay=0.0,
    dropout=0.0, warmup=312, batch=128, grad_clip=1.0, epochs=20, schedule_steps=50_000,
    train_examples=TRAIN_EXAMPLES)
MODERN.update({name: _recipes.no_lra_recipe(MODERN["s5"]) for name in _recipes.NO_LRA_RECIPE})
