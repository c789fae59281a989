"""The one encoder every attention family plugs into, and the classifier model built on it.

    tokens int32[B, L], mask bool[B, L]
      -> input encoder: token embedding, or (``input_encoder="linear"``, pixel tasks) a linear map of
         the normalised pixel value  (+ a CLS token in front when pooling == "cls")
      -> + positional encoding (sinusoidal, learned N(0, 0.02), or none)
      -> N blocks around the attention family (the sequence mixer):
           short_conv K > 0 (Zoology): first x + BaseConv(N(x)), BaseConv(h) = h + W h * conv_K(h)
           channel_mixer "mlp" (LRA):  x + Attn(N(x), mask);  x + MLP(N(x))   (MLP: Dense -> GELU or
                                       SiLU -> Dense)
           channel_mixer "glu" (S5):   x + GLU(Attn(N(x), mask)),  GLU(y) = g * sigmoid(W g), g = GELU(y)
           channel_mixer "none":       x + Attn(N(x), mask)
         pre-norm as written; post-norm (``prenorm=False``): x = N(x + f(x)) instead
      -> a final norm (pre-norm only; ``final_norm=False``: none, as S5 and minimal-LRU)
      -> pooling: the CLS position, or the mean over real tokens -> float[B, D]
         (a per-position task, ``Task.per_position``: no pooling -> float[B, L, D])

A causal task (``Task.causal``) builds every family, and the short convolution, causally.

Dropout (``model.dropout``) follows the input embedding (unless ``input_dropout=False``), the
mixer's GELU in the GLU, the MLP's activation, and each residual branch; ``dropout_form="tied"``
draws its mask once per (example, channel) for every position (``dropout`` below).

The norm N is LayerNorm per token, or (``norm="batch"``, the modern recipes) BatchNorm whose
statistics are taken over the REAL tokens of the batch only: padding never enters them (nor the
running averages). BatchNorm keeps running mean and variance as ``nnx.BatchStat`` state, updated when
``deterministic=False`` and used when ``deterministic=True``.

Attention modules hold attention only; everything else lives here. Parameters are float32; the
compute dtype (``model.dtype``) applies to activations, and norm statistics are taken in float32.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from lra import attention
from lra.config import ModelConfig

_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def sinusoidal_positions(length: int, dim: int) -> jax.Array:
    """float32[length, dim]: sin on even channels, cos on odd, wavelengths up to 10^4 (Vaswani et al.)."""
    pos = jnp.arange(length, dtype=jnp.float32)[:, None]
    inv = jnp.exp(-math.log(10_000.0) * jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)[None, :]
    pe = jnp.zeros((length, dim), jnp.float32)
    pe = pe.at[:, 0::2].set(jnp.sin(pos * inv))
    return pe.at[:, 1::2].set(jnp.cos(pos * inv[:, : dim // 2]))


class LayerNorm(nnx.Module):
    """LayerNorm with float32 statistics and parameters; returns the input dtype.

    ``mask`` and ``deterministic`` are accepted (and not needed) so that every norm has one call."""

    def __init__(self, dim: int, *, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(dim, epsilon=1e-6, dtype=jnp.float32, rngs=rngs)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        return self.norm(x.astype(jnp.float32)).astype(x.dtype)


class MaskedBatchNorm(nnx.Module):
    """BatchNorm over the real tokens of a padded batch; x: float[B, L, D], mask: bool[B, L].

    Training (``deterministic=False``): mean and biased variance per channel over the (b, t) with
    mask[b, t] only, and running = momentum * running + (1 - momentum) * batch statistic. Evaluation:
    the running statistics. Under data parallelism the sums run over the global batch (jit with a
    batch sharding reduces across devices), so statistics do not depend on the device count.
    """

    def __init__(self, dim: int, *, momentum: float, epsilon: float = 1e-5, rngs: nnx.Rngs):
        del rngs
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"model.bn_momentum must be in [0, 1), got {momentum}")
        self.momentum, self.epsilon = momentum, epsilon
        self.scale = nnx.Param(jnp.ones((dim,), jnp.float32))
        self.bias = nnx.Param(jnp.zeros((dim,), jnp.float32))
        self.mean = nnx.BatchStat(jnp.zeros((dim,), jnp.float32))
        self.var = nnx.BatchStat(jnp.ones((dim,), jnp.float32))

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        xf = x.astype(jnp.float32)
        if deterministic:
            mean, var = self.mean[...], self.var[...]
        else:
            w = (jnp.ones(x.shape[:2], jnp.float32) if mask is None
                 else mask.astype(jnp.float32))[..., None]
            count = jnp.maximum(jnp.sum(w), 1.0)
            mean = jnp.sum(xf * w, axis=(0, 1)) / count
            var = jnp.sum(jnp.square(xf - mean[None, None]) * w, axis=(0, 1)) / count
            m = self.momentum
            self.mean[...] = m * self.mean[...] + (1 - m) * jax.lax.stop_gradient(mean)
            self.var[...] = m * self.var[...] + (1 - m) * jax.lax.stop_gradient(var)
        y = (xf - mean[None, None]) * jax.lax.rsqrt(var[None, None] + self.epsilon)
        return (y * self.scale[...][None, None] + self.bias[...][None, None]).astype(x.dtype)


def make_norm(m: ModelConfig, dim: int, *, rngs: nnx.Rngs) -> nnx.Module:
    """The norm ``m.norm`` names (its values: ``lra.config.ModelConfig``, checked there)."""
    if m.norm == "batch":
        return MaskedBatchNorm(dim, momentum=m.bn_momentum, rngs=rngs)
    return LayerNorm(dim, rngs=rngs)


def dropout(m: ModelConfig, rate: float, *, rngs: nnx.Rngs) -> nnx.Dropout:
    """A dropout of ``rate`` in the form ``m.dropout_form`` names, for float[B, L, C] activations.

    "elementwise" draws each of the B x L x C mask entries (LRA). "tied" draws one entry per
    (example, channel) and broadcasts it over the L positions, so a dropped channel is dropped for
    the whole sequence: S5 (``nn.Dropout(broadcast_dims=[0])`` on one example's [L, H]), S4
    (``tie_dropout: true``, ``DropoutNd``) and minimal-LRU (``broadcast_dims=[0]``)."""
    tied = m.dropout_form == "tied"
    return nnx.Dropout(rate, broadcast_dims=(1,) if tied else (), rngs=rngs)


_MLP_INITS = {  # model.mlp_init -> (kernel, bias) initialisers
    "lecun": (nnx.initializers.lecun_normal(), nnx.initializers.zeros_init()),
    # LRA common_layers.py MlpBlock (google-research/long-range-arena@cd31e5c, lines 151-152)
    "lra": (nnx.initializers.xavier_uniform(), nnx.initializers.normal(1e-6)),
}
_ACTIVATIONS = {"gelu": jax.nn.gelu, "silu": jax.nn.silu, "relu": jax.nn.relu}


def rowwise(linear: nnx.Linear, x: jax.Array) -> jax.Array:
    """``linear`` on x: float[..., d_in] as one 2-D product over the flattened leading dimensions.

    Same function; the reason is XLA:CPU's weight gradient: from a [B, L, d] input it is a dot
    contracting two dimensions, which XLA lays out with a transposed copy of the incoming gradient
    (``attention._projections.Dense`` does the same for the attention projections). Measured
    fwd+bwd of the MLP at [4, 2048, 256] -> 1024 -> 256, one process, median of 9: 169 -> 136 ms.
    """
    return linear(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], -1)


class HalfGLU(nnx.Module):
    """S5's channel mixer after the SSM: g = dropout(GELU(y)); g * sigmoid(W g). float[..., D]."""

    def __init__(self, m: ModelConfig, *, dtype, rngs: nnx.Rngs):
        self.gate = nnx.Linear(m.emb_dim, m.emb_dim, dtype=dtype, rngs=rngs)
        self.dropout = dropout(m, m.dropout, rngs=rngs)

    def __call__(self, y: jax.Array, *, deterministic: bool) -> jax.Array:
        g = self.dropout(jax.nn.gelu(y), deterministic=deterministic)
        return g * jax.nn.sigmoid(rowwise(self.gate, g))


class MLP(nnx.Module):
    """Dense(hidden) -> activation (``m.mlp_activation``) -> dropout -> Dense(dim). float[..., D]."""

    def __init__(self, m: ModelConfig, *, dtype, rngs: nnx.Rngs):
        kernel_init, bias_init = _MLP_INITS[m.mlp_init]
        dense = dict(kernel_init=kernel_init, bias_init=bias_init, dtype=dtype, rngs=rngs)
        self.up = nnx.Linear(m.emb_dim, m.mlp_dim, **dense)
        self.down = nnx.Linear(m.mlp_dim, m.emb_dim, **dense)
        self.activation = _ACTIVATIONS[m.mlp_activation]
        self.dropout = dropout(m, m.dropout, rngs=rngs)

    def __call__(self, x: jax.Array, *, deterministic: bool) -> jax.Array:
        h = self.dropout(self.activation(rowwise(self.up, x)), deterministic=deterministic)
        return rowwise(self.down, h)


class BaseConv(nnx.Module):
    """Zoology's BaseConv (HazyResearch/zoology, zoology/mixers/base_conv.py): h + Linear(h) *
    conv(h), conv a depthwise convolution of ``kernel`` taps with bias. Causal (``causal``: position
    t sees t-kernel+1..t) or centred; zero at pads on its input and output, so real positions never
    see padding. float[B, L, D] -> float[B, L, D]."""

    def __init__(self, dim: int, kernel: int, *, causal: bool, dtype, rngs: nnx.Rngs):
        bound = 1.0 / math.sqrt(kernel)  # PyTorch Conv1d's default init, as Zoology's
        self.kernel, self.causal = kernel, causal
        self.weight = nnx.Param(jax.random.uniform(rngs.params(), (kernel, dim), jnp.float32,
                                                   -bound, bound))
        self.bias = nnx.Param(jax.random.uniform(rngs.params(), (dim,), jnp.float32, -bound, bound))
        self.proj = nnx.Linear(dim, dim, dtype=dtype, rngs=rngs)

    def __call__(self, h: jax.Array, mask: jax.Array) -> jax.Array:
        keep = mask[..., None]
        u = jnp.where(keep, h, jnp.zeros((), h.dtype))
        before = self.kernel - 1 if self.causal else (self.kernel - 1) // 2
        up = jnp.pad(u, [(0, 0), (before, self.kernel - 1 - before), (0, 0)])
        w, length = self.weight[...].astype(h.dtype), h.shape[1]
        conv = sum(up[:, j:j + length] * w[j][None, None] for j in range(self.kernel))
        y = h + rowwise(self.proj, h) * (conv + self.bias[...].astype(h.dtype)[None, None])
        return jnp.where(keep, y, jnp.zeros((), y.dtype))


class Block(nnx.Module):
    """One block around any registered attention family (see the module docstring for the forms)."""

    def __init__(self, attn: nnx.Module, m: ModelConfig, *, causal: bool = False,
                 rngs: nnx.Rngs):
        dim, dtype = m.emb_dim, _DTYPES[m.dtype]
        self.prenorm = m.prenorm
        if m.short_conv:
            self.norm0 = make_norm(m, dim, rngs=rngs)
            self.conv = BaseConv(dim, m.short_conv, causal=causal, dtype=dtype, rngs=rngs)
        else:
            self.norm0 = self.conv = None
        self.norm1 = make_norm(m, dim, rngs=rngs)
        self.attn = attn
        # each attribute assigned once: nnx fixes an attribute first set to None as static
        mlp = m.channel_mixer == "mlp"
        self.norm2 = make_norm(m, dim, rngs=rngs) if mlp else None
        self.mlp = MLP(m, dtype=dtype, rngs=rngs) if mlp else None
        self.glu = HalfGLU(m, dtype=dtype, rngs=rngs) if m.channel_mixer == "glu" else None
        self.dropout = dropout(m, m.dropout, rngs=rngs)

    def _residual(self, x, norm, f, mask, deterministic):
        """x + f(N(x)) (pre-norm) or N(x + f(x)) (post-norm)."""
        h = norm(x, mask, deterministic=deterministic) if self.prenorm else x
        x = x + self.dropout(f(h), deterministic=deterministic)
        return x if self.prenorm else norm(x, mask, deterministic=deterministic)

    def __call__(self, x: jax.Array, mask: jax.Array, *, deterministic: bool) -> jax.Array:
        def mix(h):
            y = self.attn(h, mask, deterministic=deterministic)
            return y if self.glu is None else self.glu(y, deterministic=deterministic)

        if self.conv is not None:
            x = self._residual(x, self.norm0, lambda h: self.conv(h, mask), mask, deterministic)
        x = self._residual(x, self.norm1, mix, mask, deterministic)
        if self.mlp is not None:
            x = self._residual(x, self.norm2, lambda h: self.mlp(h, deterministic=deterministic),
                               mask, deterministic)
        return x


class Encoder(nnx.Module):
    """tokens int32[B, L], mask bool[B, L] -> pooled float[B, emb_dim]."""

    def __init__(self, m: ModelConfig, *, vocab_size: int, max_len: int, attention_name: str,
                 attn_options: Mapping[str, Any], causal: bool = False,
                 pixel_stats: tuple[float, float] | None = None, pixel_offset: int = 1,
                 rngs: nnx.Rngs):
        """``m``: every model option (``lra.config.ModelConfig``, validated there); the rest comes
        from the task (vocabulary, longest input, pixel statistics) and the attention family."""
        self.dtype = _DTYPES[m.dtype]
        self.pooling = m.pooling
        self.remat = m.remat
        self.prenorm = m.prenorm
        seq_len = max_len + (1 if m.pooling == "cls" else 0)
        if m.input_encoder == "linear":
            if pixel_stats is None:
                raise ValueError("model.input_encoder='linear' projects pixel values and needs a pixel "
                                 "task (image, pathfinder, pathx); this task's inputs are tokens")
            self.embed = None
            self.pixel_proj = nnx.Linear(1, m.emb_dim, rngs=rngs)
            self.pixel_offset = pixel_offset
            self.pixel_mean, self.pixel_std = (float(v) for v in pixel_stats)
        else:
            self.embed = nnx.Embed(vocab_size, m.emb_dim,
                                   embedding_init=nnx.initializers.normal(1.0), rngs=rngs)
            self.pixel_proj = None
        self.cls = nnx.Param(jnp.zeros((1, 1, m.emb_dim))) if m.pooling == "cls" else None
        self.seq_len = seq_len
        if m.positional == "none":
            self.positions = None
        elif m.positional == "learned":
            self.positions = nnx.Param(nnx.initializers.normal(0.02)(rngs.params(),
                                                                     (seq_len, m.emb_dim)))
        else:
            self.positions = nnx.Variable(sinusoidal_positions(seq_len, m.emb_dim))  # not trained
        # The input's dropout (kept at rate 0 when off, so that the model's state has one layout)
        self.dropout = dropout(m, m.dropout if m.input_dropout else 0.0, rngs=rngs)
        self.blocks = nnx.List([
            Block(attention.build(attention_name, dim=m.emb_dim, num_heads=m.num_heads,
                                  qkv_dim=m.qkv_dim, causal=causal, max_len=seq_len,
                                  dropout=m.attention_dropout, rngs=rngs,
                                  layers_held=1 if m.remat else m.num_layers, **attn_options),
                  m, causal=causal, rngs=rngs)
            for _ in range(m.num_layers)
        ])
        self.final_norm = (make_norm(m, m.emb_dim, rngs=rngs) if m.prenorm and m.final_norm
                           else None)

    def embed_inputs(self, tokens: jax.Array) -> jax.Array:
        """tokens int32[B, L] -> float32[B, L, D]: embedding, or the normalised pixel value projected."""
        if self.embed is not None:
            return self.embed(tokens)
        intensity = (tokens - self.pixel_offset).astype(jnp.float32) / 255.0
        return rowwise(self.pixel_proj, ((intensity - self.pixel_mean) / self.pixel_std)[..., None])

    def __call__(self, tokens: jax.Array, mask: jax.Array, *, deterministic: bool = True,
                 pool: bool = True):
        return self.encode(self.embed_inputs(tokens), mask, deterministic=deterministic, pool=pool)

    def encode(self, x: jax.Array, mask: jax.Array, *, deterministic: bool = True,
               pool: bool = True):
        """Input embeddings float[B, L, D] (``self.embed_inputs(tokens)``) -> pooled float[B, D],
        or with ``pool=False`` (per-position tasks) every input position's float32[B, L, D].

        Split from ``__call__`` so that tests can differentiate the pooled vector with respect to
        each token's embedding (tests/attention/test_comparability.py's receptive-field check).
        """
        if self.cls is not None:
            cls = jnp.broadcast_to(self.cls[...], (x.shape[0], 1, x.shape[2]))
            x = jnp.concatenate([cls, x], axis=1)
            mask = jnp.concatenate([jnp.ones((mask.shape[0], 1), bool), mask], axis=1)
        if x.shape[1] > self.seq_len:
            raise ValueError(f"sequence of length {x.shape[1]} exceeds the encoder's maximum "
                             f"{self.seq_len}")
        if self.positions is not None:
            x = x + self.positions[...][None, : x.shape[1]]
        x = self.dropout(x.astype(self.dtype), deterministic=deterministic)
        for block in self.blocks:
            if self.remat:
                x = nnx.remat(lambda b, x, m: b(x, m, deterministic=deterministic))(block, x, mask)
            else:
                x = block(x, mask, deterministic=deterministic)
        if self.final_norm is not None:
            x = self.final_norm(x, mask, deterministic=deterministic)
        x = x.astype(jnp.float32)
        if not pool:
            return x if self.cls is None else x[:, 1:]
        if self.pooling == "cls":
            return x[:, 0]
        weights = mask.astype(jnp.float32)[..., None]
        return jnp.sum(x * weights, axis=1) / jnp.maximum(jnp.sum(weights, axis=1), 1.0)


class Classifier(nnx.Module):
    """One encoder shared by every input of the task (two towers share weights) and the task's head.

    batch: {"inputs": int32[B, L], "mask": bool[B, L], ...} -> logits float32[B, C], or with
    ``per_position`` (the task's declared fact) the unpooled encodings' float32[B, L, C].
    """

    def __init__(self, encoder: Encoder, head: nnx.Module, inputs: tuple[str, ...],
                 per_position: bool = False):
        self.encoder = encoder
        self.head = head
        self.inputs = tuple(inputs)
        self.per_position = per_position

    def __call__(self, batch: Mapping[str, jax.Array], *, deterministic: bool = True) -> jax.Array:
        pooled = []
        for name in self.inputs:
            mask_name = "mask" + name[len("inputs"):]
            pooled.append(self.encoder(batch[name], batch[mask_name], deterministic=deterministic,
                                       pool=not self.per_position))
        return self.head(*pooled)


def build_model(config, task, *, rngs: nnx.Rngs, max_len: int | None = None) -> Classifier:
    """The classifier for ``config`` (lra.config.Config) on ``task`` (tasks.Task).

    ``max_len``: the longest input the model takes; the task's ``max_len`` unless given (the bench
    times one model at several lengths)."""
    m = config.model
    encoder = Encoder(m, vocab_size=task.vocab_size,
                      max_len=task.max_len if max_len is None else max_len,
                      attention_name=config.attention, attn_options=config.attn,
                      causal=task.causal, pixel_stats=task.pixel_stats,
                      pixel_offset=task.pixel_offset, rngs=rngs)
    head = task.head(m.emb_dim, m.mlp_dim, rngs=rngs, form=m.head, activation=m.head_activation)
    return Classifier(encoder, head, task.inputs, per_position=task.per_position)
