"""The machine a run happens on: `environment` records it (GPU, versions, timer) into results.json,
and `doctor` (scripts/check_env.py) checks it is ready before a run. Both read the run stage's
timer and settings; the runner receives `environment.collect` from the CLIs.
"""
