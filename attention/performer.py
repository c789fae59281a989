"""Performer (FAVOR+): Choromanski, Likhosherstov, Dohan, Song, Gane, Sarlos, Hawkins, Davis,
Mohiuddin, Kaiser, Belanger, Colwell, Weller, "Rethinking Attention with Performers", ICLR 2021
(arXiv 2009.14794).

Attention with a positive feature map phi, computed in linear time (as in attention/linear.py)::

    out_i = sum_j (phi(q_i) . phi(k_j)) v_j / R_i,   R_i = sum_j phi(q_i) . phi(k_j)

``kernel="softmax"`` (default): FAVOR+ positive orthogonal random features, an unbiased estimate of
softmax attention exp(q . k / sqrt(d))::

    phi(x) = exp(w_r . x' - |x'|^2 / 2) / sqrt(m),  r = 1..m,   x' = x / d^(1/4)   (q and k alike)

  E_w[phi(q') . phi(k')] = exp(q' . k') when each w_r ~ N(0, I_d). The m x d matrix W stacks
  ceil(m / d) independent blocks of d orthonormal rows (the transposed Q of a QR factorisation of a
  Gaussian d x d matrix, with column signs fixed by diag(R) so that the block is Haar-distributed),
  and each row is rescaled by the norm of an independent Gaussian d-vector (chi_d-distributed), so
  every row is marginally N(0, I_d) while rows within a block stay exactly orthogonal. The heads of
  a layer share one W (as in the Google code); each layer draws its own at construction, from the
  rng stream ``features``.

``kernel="relu"``: the deterministic "generalized" kernel phi(x) = ReLU(x) + 1e-3, no projection and
  no 1/d^(1/4) scaling (Google's ``make_fast_generalized_attention`` defaults). This is what the LRA
  paper's Performer rows ran for Text, Retrieval, Image and Pathfinder (the LRA code's default
  ``attention_fn_cls="generalized"``): a ReLU linear transformer, although the paper names FAVOR+.
  Only ListOps ran FAVOR+ (softmax kernel, ``nb_features=2``, ``ortho_scaling=0``, i.e. chi norms).

Numerical stabilisation (softmax kernel). Exponents are shifted before exp; every shift is a
constant common to all terms of one query's numerator and denominator, so it cancels exactly and the
estimator is unchanged:

* queries: the per-query max over features (as in the Google code);
* keys, non-causal: the max over all *real* keys and features of the (batch, head). Google's code
  takes the same max over every key, pads included, so a pad can dominate it and underflow every
  real key; here pads are excluded, and they cannot move any real output.
* keys, causal: the running (prefix) max M_i over real keys j <= i, never a global max (that would
  make position i depend numerically on the future). Key j's features are stored relative to M_j,
  and the scan (``attention.linear.causal_linear_sums``) rescales them by exp(M_j - M_i) <= 1 when
  query i reads them, so every query sees all its keys under the one shift M_i. A plain per-key max
  (each key shifted by its own max, uncorrected) would reweight the keys and bias the estimate.
* The shifts carry no gradient (they cancel, so their true gradient is zero).
* Google adds a feature eps (``numerical_stabilizer``, 1e-6 in LRA's ListOps run) to every feature
  after the shift; it makes the result depend on the shift, so on padded or future keys. It is
  omitted here; the denominator rule below handles a vanishing R.

Denominator: R + 2 * stabilizer * [|R| <= stabilizer] with ``stabilizer`` = 1e-6, Google's rule for
FAVOR+. (Google's generalized kernel uses 0; we keep 1e-6 for both kernels so that a query with no
real key gives 0, not NaN. ReLU features are >= 1e-3 per dimension, so with any real key R >= d*1e-6
and the rule never fires for d >= 2.)

Padded keys: features and values are zeroed before any sum (LRA's code ignores the pad mask).
Causal mode: chunked scan of prefix sums (inside a chunk the masked quadratic form, across chunks a
running [m, d] state); no [L, m, d] tensor is formed. Features, sums and the division run in
float32; the output returns to the input dtype. No attention-weight dropout (the weights are never
materialised; LRA's fast attention drops none either).

Feature redraw (softmax kernel): W lives in a non-trainable ``RandomFeatures`` variable, drawn
when the module is built (so it follows from the run's seed). With ``redraw=True`` every training
call (``deterministic=False``) draws a fresh W from the rng stream ``features`` (nnx falls back to
``default``) and uses it for that call only: the trainer's step treats non-parameter variables as
read-only and discards what a call writes into them (attention/__init__.py, "Train state").
Evaluation (``deterministic=True``) uses the W drawn at build time, so it is deterministic and the
same in every process that builds the model from the same config, resumed or not. Google's code
instead reseeds from the sum of the queries on every call, evaluation included.

Options: ``kernel`` ("softmax"), ``nb_features`` (256, LRA's default; softmax kernel only),
``redraw`` (True), ``stabilizer`` (1e-6), ``chunk_size`` (64, causal only).
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._linear_scan import causal_linear_sums, heads_first, linear_sums
from lra.attention._projections import HeadProjections, key_mask

KERNELS = ("softmax", "relu")
RELU_EPS = 1e-3
STABILIZER = 1e-6
_NO_KEY = -1e30  # the shift before any real key; finite so that differences of shifts stay finite


class RandomFeatures(nnx.Variable):
    """The FAVOR+ projection float32[m, d]: a Variable but not a Param, so optimisers skip it."""


@functools.partial(jax.jit, static_argnames=("nb_features", "dim"))
def draw_orthogonal_features(key: jax.Array, nb_features: int, dim: int) -> jax.Array:
    """float32[nb_features, dim]: blocks of ``dim`` orthogonal rows, rows rescaled to chi_dim norms.

    Rows r of one block (rows [b * dim, (b + 1) * dim)) are exactly orthogonal; blocks are
    independent; every row is marginally N(0, I_dim).
    """
    n_blocks = -(-nb_features // dim)
    block_key, norm_key = jax.random.split(key)
    gauss = jax.random.normal(block_key, (n_blocks, dim, dim), jnp.float32)
    rows = jnp.swapaxes(_gram_schmidt(gauss), -1, -2).reshape(n_blocks * dim, dim)
    norms = jnp.linalg.norm(jax.random.normal(norm_key, (nb_features, dim), jnp.float32), axis=-1)
    return rows[:nb_features] * norms[:, None]


def _gram_schmidt(a: jax.Array) -> jax.Array:
    """The Q of a = QR with diag(R) > 0, for float32[..., d, d]: Gram-Schmidt over the columns, each
    projected out twice (CGS2, as accurate as Householder QR for these well-conditioned Gaussian
    blocks).

    This is the sign-fixed Q that makes the blocks Haar-distributed. ``jnp.linalg.qr`` would give
    the same Q up to column signs, but on CPU it calls the host LAPACK from inside the training step
    (a redraw happens every step), and the host LAPACK's thread pool deadlocked another family's
    step once orbax's checkpoint threads ran (attention/_chunked.py ``unit_lower_inverse``); matmuls
    only here.
    """
    def column(j, q):
        v = a[..., :, j]
        for _ in range(2):  # the columns not yet built are zero and project nothing out
            v = v - jnp.einsum("...ic,...c->...i", q, jnp.einsum("...ic,...i->...c", q, v))
        v = v / jnp.linalg.norm(v, axis=-1, keepdims=True)
        return q.at[..., :, j].set(v)

    return jax.lax.fori_loop(0, a.shape[-1], column, jnp.zeros_like(a))


def _exponents(x: jax.Array, features: jax.Array) -> jax.Array:
    """x: float32[B, H, L, d] -> w_r . x' - |x'|^2 / 2: float32[B, H, L, m], x' = x / d^(1/4)."""
    x = x * x.shape[-1] ** -0.25
    proj = jnp.matmul(x, features.astype(jnp.float32).T)
    return proj - 0.5 * jnp.sum(x * x, axis=-1, keepdims=True)


def performer_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                     causal: bool = False, kernel: str = "softmax",
                     features: jax.Array | None = None, stabilizer: float = STABILIZER,
                     chunk_size: int = 64) -> jax.Array:
    """Performer attention in linear time.

    q: float[B, Lq, H, d]; k, v: float[B, Lk, H, d]; mask: bool[B, Lk] over keys (True = real).
    kernel: "softmax" (FAVOR+; needs ``features`` float[m, d], e.g. from
    ``draw_orthogonal_features``) or "relu" (ReLU(x) + 1e-3; ``features`` unused).
    Returns float[B, Lq, H, d] in q's dtype. Causal mode requires Lq == Lk.
    """
    if kernel not in KERNELS:
        raise ValueError(f"unknown performer kernel {kernel!r}; choose from {KERNELS}")
    if causal and q.shape[1] != k.shape[1]:
        raise ValueError(f"causal performer needs equal lengths, got {q.shape[1]}, {k.shape[1]}")
    # Heads before length ([B, H, L, .]): every sum over length is a batched matmul.
    qf, kf, vf = heads_first(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32))
    keep = jnp.ones(k.shape[:2], bool) if mask is None else mask.astype(bool)
    keep = keep[:, None, :]  # [B, 1, L]
    vf = jnp.where(keep[..., None], vf, 0.0)
    log_scale = None
    if kernel == "relu":
        phi_q = jax.nn.relu(qf) + RELU_EPS
        phi_k = jnp.where(keep[..., None], jax.nn.relu(kf) + RELU_EPS, 0.0)
    else:
        if features is None:
            raise ValueError("the softmax kernel needs features: float[nb_features, head_dim]")
        ratio = 1.0 / math.sqrt(features.shape[0])
        a_q = _exponents(qf, features)
        phi_q = jnp.exp(a_q - jax.lax.stop_gradient(a_q.max(-1, keepdims=True))) * ratio
        a_k = _exponents(kf, features)
        key_max = jnp.where(keep, jax.lax.stop_gradient(a_k.max(-1)), _NO_KEY)  # [B, H, L]
        if causal:
            shift = log_scale = jax.lax.cummax(key_max, axis=2)  # non-decreasing along L
        else:
            shift = key_max.max(2, keepdims=True)  # [B, H, 1]
        # Pads get exp(-inf) = 0; the shifted exponent of a real key is <= 0.
        expo = jnp.where(keep[..., None], a_k - shift[..., None], -jnp.inf)
        phi_k = jnp.exp(expo) * ratio
    if causal:
        num, den = causal_linear_sums(phi_q, phi_k, vf, chunk_size, log_scale=log_scale)
    else:
        num, den = linear_sums(phi_q, phi_k, vf)
    den = den + 2 * stabilizer * (jnp.abs(den) <= stabilizer)
    return (num / den[..., None]).swapaxes(1, 2).astype(q.dtype)


@register("performer")
class PerformerAttention(nnx.Module):
    """Multi-head Performer attention: FAVOR+ (default) or LRA's ReLU "generalized" kernel."""

    display_name = "Performer"
    kind = "2020 attention"
    paper = "Choromanski et al., ICLR 2021"
    complexity = "O(L m d)"
    subquadratic = True
    recurrent_state = ("heads * ((nb_features if kernel == 'softmax' else head_dim) * (head_dim + 1)"
                       " + (1 if kernel == 'softmax' else 0))")
    """Per head S (m x d) and z (m), m = nb_features (softmax kernel) or d (relu), and with the
    softmax kernel the running key maximum of the stabiliser."""
    length_options = ("chunk_size",)
    peer_options: ClassVar[dict] = {"nb_features": 256}
    lra_departure = "padded keys zeroed"
    attention_dropout = False  # the attention weights are never materialised (LRA drops none either)
    # At L=64 the contract's causal tests then cross four chunks, not one.
    contract_options: ClassVar[dict] = {"chunk_size": 16}

    @staticmethod
    def peer_matmuls(B: int, H: int, L: int, D: int) -> list[tuple[str, int, tuple]]:
        """256 features (lra/bench/peers.py ``family_matmuls``)."""
        return [("features", 2, (B * H, L, D, 256)), ("phi_k^T v", 1, (B * H, 256, L, D)),
                ("phi_q kv", 1, (B * H, L, 256, D))]

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 kernel: str = "softmax", nb_features: int = 256, redraw: bool = True,
                 stabilizer: float = STABILIZER, chunk_size: int = 64):
        # No attention-weight dropout: the weights are never materialised (LRA drops none either).
        del dropout
        if kernel not in KERNELS:
            raise ValueError(f"unknown performer kernel {kernel!r}; choose from {KERNELS}")
        if nb_features < 1:
            raise ValueError(f"nb_features must be positive, got {nb_features}")
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.causal = causal
        self.kernel = kernel
        self.nb_features = nb_features
        self.redraw = redraw
        self.stabilizer = stabilizer
        self.chunk_size = chunk_size
        self.rngs = rngs
        self.features = (RandomFeatures(draw_orthogonal_features(
            rngs.features(), nb_features, self.proj.head_dim)) if kernel == "softmax" else None)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        features = None
        if self.features is not None:
            if self.redraw and not deterministic:
                self.features[...] = draw_orthogonal_features(
                    self.rngs.features(), self.nb_features, self.proj.head_dim)
            features = self.features[...]
        o = performer_kernel(q, k, v, key_mask(mask, x), causal=self.causal, kernel=self.kernel,
                             features=features, stabilizer=self.stabilizer,
                             chunk_size=self.chunk_size)
        return self.proj.merge(o)
