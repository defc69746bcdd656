# Sourced by the preludes of the evidence recipes that time runs (from the project root, with
# WORK set): Python bytecode as a user's machine has it.
# A pip install writes bytecode at install time, so a user's processes load torch's,
# transformers' and FlashInfer's modules compiled. Where this machine writes none
# (PYTHONDONTWRITEBYTECODE, as container images set it; a py-spy sample of a warm Llama run's worker
# on the H200 spent 6.4 s in source_to_code, 2026-12-03) or its packages hold none and cannot be
# written, every process compiles their sources again: bytecode is written under the workdir
# ($WORK/pycache, which a recipe's clean step removes). Sets bytecode_env (what the machine had)
# and torch_dir (where it was looked at) for install_bytecode's first line.
bytecode_env="PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}"
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
  unset PYTHONDONTWRITEBYTECODE
  export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-$WORK/pycache}"
elif [ -z "${PYTHONPYCACHEPREFIX:-}" ]; then
  torch_dir=$(python3 -c "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('torch').origin))")
  if ! ls "$torch_dir"/__pycache__/*.pyc >/dev/null 2>&1 && [ ! -w "$torch_dir" ]; then
    export PYTHONPYCACHEPREFIX="$WORK/pycache"
  fi
fi
# install_bytecode: print what the machine had and where bytecode goes; when that is under the
# workdir, compile the standard library and the installed packages there first, as a Python install
# and pip install leave them (benchmarks/install_bytecode.py: the tool's own modules and every JIT
# cache are left cold). A recipe's clean step calls it after removing $WORK/pycache, before its
# cold runs.
install_bytecode() {
  echo "bytecode: machine had $bytecode_env; torch at ${torch_dir:-?}; PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-unset, the packages keep their own}"
  python3 benchmarks/install_bytecode.py
}
