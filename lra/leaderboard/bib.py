"""``leaderboard.bib``: BibTeX entries of the papers the LaTeX tables' captions cite, with the keys
their ``\\cite`` commands use. The facts (first author, year, venue, arXiv address) are those of
CITATION.cff's references, with HGRN and Megalodon, which it does not list."""

from __future__ import annotations

from lra.leaderboard import published

# key: (entry type, title, authors, year, venue field, venue, arXiv id)
ENTRIES = {
    "tay2021lra": ("inproceedings", "Long Range Arena: A Benchmark for Efficient Transformers",
                   "Tay, Yi and others", 2021, "booktitle",
                   "International Conference on Learning Representations (ICLR)", "2011.04006"),
    "qin2022cosformer": ("inproceedings", "cosFormer: Rethinking Softmax in Attention",
                         "Qin, Zhen and others", 2022, "booktitle",
                         "International Conference on Learning Representations (ICLR)",
                         "2202.08791"),
    "gu2022s4": ("inproceedings", "Efficiently Modeling Long Sequences with Structured State Spaces",
                 "Gu, Albert and others", 2022, "booktitle",
                 "International Conference on Learning Representations (ICLR)", "2111.00396"),
    "gu2022s4d": ("inproceedings", "On the Parameterization and Initialization of Diagonal State "
                  "Space Models", "Gu, Albert and others", 2022, "booktitle",
                  "Advances in Neural Information Processing Systems (NeurIPS)", "2206.11893"),
    "smith2023s5": ("inproceedings", "Simplified State Space Layers for Sequence Modeling",
                    "Smith, Jimmy T. H. and others", 2023, "booktitle",
                    "International Conference on Learning Representations (ICLR)", "2208.04933"),
    "orvieto2023lru": ("inproceedings", "Resurrecting Recurrent Neural Networks for Long Sequences",
                       "Orvieto, Antonio and others", 2023, "booktitle",
                       "International Conference on Machine Learning (ICML)", "2303.06349"),
    "ma2023mega": ("inproceedings", "Mega: Moving Average Equipped Gated Attention",
                   "Ma, Xuezhe and others", 2023, "booktitle",
                   "International Conference on Learning Representations (ICLR)", "2209.10655"),
    "ma2024megalodon": ("misc", "Megalodon: Efficient LLM Pretraining and Inference with Unlimited "
                        "Context Length", "Ma, Xuezhe and others", 2024, "howpublished",
                        "arXiv:2404.08801", "2404.08801"),
    "qin2023hgrn": ("inproceedings", "Hierarchically Gated Recurrent Neural Network for Sequence "
                    "Modeling", "Qin, Zhen and others", 2023, "booktitle",
                    "Advances in Neural Information Processing Systems (NeurIPS)", "2311.04823"),
    "qin2024hgrn2": ("inproceedings", "HGRN2: Gated Linear RNNs with State Expansion",
                     "Qin, Zhen and others", 2024, "booktitle",
                     "Conference on Language Modeling (COLM)", "2404.07904"),
    "gu2023mamba": ("misc", "Mamba: Linear-Time Sequence Modeling with Selective State Spaces",
                    "Gu, Albert and Dao, Tri", 2023, "howpublished", "arXiv:2312.00752",
                    "2312.00752"),
}

# Each published source (``published.SOURCES``, ``MODERN_PUBLISHED``) and the works it cites.
SOURCE_KEYS = {
    "LRA Table 1 (Tay et al., ICLR 2021)": ("tay2021lra",),
    "cosFormer paper (Qin et al., ICLR 2022), LRA protocol": ("qin2022cosformer",),
    "S4 v2 (Gu et al., ICLR 2022, updated version)": ("gu2022s4",),
    "S4D (Gu et al., NeurIPS 2022), via secondary tables; LRU paper agrees": ("gu2022s4d",),
    "S4D (Gu et al., NeurIPS 2022), S4D-Inv row, via secondary tables": ("gu2022s4d",),
    "S5 (Smith et al., ICLR 2023), via secondary tables; LRU paper agrees": ("smith2023s5",),
    "LRU (Orvieto et al., ICML 2023) Table 3; Image = colour sCIFAR": ("orvieto2023lru",),
    "Mega (Ma et al., ICLR 2023) Table 2, mean of 5 seeds": ("ma2023mega",),
    "Mega (Ma et al., ICLR 2023) Table 2": ("ma2023mega",),
    "Megalodon (Ma et al., 2024, arXiv 2404.08801) Table 6": ("ma2024megalodon",),
    "HGRN2 (Qin et al., COLM 2024, arXiv 2404.07904), OpenNLPLab/HGRN2@b154c39 figures/lra.png":
        ("qin2024hgrn2",),
    "HGRN (Qin et al., NeurIPS 2023), as tabled in OpenNLPLab/HGRN2@b154c39 figures/lra.png":
        ("qin2023hgrn", "qin2024hgrn2"),
    "Mamba (Gu and Dao, arXiv 2312.00752) as tabled with a dagger, not explained in the figure "
    "(the re-run of HGRN2's authors), OpenNLPLab/HGRN2@b154c39 figures/lra.png":
        ("gu2023mamba", "qin2024hgrn2"),
}
LRA_KEY = "tay2021lra"  # the protocol every LRA-protocol caption names


def every_source() -> list[str]:
    return ([source for source, _ in published.SOURCES]
            + [source for _, _, source in published.MODERN_PUBLISHED.values()])


def keys(source: str) -> tuple[str, ...]:
    """The BibTeX keys of a published source (a source without any: none)."""
    return SOURCE_KEYS.get(source, ())


def cite(source: str) -> str:
    """``~\\cite{a,b}`` for a source, "" for one without a key."""
    found = keys(source)
    return f"~\\cite{{{','.join(found)}}}" if found else ""


def to_bib(cited: list[str]) -> str:
    """The entries of the ``cited`` keys (each once, in the order of ``ENTRIES``)."""
    out = ["% Generated by `python -m lra.leaderboard`: the works the LaTeX tables cite; do not edit.",
           ""]
    for key, (kind, title, authors, year, field, venue, arxiv) in ENTRIES.items():
        if key not in cited:
            continue
        out += [f"@{kind}{{{key},", f"  title = {{{{{title}}}}},", f"  author = {{{authors}}},",
                f"  year = {{{year}}},", f"  {field} = {{{venue}}},",
                f"  url = {{https://arxiv.org/abs/{arxiv}}},", "}", ""]
    return "\n".join(out)
