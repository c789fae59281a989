"""STUB (issue 46's branch): display names and kinds of families and tasks.

Another branch writes the real ``lra/leaderboard/names.py``; this stub only holds the three
functions the web page calls, so that the page can be built here. It returns ids as they are, and a
family's kind from the groups README draws (LRA's 2020-era efficient attention, the state-space and
gated-EMA mixers, the 2023-25 gated recurrent mixers). Replace it whole at the merge.
"""

from __future__ import annotations

ATTENTION_2020 = "2020 attention"
STATE_SPACE = "state space"
MIXER_2023 = "2023-25 mixer"

_KINDS = {
    **dict.fromkeys(("bigbird", "cosformer", "fnet", "linear", "linformer", "local", "longformer",
                     "luna", "nystromformer", "performer", "reformer", "sinkhorn", "softmax",
                     "sparse", "synthesizer"), ATTENTION_2020),
    **dict.fromkeys(("s4d", "s5", "lru", "mega"), STATE_SPACE),
    **dict.fromkeys(("gated_deltanet", "gla", "mamba", "mamba2", "mlstm", "retnet"), MIXER_2023),
}


def family_name(family: str) -> str:
    """The name a reader knows the family by (stub: the id)."""
    return family


def family_kind(family: str) -> str | None:
    """The family's group; None for a family this module does not know."""
    return _KINDS.get(family)


def task_name(task: str) -> str:
    """The name a reader knows the task by (stub: the id)."""
    return task
