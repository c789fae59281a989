"""Image: grayscale CIFAR-10 read pixel by pixel, 1024 tokens, 10 classes (LRA section 1).

    python -m lra.data prepare --task image                         # once, needs TensorFlow + network
    python -m lra.run --task image --attn softmax                   # paper protocol
    python -m lra.run --task image --attn linear --preset small     # minutes on a laptop CPU
    python -m lra.run --task image --attn softmax --preset tiny     # smoke run, < 1 minute

Training is LRA's ``image/configs/cifar10/base_cifar10_config.py`` (google-research/long-range-arena):
batch 256, lr 5e-4 with one epoch (175 steps) of linear warm-up then cosine decay over 200 epochs
(35,000 steps), no weight decay, dropout 0.3, attention dropout 0.2, CLS pooling, learned positions
N(0, 0.02), validation every epoch. The model sizes are per model in LRA: every model config
overrides the base file's 1-layer, 1-head, d 32 model. ``BASE`` takes the Transformer's
(1 layer, 8 heads, d 128, qkv 64, MLP 128), so that families LRA never configured run at the
Transformer's size; ``ATTENTION`` holds the other LRA models' differences from it:

    model        layers/heads/emb/qkv/mlp  other
    local        1/2/128/64/128            block 64, mean pooling
    longformer   4/4/128/64/128            mean pooling
    reformer     4/8/64/32/64
    sinkhorn     1/1/32/32/64 (the base)   block 64, weight decay 0.7, dropout 0.1
    bigbird      1/4/128/64/128            block 64 (LRA's ``bigbird_base.py`` line 28 sets
                                           ``num_head = 4``: a typo for ``num_heads``; we read it
                                           as 4 heads, what the file meant; LRA issue #33 reports
                                           36% with 1 head against 42% with 8)
    performer    as the Transformer        ReLU kernel (what LRA ran; attention/performer.py)
    sparse, linformer, synthesizer (random), linear: as the Transformer.

``LRA_SIZES`` names each family that LRA ran at another size (layers, heads or widths) than its
Transformer, with the file that sets it; tests/attention/test_comparability.py checks that every
other family is within 10% of the Transformer's count.

What a preset sets wins over these deltas, as on every task (lra.config applies the preset after
the family), so a tiny run stays tiny; the deltas' other keys still apply.
A sequence is 1024 pixels whatever the preset, so the presets shrink the model and the batch:
``small`` is 1 layer, d 64, 2 heads, batch 16, 1000 steps with lr 1e-3; ``tiny`` uses batch 8.
"""

import math

from lra.configs import _recipes
from lra.configs._recipes import COMMON, PIXELS

TRAIN_EXAMPLES = 45_000  # training examples of the full task (steps per epoch = this // batch)

BASE = {
    "model.emb_dim": 128, "model.num_heads": 8, "model.num_layers": 1, "model.qkv_dim": 64,
    "model.mlp_dim": 128, "model.dropout": 0.3, "model.attention_dropout": 0.2,
    "model.pooling": "cls", "model.positional": "learned",
    "train.batch_size": 256, "train.lr": 5e-4, "train.schedule": "cosine",
    "train.warmup_steps": 175, "train.weight_decay": 0.0, "train.num_steps": 35000,
    "train.eval_every": 175, "train.checkpoint_every": 1750,
}

PRESETS = {
    "paper": {},
    "small": {
        "data.val_size": 1000, "data.test_size": 2000,
        "model.emb_dim": 64, "model.num_heads": 2, "model.num_layers": 1, "model.qkv_dim": 64,
        "model.mlp_dim": 128, "model.dropout": 0.1, "model.attention_dropout": 0.1,
        "train.batch_size": 16, "train.lr": 1e-3, "train.warmup_steps": 100,
        "train.num_steps": 1000, "train.eval_every": 250, "train.checkpoint_every": 250,
    },
    "tiny": {
        "data.train_size": 256, "data.val_size": 64, "data.test_size": 64,
        "model.emb_dim": 32, "model.num_heads": 2, "model.num_layers": 1, "model.qkv_dim": 32,
        "model.mlp_dim": 64, "train.batch_size": 8, "train.warmup_steps": 5,
        "train.num_steps": 20, "train.eval_every": 10, "train.checkpoint_every": 10,
        "train.log_every": 5,
    },
}

ATTENTION: dict[str, dict] = {
    "local": {"model.num_heads": 2, "attn.block_size": 64, "model.pooling": "mean"},
    "longformer": {"model.num_layers": 4, "model.num_heads": 4, "model.pooling": "mean"},
    "reformer": {"model.num_layers": 4, "model.emb_dim": 64, "model.qkv_dim": 32,
                 "model.mlp_dim": 64},
    "sinkhorn": {"model.num_heads": 1, "model.emb_dim": 32, "model.qkv_dim": 32,
                 "model.mlp_dim": 64, "attn.block_size": 64, "train.weight_decay": 0.7,
                 "model.dropout": 0.1},
    "bigbird": {"model.num_heads": 4, "attn.block_size": 64},
    "performer": {"attn.kernel": "relu"},
    # Not from LRA (issue 26): under CLS pooling the CLS token at position 0 hears the last pixel
    # only through the reverse delta-rule scan, 1024 erasures (I - beta k k^T) at head width 8 in this
    # config's single layer; at initialisation the pooled vector's sensitivity to the last real
    # token was 2e-9 of its largest (tests/attention/test_comparability.py's receptive-field probe). Mean
    # pooling, as LRA's own local and longformer image rows, lets every pixel reach the classifier.
    "gated_deltanet": {"model.pooling": "mean"},
}

LRA_SIZES: dict[str, str] = {
    "local": "lra_benchmarks/image/configs/cifar10/local_base.py, line 28 (2 heads)",
    "bigbird": "lra_benchmarks/image/configs/cifar10/bigbird_base.py, line 28 (4 heads)",
    "longformer": "lra_benchmarks/image/configs/cifar10/longformer_base.py, lines 23-27",
    "reformer": "lra_benchmarks/image/configs/cifar10/reformer_base.py, lines 23-27",
    "sinkhorn": "lra_benchmarks/image/configs/cifar10/sinkhorn_base.py, line 24 (the base's 1/1/32/32/64)",
}


# --protocol modern (lra.config's docstring; docs/families-and-protocols.md "Two protocols"): "*" applies to
# every family on this task, the named entries are the families' published recipes at their full budget
# (configs/_recipes.py maps them to config keys and lists what this suite runs differently). Attention
# families keep their LRA size and budget above, with mean pooling and pre-norm.
# Pixels: values normalised by task.pixel_stats through a linear encoder (S5, S4, Mega).
MODERN: dict[str, dict] = {
    "*": {**COMMON, **PIXELS},
    # S5@3c18fdb bin/run_experiments/run_lra_cifar.sh
    "s5": _recipes.s5(layers=6, d=512, p=384, j=3, c_init="lecun_normal", clip_eigs=True, dt_min=1e-3,
        bn_momentum=0.95, dropout=0.1, ssm_lr=1e-3, lr_factor=4.5, weight_decay=0.07,
        warmup_epochs=1, epochs=250, batch=50,
        train_examples=TRAIN_EXAMPLES),
    # S4@e757cef configs/experiment/lra/s4-cifar.yaml, model.layer.mode=diag
    "s4d": _recipes.s4d(d=512, n=64, n_ssm=1, prenorm=False, dropout=0.1, dt_min=1e-3, lr=0.01,
        weight_decay=0.05, batch=50, steps=180_000, warmup=18_000, epochs=200),
    # P-LRU App. D, Tables 8-9 (image row)
    "lru": _recipes.lru(d=512, n=384, steps=180_000, batch=50, lr_factor=0.25, weight_decay=0.05,
        dropout=0.1, r_min=0.9, r_max=0.999, max_phase=2 * math.pi,
        train_examples=TRAIN_EXAMPLES),
    # MEGA@aeaa4b4 examples/mega/README.lra.md + fairseq/models/lra/model.py (image)
    "mega": _recipes.mega(layers=8, d=160, hidden=320, z=96, attn_fn="laplace", norm="batch",
        prenorm=True, lr=0.01, weight_decay=0.02, dropout=0.0, batch=50,
        update_freq=1, steps=180_000, warmup=9_000, epochs=200),
}

# The 2023-25 mixers (issue 26). gla: HGRN2's LRA recipe, OpenNLPLab/HGRN2@b154c39 run_lra.py
# (task 'cifar'); the others published none: the S5 recipe above (configs/_recipes.py).
MODERN["gla"] = _recipes.hgrn2(
    layers=6, d=512, expand_ratio=2, expand_ratio_glu=1, norm="batch", lr=0.003, weight_decay=0.0,
    dropout=0.0, warmup=30000, batch=64, grad_clip=0.0, epochs=75, schedule_steps=50_000,
    train_examples=TRAIN_EXAMPLES)
MODERN.update({name: _recipes.no_lra_recipe(MODERN["s5"]) for name in _recipes.NO_LRA_RECIPE})
