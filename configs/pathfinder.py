"""Pathfinder: are two markers on one snake? 32x32 images read pixel by pixel, 1024 tokens, 2 classes.

    python -m lra.run --task pathfinder --attn softmax                   # paper protocol
    python -m lra.run --task pathfinder --attn linear --preset small     # minutes on a laptop CPU
    python -m lra.run --task pathfinder --attn softmax --preset tiny     # smoke run, < 1 minute

The images (200,000 for the paper protocol, "hard": snakes of 14 dashes) are generated on first
use into ``<data dir>/pathfinder/pathfinder32/`` (about 1 CPU-hour, spread over every core), or
read from an unpacked ``lra_release`` given as the data directory.

Training is LRA's ``image/configs/pathfinder32/base_pathfinder32_config.py`` (lra_original.md
section 2): batch 512, lr 1e-3 with one epoch (312 steps) of linear warm-up then cosine decay over
200 epochs (62,400 steps), no weight decay, no gradient clipping, validation every epoch; model
1 layer, 2 heads, d 32, qkv 16, MLP 32, dropout 0.1 / 0.1, mean pooling, sinusoidal positions.
Every LRA model config overrides the model size; ``ATTENTION`` holds those overrides
(``image/configs/pathfinder32/<model>_base.py``), layers/heads/emb/qkv/mlp:

    softmax      1/4/128/64/128, dropout 0.2   (the repository's transformer_base.py; the table
                                                in lra_original.md says 4/4/32/16/32)
    local        2/4/64/32/64, block 64
    sparse       1/8/32/16/32, dropout 0.2
    longformer   2/2/32/16/32
    linformer    1/2/32/16/32, dropout 0.2
    reformer     2/8/64/32/64, dropout 0.2
    sinkhorn     2/4/32/16/64, block 64, dropout 0.2
    synthesizer  2/4/64/32/64, dropout 0.2 (random mode)
    bigbird      4/2/64/32/64, block 64, dropout 0.2
    linear       1/2/128/64/128, dropout 0.2
    performer    4/8/32/16/32, dropout 0.2, ReLU kernel (LRA's "generalized" default; issue #37
                 says the intended size was 1/8/128/64/128)

Families LRA never configured run at the base size. In the ``tiny`` and ``small`` presets, what the
preset sets wins over these deltas (so a tiny run stays tiny); the deltas' other keys (attention
options) still apply.

``small``: 8,000 images (6,400 / 800 / 800; about 2 CPU-minutes to generate), 2 layers, d 32,
batch 32, 600 steps with lr 1e-3: a few minutes for a linear-time family (``linear``, ``performer``,
``cosformer``, ...) on a laptop CPU, several times longer for ``softmax``. Pathfinder is known to sit
at chance for a long time before it takes off (LRA issues #37, #60), so a CPU run shows the pipeline
working, not the task solved.
"""

BASE = {
    "model.emb_dim": 32, "model.num_heads": 2, "model.num_layers": 1, "model.qkv_dim": 16,
    "model.mlp_dim": 32, "model.dropout": 0.1, "model.attention_dropout": 0.1,
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
    "softmax": _size(1, 4, 128, 64, 128, 0.2),
    "local": {**_size(2, 4, 64, 32, 64), "attn.block_size": 64},
    "sparse": _size(1, 8, 32, 16, 32, 0.2),
    "longformer": _size(2, 2, 32, 16, 32),
    "linformer": _size(1, 2, 32, 16, 32, 0.2),
    "reformer": _size(2, 8, 64, 32, 64, 0.2),
    "sinkhorn": {**_size(2, 4, 32, 16, 64, 0.2), "attn.block_size": 64},
    "synthesizer": {**_size(2, 4, 64, 32, 64, 0.2), "attn.mode": "random"},
    "bigbird": {**_size(4, 2, 64, 32, 64, 0.2), "attn.block_size": 64},
    "linear": _size(1, 2, 128, 64, 128, 0.2),
    "performer": {**_size(4, 8, 32, 16, 32, 0.2), "attn.kernel": "relu"},
}

# tiny and small stay tiny and small: the keys a preset sets win over a family's delta.
ATTENTION_PRESETS: dict[tuple[str, str], dict] = {
    (name, preset): {key: PRESETS[preset][key] for key in delta if key in PRESETS[preset]}
    for name, delta in ATTENTION.items() for preset in ("tiny", "small")
}
