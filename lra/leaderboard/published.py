"""Published accuracies, kept apart from measured results (never mixed into a ranking).

Numbers are test accuracy in percent, exactly as printed. Sources: LRA Table 1 (Tay et al., ICLR 2021;
all Path-X FAIL) and the cosFormer paper (Qin et al., ICLR 2022) under the LRA protocol. Each row's
last value is the average the source printed (LRA: 5 tasks, Path-X left out); the leaderboard shows
its own recomputation from the cells in a separate, labelled column (the Sinkhorn row prints 51.39,
its cells give 51.48).
"""

TASKS = ("listops", "text", "retrieval", "image", "pathfinder", "pathx")

FAIL = "FAIL"

LRA_TABLE1 = {
    "softmax": (36.37, 64.27, 57.46, 42.44, 71.40, FAIL, 54.39),
    "local": (15.82, 52.98, 53.39, 41.46, 66.63, FAIL, 46.06),
    "sparse": (17.07, 63.58, 59.59, 44.24, 71.71, FAIL, 51.24),
    "longformer": (35.63, 62.85, 56.89, 42.22, 69.71, FAIL, 53.46),
    "linformer": (35.70, 53.94, 52.27, 38.56, 76.34, FAIL, 51.36),
    "reformer": (37.27, 56.10, 53.40, 38.07, 68.50, FAIL, 50.67),
    "sinkhorn": (33.67, 61.20, 53.83, 41.23, 67.45, FAIL, 51.39),
    "synthesizer": (36.99, 61.68, 54.67, 41.61, 69.45, FAIL, 52.88),
    "bigbird": (36.05, 64.02, 59.29, 40.83, 74.87, FAIL, 55.01),
    "linear": (16.13, 65.90, 53.09, 42.34, 75.30, FAIL, 50.55),
    "performer": (18.01, 65.40, 53.82, 42.77, 77.05, FAIL, 51.41),
}

COSFORMER_PAPER = {"cosformer": (37.90, 63.41, 61.36, 43.17, 70.33, None, 55.23)}

SOURCES = (
    ("LRA Table 1 (Tay et al., ICLR 2021)", LRA_TABLE1),
    ("cosFormer paper (Qin et al., ICLR 2022), LRA protocol", COSFORMER_PAPER),
)

# LRA Table 2 (efficiency): byte-level Text, batch 32, 4x4 TPU v3 chips, memory per device.
# {family: (steps/s at 1K, 2K, 3K, 4K), (memory GB at 1K, 2K, 3K, 4K)}. The Synthesizer's 3K speed
# is printed as 6.6, the Sinkhorn cell repeated (arXiv 2011.04006, Table 1); it is copied as printed.
TABLE2_LENGTHS = ("1K", "2K", "3K", "4K")
LRA_TABLE2 = {
    "softmax": ((8.1, 4.9, 2.3, 1.4), (0.85, 2.65, 5.51, 9.48)),
    "local": ((9.2, 8.4, 7.4, 7.4), (0.42, 0.76, 1.06, 1.37)),
    "linformer": ((9.3, 9.1, 8.5, 7.7), (0.37, 0.55, 0.99, 0.99)),
    "reformer": ((4.4, 2.2, 1.5, 1.1), (0.48, 0.99, 1.53, 2.28)),
    "sinkhorn": ((9.1, 7.9, 6.6, 5.3), (0.47, 0.83, 1.13, 1.48)),
    "synthesizer": ((8.7, 5.7, 6.6, 1.9), (0.65, 1.98, 4.09, 6.99)),
    "bigbird": ((7.4, 3.9, 2.7, 1.5), (0.77, 1.49, 2.18, 2.88)),
    "linear": ((9.1, 9.3, 8.6, 7.8), (0.37, 0.57, 0.80, 1.03)),
    "performer": ((9.5, 9.4, 8.7, 8.0), (0.37, 0.59, 0.82, 1.06)),
}

# The modern protocol (docs/families-and-protocols.md "Two protocols"): published rows of the state-space and
# gated-EMA models, each under its own recipe (bidirectional, BatchNorm, mean pooling, best-validation
# selection, budgets 10-100x LRA's). Never ranked with the LRA-protocol tables. Cells: ListOps, Text,
# Retrieval, Image, Pathfinder, Path-X; the last value is the 6-task average as printed (None: none printed).
# Sources: the papers named in each row (arXiv ids beside them).
MODERN_PUBLISHED = {
    # Gu et al., S4 v2 / S4-LegS (updated ICLR 2022 paper)
    "S4": ((59.60, 86.82, 90.90, 88.65, 94.20, 96.35), 86.09,
           "S4 v2 (Gu et al., ICLR 2022, updated version)"),
    # S4D-LegS: secondary tables; the LRU paper's rounded row agrees
    "S4D-LegS": ((60.47, 86.18, 89.46, 88.19, 93.06, 91.95), 84.89,
                 "S4D (Gu et al., NeurIPS 2022), via secondary tables; LRU paper agrees"),
    # S4D-Inv: the same table's row for the initialisation the suite's s4d recipe trains
    "S4D-Inv": ((60.18, 87.34, 91.09, 87.83, 93.78, 92.80), 85.50,
                "S4D (Gu et al., NeurIPS 2022), S4D-Inv row, via secondary tables"),
    "S5": ((62.15, 89.31, 91.40, 88.00, 95.33, 98.58), 87.46,
           "S5 (Smith et al., ICLR 2023), via secondary tables; LRU paper agrees"),
    # LRU Table 3 (mean of 3 seeds); its Image cell is colour sCIFAR, not LRA-Image
    "LRU": ((60.2, 89.4, 89.9, 89.0, 95.1, 94.2), None,
            "LRU (Orvieto et al., ICML 2023) Table 3; Image = colour sCIFAR"),
    "Mega": ((63.14, 90.43, 91.25, 90.44, 96.01, 97.98), 88.21,
             "Mega (Ma et al., ICLR 2023) Table 2, mean of 5 seeds"),
    "Mega-chunk": ((58.76, 90.19, 90.97, 85.80, 94.41, 93.81), 85.66,
                   "Mega (Ma et al., ICLR 2023) Table 2"),
    "Megalodon": ((63.79, 90.48, 91.76, 89.42, 98.13, 98.17), 88.63,
                  "Megalodon (Ma et al., 2024, arXiv 2404.08801) Table 6"),
    # The 2023-25 mixers (issue 26): none reported LRA in its own paper; these rows are HGRN2's LRA
    # table (OpenNLPLab/HGRN2@b154c39 figures/lra.png). HGRN1 and HGRN2 scan the pixel grid in 2-D
    # (four directions, hgrn*_2d) on Image, Pathfinder and Path-X; their text tasks are 1-D.
    "HGRN2 (2-D scans on Image/Pathfinder/Path-X)": (
        (60.52, 88.97, 95.07, 89.33, 93.95, 98.12), 87.66,
        "HGRN2 (Qin et al., COLM 2024, arXiv 2404.07904), OpenNLPLab/HGRN2@b154c39 figures/lra.png"),
    "HGRN1 (2-D scans on Image/Pathfinder/Path-X)": (
        (59.95, 88.14, 94.23, 88.69, 92.92, 97.50), 86.91,
        "HGRN (Qin et al., NeurIPS 2023), as tabled in OpenNLPLab/HGRN2@b154c39 figures/lra.png"),
    "Mamba (re-run by HGRN2's authors)": (
        (38.02, 82.98, 72.14, 69.82, 69.26, 67.32), 66.59,
        "Mamba (Gu and Dao, arXiv 2312.00752) as tabled with a dagger, not explained in the figure "
        "(the re-run of HGRN2's authors), OpenNLPLab/HGRN2@b154c39 figures/lra.png"),
}
