"""Path-X: Pathfinder at 128x128, 16,384 tokens, 2 classes (every LRA model scored at chance).

    python -m lra.run --task pathx --attn performer                   # paper protocol
    python -m lra.run --task pathx --attn linear --preset small       # a CPU run (see below)
    python -m lra.run --task pathx --attn linear --preset tiny        # smoke run, < 1 minute

The images (200,000 for the paper protocol, "hard": snakes of 14 dashes) are generated on first
use into ``<data dir>/pathfinder/pathfinder128/``: about half a CPU-second per image, so some 30
CPU-hours for the full set (a few hours on a many-core machine; an interrupted generation resumes
where it stopped), or read from an unpacked ``lra_release`` given as the data directory.

Training is LRA's ``image/configs/pathfinder128/base_pathfinder128_config.py`` (LRA repo,
config docs): batch 64, lr 1e-3 with one epoch (2,500 steps) of linear warm-up then cosine decay
over 200 epochs (500,000 steps), no weight decay, gradient clipping at global norm 1.0, validation
every epoch; model 1 layer, 2 heads, d 32, qkv 16, MLP 32, dropout 0.1 / 0.1, mean pooling,
learned positions. LRA has no per-model Path-X configs; the Performer runs the ReLU kernel, LRA's
"generalized" default.

At 16,384 tokens a quadratic family needs about 1 GiB per head and example for the attention
matrix alone. Softmax therefore runs here with ``attn.query_chunk=512``: its blocked online-softmax
path (attention/_flash.py) with blocks of 512, a running max and sum over key blocks, each block
recomputed in the backward pass: memory linear in L, same result, still O(L^2) time. The other
quadratic families (synthesizer, sparse) are meant for accelerators.

``tiny``: 16 images (12 / 2 / 2; about 10 CPU-seconds to generate), 4 steps of batch 8: under a
minute for a linear-time family; softmax, quadratic at 16K tokens, took 8 minutes on 2 CPU cores
(5.8 GB peak). ``small``: 2,000 images (about 15 CPU-minutes to generate,
once), 1 layer, d 32, batch 8, 300 steps: minutes for a linear-time family on a laptop CPU (at
chance, as every LRA model was).
"""

import math

from lra.configs import _recipes
from lra.configs._recipes import COMMON, PIXELS

TRAIN_EXAMPLES = 160_000  # training examples of the full task (steps per epoch = this // batch)

BASE = {
    "model.emb_dim": 32, "model.num_heads": 2, "model.num_layers": 1, "model.qkv_dim": 16,
    "model.mlp_dim": 32, "model.dropout": 0.1, "model.attention_dropout": 0.1,
    "model.pooling": "mean", "model.positional": "learned",
    "train.batch_size": 64, "train.lr": 1e-3, "train.schedule": "cosine",
    "train.warmup_steps": 2500, "train.weight_decay": 0.0, "train.grad_clip": 1.0,
    "train.num_steps": 500_000, "train.eval_every": 2500, "train.checkpoint_every": 2500,
}

PRESETS = {
    "paper": {},
    "small": {
        "data.num_images": 2000,
        "model.emb_dim": 32, "model.num_heads": 2, "model.num_layers": 1, "model.qkv_dim": 32,
        "model.mlp_dim": 64, "model.dropout": 0.0, "model.attention_dropout": 0.0,
        "train.batch_size": 8, "train.lr": 1e-3, "train.warmup_steps": 30,
        "train.num_steps": 300, "train.eval_every": 100, "train.checkpoint_every": 100,
    },
    "tiny": {
        "data.num_images": 16,
        "model.emb_dim": 16, "model.num_heads": 2, "model.num_layers": 1, "model.qkv_dim": 16,
        "model.mlp_dim": 16, "train.batch_size": 8, "train.warmup_steps": 2,
        "train.num_steps": 4, "train.eval_every": 2, "train.checkpoint_every": 4,
        "train.log_every": 2,
    },
}

ATTENTION: dict[str, dict] = {
    "performer": {"attn.kernel": "relu"},
    # Dense scores would be 1 GiB per head and example: the blocked path with blocks of 512,
    # recomputed in the backward pass, keeps softmax within a few GiB at batch 8 (same result).
    "softmax": {"attn.query_chunk": 512},
}


# --protocol modern (lra.config's docstring; docs/families-and-protocols.md "Two protocols"): "*" applies to
# every family on this task, the named entries are the families' published recipes at their full budget
# (configs/_recipes.py maps them to config keys and lists what this suite runs differently). Attention
# families keep their LRA size and budget above, with mean pooling and pre-norm.
# Pixels: values normalised by task.pixel_stats through a linear encoder (S5, S4, Mega).
MODERN: dict[str, dict] = {
    "*": {**COMMON, **PIXELS},
    # S5@3c18fdb bin/run_experiments/run_lra_pathx.sh
    "s5": _recipes.s5(layers=6, d=128, p=256, j=16, c_init="complex_normal", clip_eigs=False, dt_min=1e-4,
        bn_momentum=0.9, dropout=0.0, ssm_lr=6e-4, lr_factor=3, weight_decay=0.06,
        warmup_epochs=1, epochs=75, batch=32,
        train_examples=TRAIN_EXAMPLES),
    # S4@e757cef configs/experiment/lra/s4-pathx.yaml, model.layer.mode=diag
    "s4d": _recipes.s4d(d=256, n=64, prenorm=True, dropout=0.0, dt_min=1e-4, lr=0.001,
        weight_decay=0.05, batch=16, steps=500_000, warmup=50_000, epochs=50),
    # P-LRU App. D, Tables 8-9 (pathx row)
    "lru": _recipes.lru(d=128, n=256, steps=250_000, batch=32, lr_factor=0.25, weight_decay=0.05,
        dropout=0.0, r_min=0.999, r_max=0.9999, max_phase=math.pi / 10,
        train_examples=TRAIN_EXAMPLES),
    # MEGA@aeaa4b4 examples/mega/README.lra.md + fairseq/models/lra/model.py (pathx)
    "mega": _recipes.mega(layers=4, d=64, hidden=128, z=32, attn_fn="laplace", norm="batch",
        prenorm=True, lr=0.01, weight_decay=0.01, dropout=0.0, batch=16,
        update_freq=8, steps=125_000, warmup=25_000, epochs=100,
        warmup_power=2),  # README.lra.md line 130: --warmup-power 2
}

# The 2023-25 mixers (issue 26). gla: HGRN2's LRA recipe, OpenNLPLab/HGRN2@b154c39 run_lra.py
# (task 'pathfinderx'); the others published none: the S5 recipe above (configs/_recipes.py).
MODERN["gla"] = _recipes.hgrn2(
    layers=6, d=32, expand_ratio=1, expand_ratio_glu=1, norm="batch", lr=0.00075, weight_decay=0.0,
    dropout=0.0, warmup=150000, batch=256, grad_clip=1.0, epochs=200, schedule_steps=500_000,
    train_examples=TRAIN_EXAMPLES)
MODERN.update({name: _recipes.no_lra_recipe(MODERN["s5"]) for name in _recipes.NO_LRA_RECIPE})
