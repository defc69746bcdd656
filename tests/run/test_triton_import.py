"""kernels/triton_import.py without Triton: kernel modules import, and using a kernel raises the
error `import triton` raised (what the worker reports), never a confusing TypeError."""

from __future__ import annotations

import os
import subprocess
import sys

from support import ROOT

SCRIPTS = os.path.join(ROOT, "scripts")

WITHOUT_TRITON = (
    "import sys; sys.modules['triton'] = None; sys.modules['torch'] = None\n"
    f"sys.path.insert(0, {SCRIPTS!r})\n"
    "from benchmark_model_kernels.kernels import triton_import as ti\n"
)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_TRITON + code], capture_output=True, text=True,
                          timeout=60)


def test_kernel_modules_import_with_placeholders():
    out = _run("from benchmark_model_kernels.kernels import fp8_quant_kernels, triton_fp8_gemm_kernels\n"
               "from benchmark_model_kernels.kernels.triton_moe import kernels\n"
               "print(ti.HAS_TRITON, sorted(kernels.KERNELS), ti.tl.constexpr(3))\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == ("False ['act_quant', 'align_count', 'align_offsets', 'align_scatter', "
                                         "'align_single', 'gemm', 'moe_sum'] 3")


def test_launching_a_placeholder_kernel_raises_the_import_error():
    out = _run("@ti.triton.jit\n"
               "def plain(x): pass\n"
               "@ti.triton.jit(do_not_specialize=['x'])\n"
               "def configured(x): pass\n"
               "for use in (lambda: plain[(1,)](0), lambda: configured(0), lambda: ti.triton.cdiv(3, 2),\n"
               "            lambda: ti.tl.program_id(0)):\n"
               "    try:\n"
               "        use()\n"
               "    except ImportError as e:\n"
               "        print(type(e).__name__, e.name)\n"
               "print(hasattr(ti.triton, '__path__'), plain.__name__)\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["ModuleNotFoundError triton"] * 4 + ["False plain"]
