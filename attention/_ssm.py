"""Linear-recurrence machinery shared by the state-space families (s4d, s5, lru) and Mega's EMA.

Every one of these mixers is a linear time-invariant map of its input: a diagonal recurrence
``x_t = a (.) x_{t-1} + b_t`` read out linearly (s5, lru), or its unrolled form, a convolution with a
kernel ``K[l]`` (s4d, mega). Bidirectional versions add the same map run from the end backwards.

Padding (suffix pads, mask True = real). The forward direction needs nothing: output t depends on
inputs s <= t only. The reverse direction would carry the pads' state into the last real tokens, so
every family here ZEROES ITS OWN INPUT AT PADS (``masked_input``) before the recurrence or the FFT.
The encoder calls the mixer in every layer, so this happens in every layer whatever the residual
stream holds at pads (biases, norms and skips make it non-zero after layer 1). The recurrences being
linear with zero initial state, a zero input keeps the reverse state at exactly zero until the last
real token, which is the same as starting the reverse at each example's last real token.

What the published codes do at pads, per family:

* S4 (s4d): the same. The S4 repository's LRA pipeline passes the example lengths to every block,
  and ``S4Block.forward`` zeroes the block's input past them (state-spaces/s4@e757cef
  src/models/sequence/modules/s4block.py, lines 151-161; models/s4/s4.py lines 1902-1912).
* Mega: the same. ``MultiHeadEMA.forward`` zeroes its input where the padding mask is set before
  the FFT (facebookresearch/mega@aeaa4b4 fairseq/modules/exponential_moving_average.py, lines
  179-180; the layer passes the mask at fairseq/modules/moving_average_gated_attention.py line 228).
* S5: different. ``apply_ssm`` runs the reverse scan over the whole padded sequence, pads included
  (lindermanlab/S5@3c18fdb s5/ssm.py, lines 79-82); only the mean pooling excludes the pads
  (s5/seq_model.py ``masked_meanpool``). So S5's last real tokens see the pads' states; ours do not.
* LRU: nothing to compare. minimal-LRU (NicolasZucchet/minimal-LRU@bbd71b1 lru/model.py) has a
  forward scan only; the reverse direction here is this project's (lru.py).

Everything is computed in float32 / complex64 whatever the input dtype.

Optimiser group: the modern recipes give the state-space core (eigenvalues, step sizes, B, Mega's
EMA coefficients) its own learning rate and no weight decay. Those parameters are made with
``ssm_param``, which tags them ``optimizer_group="ssm"``; lra/optim.py reads the tag (``train.ssm_lr``).
A step size (log dt) is also tagged ``step_size=True`` (``ssm_param(value, step_size=True)``), so
that a recipe can train it apart from the rest of the core (``train.dt_group``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

SSM_GROUP = "ssm"


def ssm_param(value: jax.Array, *, step_size: bool = False) -> nnx.Param:
    """A trainable state-space parameter, tagged for its own optimiser group; ``step_size``: it is
    the (log) step size dt (module docstring)."""
    if step_size:
        return nnx.Param(value, optimizer_group=SSM_GROUP, step_size=True)
    return nnx.Param(value, optimizer_group=SSM_GROUP)


def masked_input(x: jax.Array, mask: jax.Array | None) -> jax.Array:
    """x: float[B, L, D], mask: bool[B, L] or None -> float32[B, L, D], zero at pads."""
    xf = x.astype(jnp.float32)
    if mask is None:
        return xf
    if mask.shape != x.shape[:2]:
        raise ValueError(f"mask shape {mask.shape} does not match x's [batch, length] {x.shape[:2]}")
    return jnp.where(mask[..., None], xf, 0.0)


def _combine(left, right):
    """(a_i, b_i) o (a_j, b_j) = (a_j a_i, a_j b_i + b_j): apply step i, then step j."""
    a_i, b_i = left
    a_j, b_j = right
    return a_j * a_i, a_j * b_i + b_j


def diagonal_scan(a: jax.Array, bu: jax.Array, *, reverse: bool = False) -> jax.Array:
    """States of ``x_t = a (.) x_{t-1} + bu_t`` from x = 0, by ``jax.lax.associative_scan``.

    a: complex[N] (time-invariant diagonal); bu: complex[B, L, N]. Returns complex[B, L, N].
    ``reverse=True`` runs from t = L-1 down to 0: ``x_t = a (.) x_{t+1} + bu_t``.
    O(L N) work, O(log L) depth.
    """
    a_seq = jnp.broadcast_to(a[None, None, :], bu.shape)
    _, states = jax.lax.associative_scan(_combine, (a_seq, bu), axis=1, reverse=reverse)
    return states


def causal_fft_conv(u: jax.Array, k: jax.Array) -> jax.Array:
    """y_t = sum_{s <= t} k[t - s] u_s per channel, by FFT of length 2L (no wrap-around).

    u: float32[B, L, D]; k: float32[D, L]. Returns float32[B, L, D].
    """
    length = u.shape[1]
    n = 2 * length
    uf = jnp.fft.rfft(u, n=n, axis=1)
    kf = jnp.fft.rfft(k.T, n=n, axis=0)
    return jnp.fft.irfft(uf * kf[None], n=n, axis=1)[:, :length]


def bidirectional_fft_conv(u: jax.Array, k_fwd: jax.Array, k_bwd: jax.Array | None) -> jax.Array:
    """Causal conv with ``k_fwd`` plus, if given, ``k_bwd`` on the time-reversed sequence.

    y_t = sum_{s <= t} k_fwd[t - s] u_s + sum_{s >= t} k_bwd[s - t] u_s (both include s = t).
    u: float32[B, L, D] (zero at pads, see the module docstring); k_*: float32[D, L].
    """
    y = causal_fft_conv(u, k_fwd)
    if k_bwd is not None:
        y = y + jnp.flip(causal_fft_conv(jnp.flip(u, axis=1), k_bwd), axis=1)
    return y
