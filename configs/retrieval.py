"""Retrieval: do two AAN papers cite each other? Two documents of 4000 bytes, 2 classes (LRA section 1).

    python -m lra.data fetch-release --out DIR                      # once: the official LRA files
    python -m lra.run --task retrieval --attn softmax --data-dir DIR            # paper protocol
    python -m lra.run --task retrieval --attn linear --preset small --data-dir DIR
    python -m lra.run --task retrieval --attn softmax --preset tiny --data-dir DIR   # smoke run

``BASE`` is the LRA repository config (``matching/configs/base_match_config.py``, lra_original.md
section 2): 4 layers, d 128, 4 heads, qkv 128, MLP 512, dropout 0.1, CLS pooling (LRA's dual encoder
prepended no CLS token and pooled the first byte; ours prepends one), sinusoidal positions, batch 32,
lr 0.05 with 8000 warm-up steps and rsqrt decay, so over the 5000 steps the rate only rises (to
3.5e-4; LRA's schedule as it was), weight decay 0.1, validation every 100 steps. One shared encoder
reads both documents; the head is MLP([u, v, u*v, u-v]) (tasks/retrieval.py). LRA's per-model
matching configs change only the model type; the only delta is Performer's kernel.
``small`` reads the first 256 bytes of each document.
"""

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
