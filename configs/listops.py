"""ListOps: hierarchical list operations, 10 classes, up to 2000 tokens (LRA section 1).

    python -m lra.run --task listops --attn softmax                   # paper protocol
    python -m lra.run --task listops --attn cosformer --preset small  # minutes on a laptop CPU
    python -m lra.run --task listops --attn softmax --preset tiny     # smoke run, < 1 minute

``BASE`` is the LRA repository config (lra_original.md section 2): 4 layers, d 512, 8 heads, qkv 512,
MLP 1024, dropout 0.1, CLS pooling, sinusoidal positions, batch 32, lr 0.05 with 1000 warm-up steps
and rsqrt decay (peak 1.58e-3), weight decay 0.1, 5000 steps, validation every 50 steps.
``small`` trains on a shorter ListOps (lengths 20-150, depth <= 6) that a small model learns on a CPU.
"""

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

# Per-family deltas that LRA's ListOps configs set (lra_original.md section 3): the ListOps
# Performer ran softmax FAVOR+ with 2 random features (the other tasks ran the ReLU kernel).
# (With CLS pooling, lra.config makes the CLS token global for every family that has a
# ``global_tokens`` option: local, sparse, longformer.)
ATTENTION: dict[str, dict] = {
    "performer": {"attn.kernel": "softmax", "attn.nb_features": 2},
}
