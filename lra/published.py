"""Published accuracies, kept apart from measured results (never mixed into a ranking).

Numbers are test accuracy in percent. Sources: LRA Table 1 (Tay et al., ICLR 2021; all Path-X FAIL)
and the cosFormer paper (Qin et al., ICLR 2022) under the LRA protocol.
"""

TASKS = ("listops", "text", "retrieval", "image", "pathfinder", "pathx")

FAIL = "FAIL"

LRA_TABLE1 = {
    "softmax": (36.37, 64.27, 57.46, 42.44, 71.40, FAIL),
    "local": (15.82, 52.98, 53.39, 41.46, 66.63, FAIL),
    "sparse": (17.07, 63.58, 59.59, 44.24, 71.71, FAIL),
    "longformer": (35.63, 62.85, 56.89, 42.22, 69.71, FAIL),
    "linformer": (35.70, 53.94, 52.27, 38.56, 76.34, FAIL),
    "reformer": (37.27, 56.10, 53.40, 38.07, 68.50, FAIL),
    "sinkhorn": (33.67, 61.20, 53.83, 41.23, 67.45, FAIL),
    "synthesizer": (36.99, 61.68, 54.67, 41.61, 69.45, FAIL),
    "bigbird": (36.05, 64.02, 59.29, 40.83, 74.87, FAIL),
    "linear": (16.13, 65.90, 53.09, 42.34, 75.30, FAIL),
    "performer": (18.01, 65.40, 53.82, 42.77, 77.05, FAIL),
}

COSFORMER_PAPER = {"cosformer": (37.90, 63.41, 61.36, 43.17, 70.33, None)}

SOURCES = (
    ("LRA Table 1 (Tay et al., ICLR 2021)", LRA_TABLE1),
    ("cosFormer paper (Qin et al., ICLR 2022), LRA protocol", COSFORMER_PAPER),
)
