"""Text: IMDB sentiment from UTF-8 bytes, 2 classes, 1000 bytes (LRA section 1).

    python -m lra.data prepare --task text                         # once, needs TensorFlow + network
    python -m lra.run --task text --attn softmax                   # paper protocol
    python -m lra.run --task text --attn performer --set data.max_length=4000   # the paper's 4K
    python -m lra.run --task text --attn linear --preset small     # minutes on a laptop CPU
    python -m lra.run --task text --attn softmax --preset tiny     # smoke run, < 1 minute

``BASE`` is the LRA repository config (``text_classification/configs/base_tc_config.py``,
google-research/long-range-arena): 4 layers, d 256, 4 heads, qkv 256, MLP 1024, dropout 0.1 (the model's
default; the text trainer passed none), CLS pooling, sinusoidal positions, batch 32, lr 0.05 with
8000 warm-up steps and rsqrt decay (peak 5.6e-4), weight decay 0.1, 20,000 steps, validation every
100 steps on the whole validation split (= the IMDB test split; see tasks/text.py), which costs
more than the training itself: ``--set train.eval_batches=N`` validates on N batches instead.
LRA's per-model text configs change only the model type (the Linformer and Synthesizer options they
set were never passed to the model), so the only delta is Performer's kernel.
``small`` reads the first 256 bytes of each review.
"""

import math

from lra.configs import _recipes
from lra.configs._recipes import COMMON

TRAIN_EXAMPLES = 25_000  # training examples of the full task (steps per epoch = this // batch)

BASE = {
    "model.emb_dim": 256, "model.num_heads": 4, "model.num_layers": 4, "model.qkv_dim": 256,
    "model.mlp_dim": 1024, "model.dropout": 0.1, "model.attention_dropout": 0.1,
    "model.pooling": "cls", "model.positional": "sinusoidal",
    "train.batch_size": 32, "train.lr": 0.05, "train.schedule": "rsqrt",
    "train.warmup_steps": 8000, "train.weight_decay": 0.1, "train.num_steps": 20000,
    "train.eval_every": 100, "train.checkpoint_every": 1000,
}

PRESETS = {
    "paper": {},
    "small": {
        "data.max_length": 256, "data.val_size": 1000, "data.test_size": 5000,
        "model.emb_dim": 64, "model.num_heads": 4, "model.num_layers": 2, "model.qkv_dim": 64,
        "model.mlp_dim": 128, "train.batch_size": 32, "train.lr": 0.05, "train.warmup_steps": 300,
        "train.weight_decay": 0.01, "train.num_steps": 2000, "train.eval_every": 250,
        "train.checkpoint_every": 500,
    },
    "tiny": {
        "data.max_length": 128, "data.train_size": 256, "data.val_size": 64, "data.test_size": 64,
        "model.emb_dim": 32, "model.num_heads": 2, "model.num_layers": 1, "model.qkv_dim": 32,
        "model.mlp_dim": 64, "train.batch_size": 16, "train.warmup_steps": 5,
        "train.num_steps": 20, "train.eval_every": 10, "train.checkpoint_every": 10,
        "train.log_every": 5,
    },
}

# LRA's Performer on Text ran the deterministic ReLU ("generalized") kernel, not FAVOR+
# (google-research/long-range-arena; attention/performer.py).
ATTENTION: dict[str, dict] = {
    "performer": {"attn.kernel": "relu"},
}


# --protocol modern (lra.config's docstring; docs/families-and-protocols.md "Two protocols"): "*" applies to
# every family on this task, the named entries are the families' published recipes at their full budget
# (configs/_recipes.py maps them to config keys and lists what this suite runs differently). Attention
# families keep their LRA size and budget above, with mean pooling and pre-norm.
# Text: the modern recipes read 4096 characters (S5, S4 l_max 4096; Mega 4002), not LRA's 1000.
MODERN: dict[str, dict] = {
    "*": {**COMMON, "data.max_length": 4096},
    # S5@3c18fdb bin/run_experiments/run_lra_imdb.sh
    "s5": _recipes.s5(layers=6, d=256, p=192, j=12, c_init="lecun_normal", clip_eigs=False, dt_min=1e-3,
        bn_momentum=0.95, dropout=0.1, ssm_lr=1e-3, lr_factor=4, weight_decay=0.07,
        warmup_epochs=0, epochs=35, batch=50,
        train_examples=TRAIN_EXAMPLES),
    # S4@e757cef configs/experiment/lra/s4-imdb.yaml, model.layer.mode=diag
    "s4d": _recipes.s4d(d=256, n=4, n_ssm=1, prenorm=True, dropout=0.0, dt_min=1e-3, lr=0.01,
        weight_decay=0.05, batch=16, steps=50_000, warmup=5_000, epochs=32,
        dt_group="no_decay"),  # s4-imdb.yaml line 19: lr.dt null
    # P-LRU App. D, Tables 8-9 (text row)
    "lru": _recipes.lru(d=256, n=192, steps=50_000, batch=32, lr_factor=0.1, weight_decay=0.05,
        dropout=0.1, r_min=0.5, r_max=0.9, max_phase=2 * math.pi,
        train_examples=TRAIN_EXAMPLES),
    # MEGA@aeaa4b4 examples/mega/README.lra.md + fairseq/models/lra/model.py (text)
    "mega": _recipes.mega(layers=4, d=128, hidden=256, z=64, attn_fn="softmax", norm="layer",
        prenorm=False, lr=4e-3, weight_decay=0.01, dropout=0.1, batch=25,
        update_freq=2, steps=25_000, warmup=10_000, epochs=50),
}

# The 2023-25 mixers (issue 26). gla: HGRN2's LRA recipe, OpenNLPLab/HGRN2@b154c39 run_lra.py
# (task 'imdb'); the others published none: the S5 recipe above (configs/_recipes.py).
MODERN["gla"] = _recipes.hgrn2(
    layers=4, d=128, expand_ratio=8, expand_ratio_glu=1, norm="layer", lr=0.005, weight_decay=0.0,
    dropout=0.1, warmup=10000, batch=64, grad_clip=0.0, epochs=40, schedule_steps=50_000,
    train_examples=TRAIN_EXAMPLES)
MODERN.update({name: _recipes.no_lra_recipe(MODERN["s5"]) for name in _recipes.NO_LRA_RECIPE})
