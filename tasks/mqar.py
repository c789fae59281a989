"""Multi-query associative recall (MQAR): recall the value bound to each key, queried later.

The synthetic recall task of Zoology (Arora, Eyuboglu, Timalsina, Johnson, Poli, Zou, Rudra and
Ré, "Zoology: Measuring and Improving Recall in Efficient Language Models", ICLR 2024, arXiv
2312.04927; its generator is ``multiquery_ar`` in HazyResearch/zoology, ``zoology/data/
multiquery_ar.py``). Generated in memory from a seed per split; nothing is downloaded or written.

One example of length ``L`` over a vocabulary of ``V`` tokens (``V > L``, ``L`` even):

* the first half of the vocabulary (ids 1 .. V/2 - 1) holds keys, the second (V/2 .. V - 1)
  values; ``pairs`` keys and ``pairs`` values are drawn without replacement, so no key repeats
  within an example;
* the context ``k1 v1 k2 v2 ...`` fills the first ``2 * pairs`` positions;
* the rest is ``space = (L - 2 * pairs) / 2`` two-token slots. Each key is queried once: ``pairs``
  distinct slots are drawn with probability p_g proportional to (g + 1)^(power_a - 1), g = 0 ..
  space - 1 (``power_a`` = 0.01, Zoology's default: short gaps are likely), and the key is written
  at the slot's first position ``2 * pairs + 2 g``;
* every other position holds a token drawn uniformly from the whole vocabulary (Zoology's
  ``random_non_queries``; such a token may repeat a key, never inside the context).

Two forms (``form``), never compared with each other:

* ``causal``, Zoology's next-token form: the target at a query key's position is that key's value
  (the token that would come next); the model must run causally (``causal = True``: each
  prediction sees only its past), which only families with a causal mode allow;
* ``bidirectional``: the token after each query key is replaced by a mask token (id ``V``) and the
  value is predicted at that position, in place, by a model that sees the whole sequence; every
  family can run it.

Targets are per position (``per_position = True``, the task contract): ``targets`` int32[L] with
``target_mask`` bool[L] True at the ``pairs`` query (causal) or mask (bidirectional) positions;
the loss and accuracy average over those positions only (Zoology's metric). The head classifies
every position over the whole vocabulary (``num_classes = V``, as Zoology's language-model head).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from lra.tasks import Provenance, Task, example_index, register, split_sizes

GENERATOR_VERSION = 1
FORMS = ("causal", "bidirectional")
# Each split's stream is seeded by (seed, the split's index): train, val and test never share one.
SPLIT_INDEX = {"train": 0, "val": 1, "test": 2}


def check_options(length: int, pairs: int, vocab_size: int, power_a: float, form: str) -> None:
    """Zoology's constraints (L even, V > L, 2 * pairs + 2 * pairs <= L) and ours (form, power_a,
    at least one pair); a ValueError names the option and what is allowed."""
    if form not in FORMS:
        raise ValueError(f"form={form!r}: choose from {', '.join(FORMS)}")
    if length < 4 or length % 2:
        raise ValueError(f"length={length}: must be even and >= 4 (the context and the queries "
                         f"take two positions per pair)")
    if vocab_size <= length:
        raise ValueError(f"vocab_size={vocab_size} must exceed length={length} (Zoology's V > L)")
    if pairs < 1:
        raise ValueError(f"pairs={pairs}: at least one key-value pair is needed")
    if 4 * pairs > length:
        raise ValueError(f"pairs={pairs} does not fit length={length}: the context takes 2 * pairs "
                         f"positions and the queries 2 * pairs more ({4 * pairs} > {length})")
    if pairs > vocab_size // 2 - 1:
        raise ValueError(f"pairs={pairs}: only {vocab_size // 2 - 1} distinct keys in a "
                         f"vocabulary of {vocab_size}")
    if not 0 < power_a <= 1:
        raise ValueError(f"power_a={power_a}: must be in (0, 1] (1 = uniform gaps)")


def gap_probabilities(space: int, power_a: float) -> np.ndarray:
    """float64[space]: p_g proportional to (g + 1)^(power_a - 1), the query gap's power law."""
    p = power_a * np.arange(1, space + 1, dtype=np.float64) ** (power_a - 1)
    return p / p.sum()


def generate(n: int, *, length: int, pairs: int, vocab_size: int, power_a: float,
             seed: int | Sequence[int]) -> dict[str, np.ndarray]:
    """``n`` examples of the causal form (the module docstring): {"inputs": int32[n, L],
    "targets": int32[n, L], "target_mask": bool[n, L], "keys": int32[n, pairs],
    "values": int32[n, pairs], "gaps": int32[n, pairs]}. Same arguments, same arrays."""
    check_options(length, pairs, vocab_size, power_a, "causal")
    rng = np.random.default_rng(seed)
    half, context = vocab_size // 2, 2 * pairs
    space = (length - context) // 2
    p = gap_probabilities(space, power_a)
    keys = np.stack([rng.choice(np.arange(1, half), pairs, replace=False) for _ in range(n)])
    values = np.stack([rng.choice(np.arange(half, vocab_size), pairs, replace=False)
                       for _ in range(n)])
    gaps = np.stack([rng.choice(space, pairs, replace=False, p=p) for _ in range(n)])
    inputs = rng.integers(0, vocab_size, (n, length))  # the random non-query tokens
    inputs[:, 0:context:2], inputs[:, 1:context:2] = keys, values
    where = context + 2 * gaps
    rows = np.arange(n)[:, None]
    inputs[rows, where] = keys
    targets = np.zeros((n, length), np.int32)
    target_mask = np.zeros((n, length), bool)
    targets[rows, where], target_mask[rows, where] = values, True
    return {"inputs": inputs.astype(np.int32), "targets": targets, "target_mask": target_mask,
            "keys": keys.astype(np.int32), "values": values.astype(np.int32),
            "gaps": gaps.astype(np.int32)}


def to_bidirectional(data: dict[str, np.ndarray], mask_id: int) -> dict[str, np.ndarray]:
    """The causal form's arrays -> the bidirectional form's: the token after each query key becomes
    ``mask_id`` and the key's value is the target there, in place."""
    rows, cols = np.nonzero(data["target_mask"])
    inputs, targets = data["inputs"].copy(), np.zeros_like(data["targets"])
    target_mask = np.zeros_like(data["target_mask"])
    inputs[rows, cols + 1] = mask_id
    targets[rows, cols + 1] = data["targets"][rows, cols]
    target_mask[rows, cols + 1] = True
    return {**data, "inputs": inputs, "targets": targets, "target_mask": target_mask}


class MQARExamples(Sequence):
    """Random access to one split: ``ex[i]`` -> {"inputs": int32[L], "mask": bool[L] (all True:
    every example fills its length), "targets": int32[L], "target_mask": bool[L]}."""

    def __init__(self, data: dict[str, np.ndarray]):
        self.inputs, self.targets = data["inputs"], data["targets"]
        self.target_mask = data["target_mask"]
        self.mask = np.ones(self.inputs.shape[1], bool)

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        i = example_index(i, len(self.inputs))
        return {"inputs": self.inputs[i], "mask": self.mask, "targets": self.targets[i],
                "target_mask": self.target_mask[i]}


@register("mqar")
class MQARTask(Task):
    display_name = "MQAR"
    track = "recall"  # not one of LRA's six: --task all leaves it out
    per_position = True
    pad_id = 0  # never padded: every example is exactly ``length`` tokens long

    def __init__(self, data_dir, *, length: int = 128, pairs: int = 8, vocab_size: int = 8192,
                 power_a: float = 0.01, form: str = "causal", seed: int = 0,
                 train_size: int = 20_000, val_size: int = 1_000, test_size: int = 1_000):
        """Data options (``--set data.<option>=...``): ``length`` L and ``pairs`` (Zoology's
        ``input_seq_len`` and ``num_kv_pairs``), ``vocab_size`` V of keys and values (the
        bidirectional form adds one mask token), ``power_a`` the query gaps' power law, ``form``
        causal or bidirectional, ``seed`` of the generator, and the split sizes (0 is refused:
        there is no whole split to take)."""
        super().__init__(data_dir)
        check_options(length, pairs, vocab_size, power_a, form)
        self.sizes = split_sizes("mqar", train_size, val_size, test_size)
        for split, size in self.sizes.items():
            if size == 0:
                raise ValueError(f"mqar: {split}_size must be >= 1 (a generated split has no "
                                 f"whole to take)")
        self.length, self.pairs, self.power_a, self.form = length, pairs, power_a, form
        self.seed = seed
        self.max_len = length
        self.num_classes = vocab_size
        self.vocab_size = vocab_size + (form == "bidirectional")
        self.causal = form == "causal"
        self._splits: dict[str, MQARExamples] = {}

    def prepare(self) -> None:
        pass  # generated in memory on first use (source)

    def source(self, split: str) -> MQARExamples:
        if split not in self._splits:
            data = generate(self.sizes[split], length=self.length, pairs=self.pairs,
                            vocab_size=self.num_classes, power_a=self.power_a,
                            seed=[self.seed, SPLIT_INDEX[split]])
            if self.form == "bidirectional":
                data = to_bidirectional(data, mask_id=self.num_classes)
            self._splits[split] = MQARExamples(data)
        return self._splits[split]

    def chance(self, examples: int) -> tuple[float, int]:
        """A value is one of the V/2 value tokens, and each example counts ``pairs`` query
        positions: the recall track's rule (lra/leaderboard/recall.py ``at_chance``)."""
        return 2.0 / self.num_classes, examples * self.pairs

    def head(self, features_dim: int, mlp_dim: int, *, rngs, **options):
        from lra.tasks._heads import PositionHead

        return PositionHead(features_dim, self.num_classes, rngs=rngs)

    def provenance(self) -> Provenance:
        return Provenance(
            folder="mqar", origin="generated", files={}, wanted=dict(self.sizes),
            generator={"name": "mqar (Zoology's multiquery_ar)", "version": GENERATOR_VERSION,
                       "seed": self.seed, "length": self.length, "pairs": self.pairs,
                       "vocab_size": self.num_classes, "power_a": self.power_a,
                       "form": self.form})

    def describe(self):
        return {**super().describe(), "per_position": True, "form": self.form}
