"""Floor 1, env: probes of the machine, nothing timed.

`versions` reads installed distributions and the FlashInfer checkout (its release, its driver);
`gpu` reads the GPU through NVML, torch and the CUDA toolchain. The environment record and the
doctor that use them are in `doctor/`.
"""
