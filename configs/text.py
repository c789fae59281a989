"""Text: IMDB sentiment from UTF-8 bytes, 2 classes, 1000 bytes (LRA section 1).

    python -m lra.data prepare --task text                         # once, needs TensorFlow + network
    python -m lra.run --task text --attn softmax                   # paper protocol
    python -m lra.run --task text --attn performer --set data.max_length=4000   # the paper's 4K
    python -m lra.run --task text --attn linear --preset small     # minutes on a laptop CPU
    python -m lra.run --task text --attn softmax --preset tiny     # smoke run, < 1 minute

``BASE`` is the LRA repository config (``text_classification/configs/base_tc_config.py``,
lra_original.md section 2): 4 layers, d 256, 4 heads, qkv 256, MLP 1024, dropout 0.1 (the model's
default; the text trainer passed none), CLS pooling, sinusoidal positions, batch 32, lr 0.05 with
8000 warm-up steps and rsqrt decay (peak 5.6e-4), weight decay 0.1, 20,000 steps, validation every
100 steps on the whole validation split (= the IMDB test split; see tasks/text.py), which costs
more than the training itself: ``--set train.eval_batches=N`` validates on N batches instead.
LRA's per-model text configs change only the model type (the Linformer and Synthesizer options they
set were never passed to the model), so the only delta is Performer's kernel.
``small`` reads the first 256 bytes of each review.
"""

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
# (lra_original.md section 3; attention/performer.py).
ATTENTION: dict[str, dict] = {
    "performer": {"attn.kernel": "relu"},
}
