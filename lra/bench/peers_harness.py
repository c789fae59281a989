"""Time attention layers of other libraries ("peers") next to ours, one case per process.

Run by the peers venv's python as a script (``python -m lra.bench.peers`` does, writing the
provenance line first); it imports neither JAX nor torch at the top, only in the case process that
needs one of them::

    $PEERS_HOME/venv/bin/python lra/bench/peers_harness.py --list
    $PEERS_HOME/venv/bin/python lra/bench/peers_harness.py --peers torch_sdpa ours_softmax_kernel \\
        --seq-lens 1024 2048 --modes fwdbwd --out peers.jsonl

Protocol, per (peer, length, mode), each case in a fresh child process (``--_case``), so that its
memory figures are its own and it imports one framework:

* inputs: q, k, v float32 [B, H, L, D] (or the peer's own layout) for a ``core`` peer; x float32
  [B, L, H*D] for a ``module`` peer, which holds its own projections.
* ``fwd``: the forward pass (torch under ``no_grad``; JAX jitted). ``fwdbwd``: forward plus a
  vector-Jacobian product with a fixed random cotangent, giving the gradient of every input and
  every parameter.
* the first call is not timed (JAX: compilation is timed apart, ``compile_s``); one warm-up call
  unless the first took over ``SLOW_FIRST_S``; then the median of ``--repeats`` calls, stopping
  after ``--min-repeats`` once ``--max-case-seconds`` have passed.
* memory: the growth of the child's RSS high-water mark over the first call and over all calls,
  from a baseline taken once inputs and parameters exist; JAX adds XLA's temp-buffer size.
* machine health: a fixed numpy GEMM (``PROBE_N``^3, median of ``PROBE_REPS``) before and after the
  case; a case whose lower probe is under ``--retry-below`` GFLOP/s is run again (``--retries``) and
  the attempt with the healthier probe kept.
* threads: every framework pinned to ``--threads`` cores (CPU affinity, which XLA sizes its pool
  from, and torch's thread count); glibc malloc told to keep freed memory (``MALLOC``: page
  first-touch is costly in VMs, and both frameworks allocate through glibc).

Output: one JSON line per (peer, length) on stdout (and appended to ``--out``), the modes merged
under ``<mode>_`` prefixes: ``ms_median``, ``ms_min``, ``n``, ``probe_gflops`` [before, after],
``attempts``, ``peak_rss_delta_mb``, ``first_call_rss_delta_mb``, ``out_finite``, and
``compile_s``/``xla_temp_mb`` for JAX, ``gflop``/``gflops_achieved`` for exact softmax; ``status``
is ``ok``, ``partial``, ``failed`` or ``unavailable`` (package or official file missing).

Official code that is not on PyPI is read from ``$PEERS_THIRD_PARTY`` (default
``$PEERS_HOME/third_party``), outside the repository: docs/efficiency.md
"Against third-party implementations" says which files go there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)

MARK = "@@LRA_PEER_CASE@@ "
MALLOC = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "100000000000"}
PROBE_N, PROBE_REPS = 1024, 5
SLOW_FIRST_S = 11.0
PEERS_HOME = os.environ.get("PEERS_HOME", os.path.expanduser("~/.cache/lra-peers"))
THIRD_PARTY = os.environ.get("PEERS_THIRD_PARTY", os.path.join(PEERS_HOME, "third_party"))
MODES = ("fwd", "fwdbwd")


@dataclass(frozen=True)
class Peer:
    framework: str          # "torch" or "jax"
    kind: str               # "core" (q, k, v in) or "module" (x in, own projections)
    mechanism: str          # matched against our families by lra/leaderboard/peers.py
    note: str
    packages: tuple[str, ...] = ()
    files: tuple[str, ...] = ()   # official files needed under THIRD_PARTY
    exact_softmax: bool = False
    build: Callable | None = field(default=None, compare=False)


PEERS: dict[str, Peer] = {}


def peer(name: str, framework: str, kind: str, mechanism: str, note: str, *, packages=(),
         files=(), exact_softmax=False):
    """Register the decorated builder ``(B, H, L, D) -> (fn, inputs[, modules])`` as ``name``."""
    def register(build):
        PEERS[name] = Peer(framework, kind, mechanism, note, tuple(packages), tuple(files),
                           exact_softmax, build)
        return build
    return register


def nominal_gflop(spec: Peer, B: int, H: int, L: int, D: int, mode: str) -> float | None:
    """Matmul GFLOPs of exact softmax attention: 4BHL^2D forward (QK^T and PV), plus 8BLE^2 for a
    module's four projections; fwd+bwd is three times the forward. None for other mechanisms."""
    if not spec.exact_softmax:
        return None
    flop = 4.0 * B * H * L * L * D + (8.0 * B * L * (H * D) ** 2 if spec.kind == "module" else 0.0)
    return (flop if mode == "fwd" else 3.0 * flop) / 1e9


def available(name: str) -> bool:
    """Whether the peer's framework, packages and official files are all here."""
    from importlib import metadata

    spec = PEERS[name]
    if any(not os.path.isfile(os.path.join(THIRD_PARTY, f)) for f in spec.files):
        return False
    for dist in (spec.framework, *spec.packages):
        try:
            metadata.version(dist)
        except metadata.PackageNotFoundError:
            return False
    return True


def versions(name: str) -> dict[str, str | None]:
    from importlib import metadata

    spec = PEERS[name]
    dists = ("torch",) if spec.framework == "torch" else ("jax", "jaxlib")
    out = {}
    for dist in (*dists, *spec.packages):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _official(subdir: str) -> None:
    path = os.path.join(THIRD_PARTY, subdir)
    if path not in sys.path:
        sys.path.insert(0, path)


# ------------------------------------------------------------------ torch peers

def _torch_inputs(grad: bool, *shapes):
    import torch

    torch.manual_seed(0)
    return tuple(torch.randn(*s, requires_grad=grad) for s in shapes)


@peer("torch_sdpa", "torch", "core", "softmax", "torch.nn.functional.scaled_dot_product_attention",
      exact_softmax=True)
def _torch_sdpa(B, H, L, D, grad):
    import torch.nn.functional as F

    return F.scaled_dot_product_attention, _torch_inputs(grad, *[(B, H, L, D)] * 3), []


@peer("torch_mha_module", "torch", "module", "softmax",
      "torch.nn.MultiheadAttention(E, H, batch_first=True) with in/out projections", exact_softmax=True)
def _torch_mha(B, H, L, D, grad):
    import torch

    m = torch.nn.MultiheadAttention(H * D, H, batch_first=True)
    return (lambda x: m(x, x, x, need_weights=False)[0]), _torch_inputs(grad, (B, L, H * D)), [m]


def _cosformer(B, H, L, D, grad, core):
    import torch

    _official("cosformer")
    from cosformer import CosformerAttention

    m = CosformerAttention(embed_dim=H * D, num_heads=H, causal=False, has_outproj=not core)
    if core:
        m.q_proj = m.k_proj = m.v_proj = torch.nn.Identity()
    (x,) = _torch_inputs(grad, (L, B, H * D))  # the official code's [L, B, E] layout
    return (lambda x: m(x, x, x)), (x,), [m]


@peer("cosformer_official_core", "torch", "core", "cosformer",
      "OpenNLPLab cosFormer CosformerAttention, q/k/v projections replaced by Identity, no out-proj",
      files=("cosformer/cosformer.py",))
def _cosformer_core(B, H, L, D, grad):
    return _cosformer(B, H, L, D, grad, core=True)


@peer("cosformer_official_module", "torch", "module", "cosformer",
      "OpenNLPLab cosFormer CosformerAttention(E, H) with q/k/v/out projections",
      files=("cosformer/cosformer.py",))
def _cosformer_module(B, H, L, D, grad):
    return _cosformer(B, H, L, D, grad, core=False)


@peer("performer_pytorch", "torch", "core", "performer",
      "performer_pytorch.FastAttention(dim_heads=D): FAVOR+, its default int(D ln D) features",
      packages=("performer-pytorch",))
def _performer(B, H, L, D, grad):
    from performer_pytorch import FastAttention

    m = FastAttention(dim_heads=D)
    return m, _torch_inputs(grad, *[(B, H, L, D)] * 3), [m]


@peer("performer_pytorch_module", "torch", "module", "performer",
      "performer_pytorch.SelfAttention(E, H, nb_features=256) with its q/k/v and out projections",
      packages=("performer-pytorch",))
def _performer_module(B, H, L, D, grad):
    from performer_pytorch import SelfAttention

    # 256 features, as our module in the run (performer's peer_options); the core peer above keeps the
    # library's default int(D ln D) = 266
    m = SelfAttention(dim=H * D, heads=H, dim_head=D, nb_features=256)
    return m, _torch_inputs(grad, (B, L, H * D)), [m]


@peer("lat_linear_attn", "torch", "core", "linear(softmax-feature)",
      "linear_attention_transformer linear_attn: softmax(q) over d, softmax(k) over n",
      packages=("linear-attention-transformer",))
def _lat(B, H, L, D, grad):
    from linear_attention_transformer.linear_attention_transformer import linear_attn

    return linear_attn, _torch_inputs(grad, *[(B, H, L, D)] * 3), []


@peer("fast_transformers_linear", "torch", "core", "linear(elu+1)",
      "idiap fast_transformers LinearAttention (elu+1 features), full masks",
      packages=("pytorch-fast-transformers",))
def _fast_transformers(B, H, L, D, grad):
    import torch
    from fast_transformers.attention import LinearAttention
    from fast_transformers.masking import FullMask, LengthMask

    m = LinearAttention(D)
    full, lengths = FullMask(L), LengthMask(torch.full((B,), L, dtype=torch.int64), max_len=L)
    return ((lambda q, k, v: m(q, k, v, full, lengths, lengths)),
            _torch_inputs(grad, *[(B, L, H, D)] * 3), [m])


@peer("linformer_module", "torch", "module", "linformer",
      "linformer.LinformerSelfAttention(E, L, k=256, heads=H) with projections",
      packages=("linformer",))
def _linformer(B, H, L, D, grad):
    from linformer import LinformerSelfAttention

    m = LinformerSelfAttention(dim=H * D, seq_len=L, k=256, heads=H, dim_head=D)
    return m, _torch_inputs(grad, (B, L, H * D)), [m]


@peer("nystrom_module", "torch", "module", "nystrom",
      "nystrom_attention.NystromAttention(256 landmarks, 6 pinv iterations, residual conv 33)",
      packages=("nystrom-attention",))
def _nystrom(B, H, L, D, grad):
    from nystrom_attention import NystromAttention

    m = NystromAttention(dim=H * D, dim_head=D, heads=H, num_landmarks=256, pinv_iterations=6,
                         residual=True)
    return m, _torch_inputs(grad, (B, L, H * D)), [m]


@peer("local_attention_lucidrains", "torch", "core", "local/block",
      "local_attention.LocalAttention(window 128, no look back or forward: its own 128 keys, "
      "as ours)", packages=("local-attention",))
def _local(B, H, L, D, grad):
    from local_attention import LocalAttention

    # Our local family attends inside its own block only; the library's default also looks one
    # window back and forward (384 keys, three times the work), which is another mechanism.
    m = LocalAttention(window_size=128, causal=False, look_backward=0, look_forward=0)
    return m, _torch_inputs(grad, *[(B, H, L, D)] * 3), [m]


@peer("local_mha_lucidrains", "torch", "module", "local/block",
      "local_attention.LocalMHA(window 128, no look back or forward, no rotary embedding) with its "
      "fused q/k/v and out projections", packages=("local-attention",))
def _local_mha(B, H, L, D, grad):
    from local_attention import LocalMHA

    # The module form of the peer above: x -> q, k, v (one bias-free Linear) -> the same local
    # attention -> out, as our module does; its heads-first layout changes are its own, like ours.
    m = LocalMHA(dim=H * D, window_size=128, dim_head=D, heads=H, causal=False, look_backward=0,
                 look_forward=0, use_rotary_pos_emb=False)
    return m, _torch_inputs(grad, (B, L, H * D)), [m]


@peer("reformer_lsh", "torch", "core", "reformer-lsh",
      "reformer_pytorch LSHAttention(bucket_size=64, n_hashes=8), shared qk", packages=("reformer-pytorch",))
def _reformer(B, H, L, D, grad):
    from reformer_pytorch.reformer_pytorch import LSHAttention

    m = LSHAttention(bucket_size=64, n_hashes=8, causal=False)
    return (lambda qk, v: m(qk, v)[0]), _torch_inputs(grad, (B * H, L, D), (B * H, L, D)), [m]


@peer("reformer_lsh_module", "torch", "module", "reformer-lsh",
      "reformer_pytorch LSHSelfAttention(bucket_size=64, n_hashes=8) with its shared-qk, v and out "
      "projections", packages=("reformer-pytorch",))
def _reformer_module(B, H, L, D, grad):
    from reformer_pytorch.reformer_pytorch import LSHSelfAttention

    m = LSHSelfAttention(dim=H * D, heads=H, dim_head=D, bucket_size=64, n_hashes=8, causal=False)
    return m, _torch_inputs(grad, (B, L, H * D)), [m]


@peer("sinkhorn_attention", "torch", "core", "sinkhorn",
      "sinkhorn_transformer SinkhornAttention(bucket_size=64) with its sort net",
      packages=("sinkhorn-transformer",))
def _sinkhorn(B, H, L, D, grad):
    from sinkhorn_transformer.sinkhorn_transformer import SinkhornAttention

    m = SinkhornAttention(bucket_size=64, dim=H * D, dim_heads=D, heads=H, max_seq_len=L)
    return m, _torch_inputs(grad, *[(B, H, L, D)] * 3), [m]


@peer("sinkhorn_module", "torch", "module", "sinkhorn",
      "sinkhorn_transformer SinkhornSelfAttention(bucket_size=64) with its sort net and q/kv/out "
      "projections", packages=("sinkhorn-transformer",))
def _sinkhorn_module(B, H, L, D, grad):
    from sinkhorn_transformer.sinkhorn_transformer import SinkhornSelfAttention

    m = SinkhornSelfAttention(dim=H * D, bucket_size=64, max_seq_len=L, heads=H, dim_head=D)
    return m, _torch_inputs(grad, (B, L, H * D)), [m]


@peer("bigbird_hf_block_sparse", "torch", "module", "bigbird",
      "transformers BigBirdBlockSparseAttention(block 64, 3 random blocks) with q/k/v projections",
      packages=("transformers",))
def _bigbird(B, H, L, D, grad):
    import torch
    from transformers import BigBirdConfig
    from transformers.models.big_bird import modeling_big_bird as bb

    cfg = BigBirdConfig(hidden_size=H * D, num_attention_heads=H, attention_type="block_sparse",
                        block_size=64, num_random_blocks=3, max_position_embeddings=L,
                        attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0)
    m = bb.BigBirdBlockSparseAttention(cfg, seed=0)
    blocked, band, rows, cols = bb.BigBirdModel.create_masks_for_block_sparse_attn(
        torch.ones(B, L), 64)
    return ((lambda x: m(x, band, rows, cols, blocked, blocked)[0]),
            _torch_inputs(grad, (B, L, H * D)), [m])


@peer("longformer_hf", "torch", "module", "longformer",
      "transformers LongformerSelfAttention(window 256, token 0 global) with its projections",
      packages=("transformers",))
def _longformer(B, H, L, D, grad):
    import torch
    from transformers import LongformerConfig
    from transformers.models.longformer.modeling_longformer import LongformerSelfAttention

    cfg = LongformerConfig(hidden_size=H * D, num_attention_heads=H, attention_window=[256],
                           attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0)
    m = LongformerSelfAttention(cfg, layer_id=0)
    mask = torch.zeros(B, L)
    mask[:, 0] = 1.0  # > 0: global, like a CLS token
    return ((lambda x: m(x, attention_mask=mask, is_index_masked=mask < 0,
                         is_index_global_attn=mask > 0, is_global_attn=True)[0]),
            _torch_inputs(grad, (B, L, H * D)), [m])


# ------------------------------------------------------------------ JAX peers and ours

def _jax_inputs(*shapes):
    import jax

    keys = jax.random.split(jax.random.key(0), len(shapes))
    return tuple(jax.random.normal(k, s) for k, s in zip(keys, shapes))


@peer("jax_nn_dpa", "jax", "core", "softmax", "jax.nn.dot_product_attention(implementation='xla')",
      exact_softmax=True)
def _jax_dpa(B, H, L, D):
    import jax

    return (lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation="xla"),
            _jax_inputs(*[(B, L, H, D)] * 3))


@peer("jax_nn_dpa_local", "jax", "core", "local/block",
      "jax.nn.dot_product_attention(local_window_size=(128, 128)): 257 keys per query, though XLA "
      "still computes the full L x L scores")
def _jax_dpa_local(B, H, L, D):
    import jax

    return (lambda q, k, v: jax.nn.dot_product_attention(q, k, v, local_window_size=(128, 128),
                                                         implementation="xla"),
            _jax_inputs(*[(B, L, H, D)] * 3))


@peer("flax_nnx_dpa", "jax", "core", "softmax", "flax.nnx.dot_product_attention",
      packages=("flax",), exact_softmax=True)
def _nnx_dpa(B, H, L, D):
    from flax import nnx

    return ((lambda q, k, v: nnx.dot_product_attention(q, k, v, deterministic=True)),
            _jax_inputs(*[(B, L, H, D)] * 3))


@peer("flax_linen_mha", "jax", "module", "softmax",
      "flax.linen.MultiHeadDotProductAttention(H, E) with q/k/v/out projections",
      packages=("flax",), exact_softmax=True)
def _linen_mha(B, H, L, D):
    import jax
    from flax import linen

    mha = linen.MultiHeadDotProductAttention(num_heads=H, qkv_features=H * D, out_features=H * D,
                                             deterministic=True)
    (x,) = _jax_inputs((B, L, H * D))
    params = mha.init(jax.random.key(1), x)["params"]
    return (lambda params, x: mha.apply({"params": params}, x)), (params, x)


@peer("flax_nnx_mha", "jax", "module", "softmax",
      "flax.nnx.MultiHeadAttention(H, E) with q/k/v/out projections", packages=("flax",),
      exact_softmax=True)
def _nnx_mha(B, H, L, D):
    from flax import nnx

    mha = nnx.MultiHeadAttention(num_heads=H, in_features=H * D, decode=False, deterministic=True,
                                 rngs=nnx.Rngs(0))
    graph, params = nnx.split(mha)
    return (lambda params, x: nnx.merge(graph, params)(x)), (params, *_jax_inputs((B, L, H * D)))


def _project() -> None:
    root = os.environ.get("LRA_PROJECT", os.getcwd())
    if root not in sys.path:
        sys.path.insert(0, root)


def _declared_families() -> dict[str, dict]:
    """{family: what its file declares} for the families of this project, read as text
    (lra/declared.py), so that listing the cases imports no JAX."""
    _project()
    try:
        from lra.declared import declared
    except ImportError:  # run as a script from outside the project, LRA_PROJECT unset
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        from lra.declared import declared
    return declared("attention")


# Our module of each family that declares ``peer_options`` (the options under which it does the
# work of the peers of its mechanism), and the pure function of each that declares ``peer_kernel``
# (the mechanism of its ``<family>_kernel``): every fact is in the family's own file.
OURS_MATCH = {f: facts["peer_options"] for f, facts in _declared_families().items()
              if "peer_options" in facts}
OURS_FAMILIES = tuple(OURS_MATCH)
OURS_KERNELS = {f: facts["peer_kernel"] for f, facts in _declared_families().items()
                if "peer_kernel" in facts}


def _ours_kernel(family: str):
    def build(B, H, L, D):
        _project()
        import importlib

        kernel = getattr(importlib.import_module(f"lra.attention.{family}"), f"{family}_kernel")
        return (lambda q, k, v: kernel(q, k, v)), _jax_inputs(*[(B, L, H, D)] * 3)
    return build


def _ours_module(family: str):
    def build(B, H, L, D):
        _project()
        from flax import nnx

        from lra import attention

        layer = attention.build(family, dim=H * D, num_heads=H, max_len=L, rngs=nnx.Rngs(0),
                                **OURS_MATCH[family])
        graph, params, rest = nnx.split(layer, nnx.Param, ...)
        return ((lambda params, x: nnx.merge(graph, params, rest)(x, deterministic=True)),
                (params, *_jax_inputs((B, L, H * D))))
    return build


@peer("ours_projections", "jax", "module", "projections",
      "lra.attention._projections.HeadProjections(E, H) (this project): x -> q, k, v -> out(q * k + v), "
      "what every module of ours adds to its core", packages=("flax",))
def _ours_projections(B, H, L, D):
    _project()
    from flax import nnx

    from lra.attention._projections import HeadProjections

    proj = HeadProjections(H * D, H, None, rngs=nnx.Rngs(0))
    graph, params = nnx.split(proj)

    # q * k + v, not q + k + v: with a sum the gradients of q, k and v are one array, and XLA
    # computes the three weight gradients x^T dq, x^T dk, x^T dv as one matmul, which no attention
    # core allows. Measured fwd+bwd at B=4, H=8, D=64, one process: 60 / 148 / 307 ms (sum) against
    # 82 / 194 / 437 ms (product) at 1K / 2K / 4K, so the sum understated what a module's
    # projections cost by a quarter to a third.
    def fn(params, x):
        q, k, v = nnx.merge(graph, params).qkv(x)
        return nnx.merge(graph, params).merge(q * k + v)
    return fn, (params, *_jax_inputs((B, L, H * D)))


for _family, _mechanism in OURS_KERNELS.items():
    peer(f"ours_{_family}_kernel", "jax", "core", _mechanism,
         f"lra.attention.{_family}.{_family}_kernel (this project), [B, L, H, D]",
         exact_softmax=_family == "softmax")(_ours_kernel(_family))
for _family in OURS_FAMILIES:
    peer(f"ours_{_family}_module", "jax", "module", _family,
         f"lra.attention.build({_family!r}, **{OURS_MATCH[_family]}) (this project) with "
         f"projections, deterministic", packages=("flax",),
         exact_softmax=_family == "softmax")(_ours_module(_family))


# ------------------------------------------------------------------ the case process

def rss_mb() -> float:
    """This process's RSS high-water mark in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def probe_gflops(n: int = PROBE_N, reps: int = PROBE_REPS) -> float:
    """GFLOP/s of the median of ``reps`` float32 n^3 numpy products: how healthy the machine is."""
    import numpy as np

    a = np.ones((n, n), np.float32)
    out = np.empty_like(a)
    np.matmul(a, a, out=out)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.matmul(a, a, out=out)
        times.append(time.perf_counter() - t0)
    return round(2.0 * n ** 3 / statistics.median(times) / 1e9, 1)


def timed_calls(call: Callable[[], object], first_s: float, *, warmup: int, repeats: int,
                min_repeats: int, max_seconds: float) -> list[float]:
    """Seconds of each timed call: ``warmup`` untimed calls (none after a first call slower than
    ``SLOW_FIRST_S``), then up to ``repeats``, at least ``min_repeats``, stopping after
    ``max_seconds`` of timed calls."""
    for _ in range(0 if first_s > SLOW_FIRST_S else warmup):
        call()
    times: list[float] = []
    while len(times) < repeats:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
        if len(times) >= min_repeats and sum(times) > max_seconds:
            break
    return times


def _torch_case(spec: Peer, B, H, L, D, grad: bool, res: dict):
    import torch

    fn, inputs, modules = spec.build(B, H, L, D, grad)
    params = [p for m in modules for p in m.parameters()]
    for p in params:
        p.requires_grad_(grad)
    if grad:
        cotangent = torch.randn(fn(*inputs).shape, generator=torch.Generator().manual_seed(7))
        leaves = [*inputs, *params]

        def call():
            return torch.autograd.grad(fn(*inputs), leaves, cotangent, allow_unused=True)
    else:
        def call():
            with torch.no_grad():
                return (fn(*inputs),)
    finite = lambda out: all(bool(torch.isfinite(t).all()) for t in out if t is not None)  # noqa: E731
    return call, finite


def _jax_case(spec: Peer, B, H, L, D, grad: bool, res: dict):
    import jax
    import jax.numpy as jnp

    fn, inputs = spec.build(B, H, L, D)
    if grad:
        out_shape = jax.eval_shape(fn, *inputs)
        cotangent = jax.random.normal(jax.random.key(7), out_shape.shape, out_shape.dtype)
        program = jax.jit(lambda inputs, ct: jax.vjp(fn, *inputs)[1](ct))
        args = (inputs, cotangent)
    else:
        program, args = jax.jit(fn), inputs
    t0 = time.perf_counter()
    compiled = program.lower(*args).compile()
    res["compile_s"] = round(time.perf_counter() - t0, 3)
    try:
        res["xla_temp_mb"] = round(compiled.memory_analysis().temp_size_in_bytes / 2**20, 1)
    except Exception:  # best effort: not every backend reports it
        pass

    def call():
        return jax.block_until_ready(compiled(*args))
    finite = lambda out: all(bool(jnp.isfinite(t).all()) for t in jax.tree.leaves(out))  # noqa: E731
    return call, finite


def run_case(a: argparse.Namespace) -> dict:
    """One (peer, length, mode) in this process; the record the parent merges."""
    spec = PEERS[a.peer]
    B, H, L, D = a.batch, a.heads, a.seq_len, a.head_dim
    res = {"probe_gflops_before": probe_gflops()}
    if spec.framework == "torch":
        import torch

        torch.set_num_threads(a.threads)
    make = _torch_case if spec.framework == "torch" else _jax_case
    call, finite = make(spec, B, H, L, D, a.mode == "fwdbwd", res)
    baseline = rss_mb()
    t0 = time.perf_counter()
    out = call()
    first = time.perf_counter() - t0
    res["first_call_ms"] = round(first * 1e3, 1)
    res["first_call_rss_delta_mb"] = round(rss_mb() - baseline, 1)
    res["out_finite"] = finite(out)
    del out
    times = timed_calls(call, first, warmup=a.warmup, repeats=a.repeats,
                        min_repeats=a.min_repeats, max_seconds=a.max_case_seconds)
    res["peak_rss_delta_mb"] = round(rss_mb() - baseline, 1)
    time.sleep(0.5)  # let the frameworks' worker threads go idle before the second probe
    res["probe_gflops_after"] = probe_gflops()
    res.update(ms_median=round(statistics.median(times) * 1e3, 3),
               ms_min=round(min(times) * 1e3, 3), n=len(times))
    return res


# ------------------------------------------------------------------ the parent

CASE_FLAGS = ("batch", "heads", "head_dim", "threads", "warmup", "repeats", "min_repeats",
              "max_case_seconds")


def case_command(a: argparse.Namespace, name: str, length: int, mode: str) -> list[str]:
    cmd = [sys.executable, os.path.abspath(__file__), "--_case", "--peer", name,
           "--seq-len", str(length), "--mode", mode]
    for flag in CASE_FLAGS:
        cmd += [f"--{flag.replace('_', '-')}", str(getattr(a, flag))]
    return cmd


def parse_case_output(stdout: str) -> dict | None:
    """The case's record: the last line that starts with ``MARK``, or None."""
    found = None
    for line in stdout.splitlines():
        if line.startswith(MARK):
            found = json.loads(line[len(MARK):])
    return found


def spawn(a: argparse.Namespace, name: str, length: int, mode: str) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
           "OMP_NUM_THREADS": str(a.threads), "MKL_NUM_THREADS": str(a.threads),
           "TF_CPP_MIN_LOG_LEVEL": "2", "TOKENIZERS_PARALLELISM": "false"}
    if not a.system_malloc:
        env.update(MALLOC)
    t0 = time.perf_counter()
    try:
        done = subprocess.run(case_command(a, name, length, mode), capture_output=True, text=True,
                              env=env, timeout=a.case_timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "wall_s": round(time.perf_counter() - t0, 1)}
    res = parse_case_output(done.stdout)
    if res is None:
        tail = " | ".join((done.stderr or "").strip().splitlines()[-3:])[-400:]
        return {"status": f"error(rc={done.returncode})", "error": tail,
                "wall_s": round(time.perf_counter() - t0, 1)}
    return {**res, "status": "ok", "wall_s": round(time.perf_counter() - t0, 1)}


def health(res: dict) -> float:
    return min(res["probe_gflops_before"], res["probe_gflops_after"])


def measure(a: argparse.Namespace, name: str, length: int, mode: str,
            run: Callable[..., dict] = spawn) -> tuple[dict, int]:
    """The case and its number of attempts: re-run while its probe was under ``--retry-below``,
    keeping the attempt measured on the healthiest machine."""
    best, attempts = run(a, name, length, mode), 1
    while best["status"] == "ok" and health(best) < a.retry_below and attempts <= a.retries:
        again = run(a, name, length, mode)
        attempts += 1
        if again["status"] == "ok" and health(again) > health(best):
            best = again
    return best, attempts


def merge(line: dict, mode: str, res: dict, attempts: int, gflop: float | None) -> None:
    """Put one mode's result into the (peer, length) line under ``<mode>_`` keys."""
    line[f"{mode}_attempts"] = attempts
    if res["status"] != "ok":
        line[f"{mode}_status"], line[f"{mode}_error"] = res["status"], res.get("error")
        return
    for key in ("ms_median", "ms_min", "n", "peak_rss_delta_mb", "first_call_rss_delta_mb",
                "out_finite", "first_call_ms", "compile_s", "xla_temp_mb"):
        if key in res:
            line[f"{mode}_{key}"] = res[key]
    line[f"{mode}_probe_gflops"] = [res["probe_gflops_before"], res["probe_gflops_after"]]
    if gflop is not None:
        line[f"{mode}_gflop"] = round(gflop, 2)
        line[f"{mode}_gflops_achieved"] = round(gflop / (res["ms_median"] / 1e3), 1)


def line_status(line: dict, modes) -> str:
    done = [m for m in modes if f"{m}_ms_median" in line]
    return "ok" if len(done) == len(modes) else ("partial" if done else "failed")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--peers", nargs="*", default=None, help="default: every registered peer")
    p.add_argument("--seq-lens", nargs="*", type=int, default=[1024, 2048, 4096])
    p.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min-repeats", type=int, default=3)
    p.add_argument("--max-case-seconds", type=float, default=45.0)
    p.add_argument("--case-timeout", type=float, default=900.0)
    p.add_argument("--retry-below", type=float, default=0.0,
                   help="re-run a case whose lower probe is under this many GFLOP/s "
                        "(python -m lra.bench.peers sets 80%% of the idle machine's probe)")
    p.add_argument("--retries", type=int, default=2)
    p.add_argument("--system-malloc", action="store_true", help="leave glibc malloc as it is")
    p.add_argument("--out", default=None, help="also append the JSON lines to this file")
    p.add_argument("--list", action="store_true", help="print the peers and whether each is here")
    p.add_argument("--_case", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--peer", help=argparse.SUPPRESS)
    p.add_argument("--seq-len", type=int, help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    cores = sorted(os.sched_getaffinity(0))
    if a.threads < len(cores):
        os.sched_setaffinity(0, cores[:a.threads])  # children inherit it
    if a._case:
        print(MARK + json.dumps(run_case(a)), flush=True)
        return 0
    if a.list:
        for name, spec in PEERS.items():
            print(json.dumps({"peer": name, "available": available(name), "framework":
                              spec.framework, "kind": spec.kind, "mechanism": spec.mechanism,
                              "note": spec.note}))
        return 0
    names = a.peers or list(PEERS)
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        print(f"error: unknown peers {unknown}; --list shows them", file=sys.stderr)
        return 2
    host = {"machine": platform.machine(), "cpus_visible": len(os.sched_getaffinity(0)),
            "python": platform.python_version()}
    out = open(a.out, "a") if a.out else None
    try:
        for name in names:
            spec, here = PEERS[name], available(name)
            for length in a.seq_lens:
                line = {"peer": name, "framework": spec.framework, "kind": spec.kind,
                        "mechanism": spec.mechanism, "seq_len": length, "batch": a.batch,
                        "heads": a.heads, "head_dim": a.head_dim, "threads": a.threads,
                        "malloc": "system" if a.system_malloc else "no-mmap-no-trim",
                        "versions": versions(name), "note": spec.note, "host": host}
                if here:
                    for mode in a.modes:
                        res, attempts = measure(a, name, length, mode)
                        merge(line, mode, res, attempts,
                              nominal_gflop(spec, a.batch, a.heads, length, a.head_dim, mode))
                line["status"] = line_status(line, a.modes) if here else "unavailable"
                print(json.dumps(line), flush=True)
                if out:
                    out.write(json.dumps(line) + "\n")
                    out.flush()
    finally:
        if out:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
