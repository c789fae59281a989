"""The one encoder every attention family plugs into, and the classifier model built on it.

    tokens int32[B, L], mask bool[B, L]
      -> token embedding (+ a CLS token in front when pooling == "cls")
      -> + positional encoding (sinusoidal, or learned N(0, 0.02))
      -> N pre-norm blocks: x + Attn(LN(x), mask);  x + MLP(LN(x))   (MLP: Dense -> GELU -> Dense)
      -> final LayerNorm
      -> pooling: the CLS position, or the mean over real tokens
      -> float[B, D]

Attention modules hold attention only; everything else lives here. Parameters are float32; the
compute dtype (``model.dtype``) applies to activations, and LayerNorm statistics are taken in float32.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

import attention

_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def sinusoidal_positions(length: int, dim: int) -> jax.Array:
    """float32[length, dim]: sin on even channels, cos on odd, wavelengths up to 10^4 (Vaswani et al.)."""
    pos = jnp.arange(length, dtype=jnp.float32)[:, None]
    inv = jnp.exp(-math.log(10_000.0) * jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)[None, :]
    pe = jnp.zeros((length, dim), jnp.float32)
    pe = pe.at[:, 0::2].set(jnp.sin(pos * inv))
    return pe.at[:, 1::2].set(jnp.cos(pos * inv[:, : dim // 2]))


class LayerNorm(nnx.Module):
    """LayerNorm with float32 statistics and parameters; returns the input dtype."""

    def __init__(self, dim: int, *, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(dim, epsilon=1e-6, dtype=jnp.float32, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.norm(x.astype(jnp.float32)).astype(x.dtype)


class MLP(nnx.Module):
    def __init__(self, dim: int, hidden: int, dropout: float, *, dtype, rngs: nnx.Rngs):
        self.up = nnx.Linear(dim, hidden, dtype=dtype, rngs=rngs)
        self.down = nnx.Linear(hidden, dim, dtype=dtype, rngs=rngs)
        self.dropout = nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x: jax.Array, *, deterministic: bool) -> jax.Array:
        h = self.dropout(jax.nn.gelu(self.up(x)), deterministic=deterministic)
        return self.down(h)


class Block(nnx.Module):
    """Pre-norm Transformer block around any registered attention family."""

    def __init__(self, attn: nnx.Module, dim: int, mlp_dim: int, dropout: float, *, dtype,
                 rngs: nnx.Rngs):
        self.norm1 = LayerNorm(dim, rngs=rngs)
        self.attn = attn
        self.norm2 = LayerNorm(dim, rngs=rngs)
        self.mlp = MLP(dim, mlp_dim, dropout, dtype=dtype, rngs=rngs)
        self.dropout = nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x: jax.Array, mask: jax.Array, *, deterministic: bool) -> jax.Array:
        h = self.attn(self.norm1(x), mask, deterministic=deterministic)
        x = x + self.dropout(h, deterministic=deterministic)
        h = self.mlp(self.norm2(x), deterministic=deterministic)
        return x + self.dropout(h, deterministic=deterministic)


class Encoder(nnx.Module):
    """tokens int32[B, L], mask bool[B, L] -> pooled float[B, emb_dim]."""

    def __init__(self, *, vocab_size: int, max_len: int, attention_name: str,
                 attn_options: Mapping[str, Any], emb_dim: int, num_heads: int, num_layers: int,
                 qkv_dim: int, mlp_dim: int, dropout: float, attention_dropout: float,
                 pooling: str, positional: str, dtype: str = "float32", remat: bool = False,
                 causal: bool = False, rngs: nnx.Rngs):
        self.dtype = _DTYPES[dtype]
        self.pooling = pooling
        self.remat = remat
        seq_len = max_len + (1 if pooling == "cls" else 0)
        self.embed = nnx.Embed(vocab_size, emb_dim, embedding_init=nnx.initializers.normal(1.0),
                               rngs=rngs)
        self.cls = nnx.Param(jnp.zeros((1, 1, emb_dim))) if pooling == "cls" else None
        if positional == "learned":
            self.positions = nnx.Param(nnx.initializers.normal(0.02)(rngs.params(),
                                                                     (seq_len, emb_dim)))
        else:
            self.positions = nnx.Variable(sinusoidal_positions(seq_len, emb_dim))  # not trained
        self.dropout = nnx.Dropout(dropout, rngs=rngs)
        self.blocks = nnx.List([
            Block(attention.build(attention_name, dim=emb_dim, num_heads=num_heads, qkv_dim=qkv_dim,
                                  causal=causal, max_len=seq_len, dropout=attention_dropout,
                                  rngs=rngs, **attn_options),
                  emb_dim, mlp_dim, dropout, dtype=self.dtype, rngs=rngs)
            for _ in range(num_layers)
        ])
        self.final_norm = LayerNorm(emb_dim, rngs=rngs)

    def __call__(self, tokens: jax.Array, mask: jax.Array, *, deterministic: bool = True):
        return self.encode(self.embed(tokens), mask, deterministic=deterministic)

    def encode(self, x: jax.Array, mask: jax.Array, *, deterministic: bool = True):
        """Token embeddings float[B, L, D] (``self.embed(tokens)``) -> pooled float[B, D].

        Split from ``__call__`` so that tests can differentiate the pooled vector with respect to
        each token's embedding (tests/test_comparability.py's receptive-field check).
        """
        if self.cls is not None:
            cls = jnp.broadcast_to(self.cls[...], (x.shape[0], 1, x.shape[2]))
            x = jnp.concatenate([cls, x], axis=1)
            mask = jnp.concatenate([jnp.ones((mask.shape[0], 1), bool), mask], axis=1)
        if x.shape[1] > self.positions.shape[0]:
            raise ValueError(f"sequence of length {x.shape[1]} exceeds the encoder's maximum "
                             f"{self.positions.shape[0]}")
        x = x + self.positions[...][None, : x.shape[1]]
        x = self.dropout(x.astype(self.dtype), deterministic=deterministic)
        for block in self.blocks:
            if self.remat:
                x = nnx.remat(lambda b, x, m: b(x, m, deterministic=deterministic))(block, x, mask)
            else:
                x = block(x, mask, deterministic=deterministic)
        x = self.final_norm(x).astype(jnp.float32)
        if self.pooling == "cls":
            return x[:, 0]
        weights = mask.astype(jnp.float32)[..., None]
        return jnp.sum(x * weights, axis=1) / jnp.maximum(jnp.sum(weights, axis=1), 1.0)


class Classifier(nnx.Module):
    """One encoder shared by every input of the task (two towers share weights) and the task's head.

    batch: {"inputs": int32[B, L], "mask": bool[B, L], ...} -> logits float32[B, C].
    """

    def __init__(self, encoder: Encoder, head: nnx.Module, inputs: tuple[str, ...]):
        self.encoder = encoder
        self.head = head
        self.inputs = tuple(inputs)

    def __call__(self, batch: Mapping[str, jax.Array], *, deterministic: bool = True) -> jax.Array:
        pooled = []
        for name in self.inputs:
            mask_name = "mask" + name[len("inputs"):]
            pooled.append(self.encoder(batch[name], batch[mask_name], deterministic=deterministic))
        return self.head(*pooled)


def build_model(config, task, *, rngs: nnx.Rngs) -> Classifier:
    """The classifier for ``config`` (lra.config.Config) on ``task`` (tasks.Task)."""
    m = config.model
    encoder = Encoder(vocab_size=task.vocab_size, max_len=task.max_len,
                      attention_name=config.attention, attn_options=config.attn,
                      emb_dim=m.emb_dim, num_heads=m.num_heads, num_layers=m.num_layers,
                      qkv_dim=m.qkv_dim, mlp_dim=m.mlp_dim, dropout=m.dropout,
                      attention_dropout=m.attention_dropout, pooling=m.pooling,
                      positional=m.positional, dtype=m.dtype, remat=m.remat, rngs=rngs)
    return Classifier(encoder, task.head(m.emb_dim, m.mlp_dim, rngs=rngs), task.inputs)
