"""Kernels that calibration times: projection GEMMs, paged-attention decode, prefill
attention and all-reduce. Needs torch (the `calibrate` extra); Triton is optional.

Importing this package imports nothing heavy; the submodules import torch.
"""
