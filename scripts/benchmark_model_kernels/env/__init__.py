"""Floor 2, env: probes of the machine, nothing timed.

`versions` reads installed distributions (the cupti-python and vLLM's FlashInfer pin among them,
from package metadata) and the FlashInfer checkout (its release, its driver); `gpu` reads the GPU
through NVML, torch and the CUDA toolchain. The environment record and the doctor that use them
are in `doctor/`.
"""
