"""Pathfinder: are two markers on one snake? 32x32 images read pixel by pixel, 1024 tokens, 2 classes.

    python -m lra.run --task pathfinder --attn softmax                   # paper protocol
    python -m lra.run --task pathfinder --attn linear --preset small     # minutes on a laptop CPU
    python -m lra.run --task pathfinder --attn softmax --preset tiny     # smoke run, < 1 minute

The images (200,000 for the paper protocol, "hard": snakes of 14 dashes) are generated on first
use into ``<data dir>/pathfinder/pathfinder32/`` (about 1 CPU-hour, spread over every core), or
read from an unpacked ``lra_release`` given as the data directory.

Training is LRA's ``image/configs/pathfinder32/base_pathfinder32_config.py`` (LRA repo,
config docs): batch 512, lr 1e-3 with one epoch (312 steps) of linear warm-up then cosine decay over
200 epochs (62,400 steps), no weight decay, no gradient clipping, validation every epoch, attention
dropout 0.1, mean pooling, sinusoidal positions. Every LRA model config overrides the base file's
1-layer model, so ``BASE`` takes the Transformer's size from ``transformer_base.py`` lines 24-29 at
the repository's HEAD cd31e5c (4 layers, 4 heads, d 32, qkv 16, MLP 32, dropout 0.2; commit ee6649e
"Add the missing config ..." replaced the older 1/4/128/64/128 this suite used before). Families
LRA never configured (cosformer, nystromformer, luna, fnet, any new one) run at the Transformer's
size, and ``ATTENTION`` holds the other LRA models' sizes
(``image/configs/pathfinder32/<model>_base.py``), layers/heads/emb/qkv/mlp:

    local        2/4/64/32/64, block 64, dropout 0.1 (the base's)
    sparse       1/8/32/16/32
    longformer   2/2/32/16/32, dropout 0.1
    linformer    1/2/32/16/32
    reformer     2/8/64/32/64
    sinkhorn     2/4/32/16/64, block 64
    synthesizer  2/4/64/32/64 (random mode)
    bigbird      4/2/64/32/64, block 64
    linear       1/2/128/64/128
    performer    4/8/32/16/32, ReLU kernel (LRA's "generalized" default; issue #37 says the
                 intended size was 1/8/128/64/128)

(dropout 0.2 unless noted). ``LRA_SIZES`` names, for each family that runs at a size other than the
Transformer's, the LRA file that sets it; tests/attention/test_comparability.py checks that every other
family's parameter count is within 10% of the Transformer's.

What a preset sets wins over these deltas, as on every task (lra.config applies the preset after
the family), so a tiny run stays tiny; the deltas' other keys still apply.

``small``: 8,000 images (6,400 / 800 / 800; about 2 CPU-minutes to generate), 2 layers, d 32,
batch 32, 600 steps with lr 1e-3: a few minutes for a linear-time family (``linear``, ``performer``,
``cosformer``, ...) on a laptop CPU, several times longer for ``softmax``. Pathfinder is known to sit
at chance for a long time before it takes off (LRA issues #37, #60), so a CPU run shows the pipeline
working, not the task solved.
"""

import math

from lra.configs import _recipes
from lra.configs._recipes import COMMON, PIXELS

TRAIN_EXAMPLES = 160_000  # training examples of the full task (steps per epoch = this // batch)

BASE = {
    "model.emb_dim": 32, "model.num_heads": 4, "model.num_layers": 4, "model.qkv_dim": 16,
    "model.mlp_dim": 32, "model.dropout": 0.2, "model.attention_dropout": 0.1,
    "model.pooling": "mean", "model.positional": "sinusoidal",
    "train.batch_size": 512, "train.lr": 1e-3, "train.schedule": "cosine",
    "train.warmup_steps": 312, "train.weight_decay": 0.0, "train.grad_clip": 0.0,
    "train.num_steps": 62400, "train.eval_every": 312, "train.checkpoint_every": 3120,
}

PRESETS = {
    "paper": {},
    "small": {
        "data.num_images": 8000,
        "model.emb_dim": 32, "model.num_heads": 2, "model.num_layers": 2, "model.qkv_dim": 32,
        "model.mlp_dim": 64, "model.dropout": 0.0, "model.attention_dropout": 0.0,
        "train.batch_size": 32, "train.lr": 1e-3, "train.warmup_steps": 50,
        "train.num_steps": 600, "train.eval_every": 200, "train.checkpoint_every": 200,
    },
    "tiny": {
        "data.num_images": 64,
        "model.emb_dim": 32, "model.num_heads": 2, "model.num_layers": 1, "model.qkv_dim": 16,
        "model.mlp_dim": 32, "model.dropout": 0.1, "model.attention_dropout": 0.1,
        "train.batch_size": 8, "train.warmup_steps": 2, "train.num_steps": 6,
        "train.eval_every": 3, "train.checkpoint_every": 6, "train.log_every": 2,
    },
}


def _size(layers: int, heads: int, emb: int, qkv: int, mlp: int, dropout: float | None = None) -> dict:
    size = {"model.num_layers": layers, "model.num_heads": heads, "model.emb_dim": emb,
            "model.qkv_dim": qkv, "model.mlp_dim": mlp}
    return size if dropout is None else {**size, "model.dropout": dropout}


ATTENTION: dict[str, dict] = {
    "local": {**_size(2, 4, 64, 32, 64, 0.1), "attn.block_size": 64},
    "sparse": _size(1, 8, 32, 16, 32),
    "longformer": _size(2, 2, 32, 16, 32, 0.1),
    "linformer": _size(1, 2, 32, 16, 32),
    "reformer": _size(2, 8, 64, 32, 64),
    "sinkhorn": {**_size(2, 4, 32, 16, 64), "attn.block_size": 64},
    "synthesizer": {**_size(2, 4, 64, 32, 64), "attn.mode": "random"},
    "bigbird": {**_size(4, 2, 64, 32, 64), "attn.block_size": 64},
    "linear": _size(1, 2, 128, 64, 128),
    "performer": {**_size(4, 8, 32, 16, 32), "attn.kernel": "relu"},
}

# The families LRA ran at a size other than its Transformer's, and the file that sets it
# (google-research/long-range-arena, lra_benchmarks/image/configs/pathfinder32/).
LRA_SIZES: dict[str, str] = {
    name: f"lra_benchmarks/image/configs/pathfinder32/{file}_base.py, lines 24-30"
    for name, file in [("local", "local"), ("sparse", "sparse_transformer"),
                       ("longformer", "longformer"), ("linformer", "linformer"),
                       ("reformer", "reformer"), ("sinkhorn", "sinkhorn"),
                       ("synthesizer", "synthesizer"), ("bigbird", "bigbird"),
                       ("linear", "linear_transformer"), ("performer", "performer")]
}


# --protocol modern (lra.config's docstring; docs/families-and-protocols.md "Two protocols"): "*" applies to
# every family on this task, the named entries are the families' published recipes at their full budget
# (configs/_recipes.py maps them to config keys and lists what this suite runs differently). Attention
# families keep their LRA size and budget above, with mean pooling and pre-norm.
# Pixels: values normalised by task.pixel_stats through a linear encoder (S5, S4, Mega).
MODERN: dict[str, dict] = {
    "*": {**COMMON, **PIXELS},
    # S5@3c18fdb bin/run_experiments/run_lra_pathfinder.sh
    "s5": _recipes.s5(layers=6, d=192, p=256, j=8, c_init="trunc_standard_normal", clip_eigs=False,
        dt_min=1e-3, bn_momentum=0.9, dropout=0.05, ssm_lr=9e-4, lr_factor=5,
        weight_decay=0.03, warmup_epochs=1, epochs=200, batch=64,
        train_examples=TRAIN_EXAMPLES),
    # S4@e757cef configs/experiment/lra/s4-pathfinder.yaml, model.layer.mode=diag
    "s4d": _recipes.s4d(d=256, n=64, prenorm=True, dropout=0.0, dt_min=1e-3, lr=0.004,
        weight_decay=0.05, batch=64, steps=500_000, warmup=50_000, epochs=200),
    # P-LRU App. D, Tables 8-9 (pathfinder row)
    "lru": _recipes.lru(d=192, n=256, steps=500_000, batch=64, lr_factor=0.25, weight_decay=0.05,
        dropout=0.0, r_min=0.9, r_max=0.999, max_phase=2 * math.pi,
        train_examples=TRAIN_EXAMPLES),
    # MEGA@aeaa4b4 examples/mega/README.lra.md + fairseq/models/lra/model.py (pathfinder)
    "mega": _recipes.mega(layers=6, d=128, hidden=256, z=64, attn_fn="laplace", norm="batch",
        prenorm=True, lr=0.01, weight_decay=0.01, dropout=0.0, batch=128,
        update_freq=1, steps=250_000, warmup=50_000, epochs=200),
}

# The 2023-25 mixers (issue 26). gla: HGRN2's LRA recipe, OpenNLPLab/HGRN2@b154c39 run_lra.py
# (task 'pathfinder'); the others published none: the S5 recipe above (configs/_recipes.py).
MODERN["gla"] = _recipes.hgrn2(
    layers=6, d=128, expand_ratio=2, expand_ratio_glu=1, norm="batch", lr=0.002, weight_decay=0.0,
    dropout=0.0, warmup=50000, batch=128, grad_clip=0.0, epochs=100, schedule_steps=500_000,
    train_examples=TRAIN_EXAMPLES)
MODERN.update({name: _recipes.no_lra_recipe(MODERN["s5"]) for name in _recipes.NO_LRA_RECIPE})
