"""Hyperparameters per task: ``configs/<task>.py`` defines BASE (the paper protocol), PRESETS and
per-family ATTENTION deltas. lra.config resolves them; see its docstring for the order."""
