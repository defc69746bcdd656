"""Floor 7, doctor: the machine as a run records it and as the user checks it.

`environment` builds the environment record of results.json (GPU, versions, CUDA stack, which timer
really runs: `probe_timer`); `doctor` (scripts/check_env.py) says whether a machine is ready before
a run, with one fix per problem, from the verdicts of `checks` (the machine) and
`flashinfer_checks` (the FlashInfer wheel, checkout and prebuilt kernels). Reads the probes of
`env/` and the timer of `kernels/`.
"""
