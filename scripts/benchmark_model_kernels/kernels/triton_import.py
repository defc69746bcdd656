"""Triton for the modules that define @triton.jit kernels, or a placeholder where it is missing.

`from .triton_import import triton, tl` binds the real `triton` and `triton.language` when Triton is
installed (vllm/triton_utils/__init__.py does the same). Without it, a kernel module still imports
(the CPU preview and tests): `triton.jit`, `triton.autotune` and `triton.heuristics` return a
placeholder kernel, `tl.constexpr` passes its value through, and launching a placeholder kernel or
reading anything else of either placeholder raises the error `import triton` raised.

Importing this module imports Triton where it is installed, so the modules that define kernels are
themselves imported at the point of use: importing the timing modules stays free of Triton.
"""

from __future__ import annotations

import types
from typing import Any, NoReturn

__all__ = ["HAS_TRITON", "triton", "tl"]


def _missing(error: ImportError) -> NoReturn:
    # A fresh exception of the same type and text each time (re-raising one object would grow
    # its traceback).
    raise type(error)(*error.args, name=error.name, path=error.path)


class TritonPlaceholderKernel:
    """What a Triton decorator returns without Triton: the function, not launchable."""

    def __init__(self, fn: Any, error: ImportError) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "kernel")
        self._error = error

    def __getitem__(self, grid: Any) -> NoReturn:
        _missing(self._error)

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        _missing(self._error)


class _Placeholder(types.ModuleType):
    """A module whose public attributes not set in `__init__` raise the import error."""

    def __init__(self, name: str, error: ImportError) -> None:
        super().__init__(name)
        self._error = error

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # probes such as hasattr(m, "__path__") see a plain module
            raise AttributeError(attr)
        _missing(self._error)


class TritonPlaceholder(_Placeholder):
    """`triton` where it is not installed: its decorators return a TritonPlaceholderKernel."""

    def __init__(self, error: ImportError) -> None:
        super().__init__("triton", error)
        self.jit = self._decorator
        self.autotune = self._decorator
        self.heuristics = self._decorator

    def _decorator(self, *args: Any, **kwargs: Any) -> Any:
        # Both forms: @triton.jit and @triton.jit(do_not_specialize=[...]).
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return TritonPlaceholderKernel(args[0], self._error)
        return lambda fn: TritonPlaceholderKernel(fn, self._error)


class TritonLanguagePlaceholder(_Placeholder):
    """`triton.language` where Triton is not installed."""

    def __init__(self, error: ImportError) -> None:
        super().__init__("triton.language", error)
        self.constexpr = lambda value: value


try:
    import triton
    import triton.language as tl
except ImportError as error:
    HAS_TRITON = False
    triton = TritonPlaceholder(error)  # type: ignore[assignment]
    tl = TritonLanguagePlaceholder(error)  # type: ignore[no-redef]
else:
    HAS_TRITON = True
