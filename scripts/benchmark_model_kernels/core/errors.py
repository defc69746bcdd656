"""The one error type a user ever sees from this tool: a bad input, reported on one line.

CLIs run their work through `cli_main`, which turns a `UsageError` into one `error: <message>`
line on stderr and exit code 2 (no traceback); so are a stdout whose reader went away (`| head`)
and a stop signal that reaches it, as 128 + the signal.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import sys
from typing import Any, Callable, NoReturn

from .version import __version__

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input: names the field, the value and the fix.

    >>> str(UsageError("--tp", 3, "must divide num_attention_heads=32; use 1, 2, 4, 8, 16 or 32"))
    "--tp=3: must divide num_attention_heads=32; use 1, 2, 4, 8, 16 or 32"
    """

    def __init__(self, field: str, value: object, fix: str):
        self.field, self.value, self.fix = field, value, one_line(fix)
        super().__init__(one_line(f"{field}={value}: {fix}"))


def one_line(text: str) -> str:
    """`text` with every line break (and the blanks around it) made one space: a message quoting
    another tool's error (transformers, sbatch) stays the one line of an error."""
    return re.sub(r"[ \t]*[\r\n]+[ \t]*", " ", text).strip()


def cli_main(run: Callable[[], int]) -> int:
    """`run()`'s exit code; a UsageError it raises becomes one `error: <message>` line on stderr
    and EXIT_USAGE, and so does a stdout whose reader closed it early (`check_env.py --json |
    head`: the rest of the output is dropped). A KeyboardInterrupt that reaches it (Ctrl-C, or a
    stop signal raised as one, before a run's own handling takes over) is one `interrupted by
    <SIGNAL>` line and 128 + the signal. Any other exception propagates (a bug must show its
    traceback)."""
    try:
        code = run()
        sys.stdout.flush()  # a closed pipe is found here, not in the interpreter's exit
        return code
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        _drop_stdout()
        print("error: stdout=(closed): its reader went away before the output ended (e.g. | head); "
              "the rest was not printed", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        print(f"interrupted by {signal.Signals(signum).name}; files written before it are kept",
              file=sys.stderr, flush=True)
        return 128 + signum


def _stdout_closed() -> bool:
    """Whether stdout is a pipe (or socket) whose reading end is gone."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # not a file descriptor (a test's capture)
        return False


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's own flush at exit finds no closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _example_for(parser: argparse.ArgumentParser, flag: str) -> str:
    """The first "e.g. ..." of FLAG's help text, so a parse error shows a value that works."""
    for action in parser._actions:  # noqa: SLF001  (argparse has no public lookup)
        if flag in action.option_strings or flag == action.metavar or flag == action.dest:
            found = re.search(r"e\.g\. ([^;:,()]+)", action.help or "")
            return f", e.g. {found.group(1).strip()}" if found else ""
    return ""


def usage_error_from_argparse(parser: argparse.ArgumentParser, message: str) -> UsageError:
    """argparse's own messages ("argument --tp: invalid int value: 'x'") as a UsageError that names
    the field, the value and the fix, so every CLI reports bad input the same one-line way."""
    prog = parser.prog
    see = f"see {prog} --help"
    m = re.match(r"argument (\S+?)(?:/\S+)?: invalid (\w+) value: '(.*)'$", message)
    if m:
        flag, kind, value = m.groups()
        want = {"int": "a whole number", "float": "a number"}.get(kind, f"a valid {kind}")
        return UsageError(flag, value, f"must be {want}{_example_for(parser, flag)}; {see}")
    m = re.match(r"argument (\S+?)(?:/\S+)?: invalid choice: '(.*)' \(choose from (.*)\)$", message)
    if m:
        flag, value, choices = m.groups()
        return UsageError(flag, value, f"choose from {choices.replace(chr(39), '')}")
    m = re.match(r"unrecognized arguments: (\S+)", message)
    if m:
        arg = m.group(1)
        flag, _, value = arg.partition("=")
        longer = [o for a in parser._actions for o in a.option_strings  # noqa: SLF001
                  if flag.startswith("--") and o.startswith(flag)]
        hint = f"did you mean {' or '.join(longer)}? (flags are never abbreviated); " if longer else ""
        return UsageError(flag, value or "(given)",
                          f"unrecognized: {prog} has no such flag or argument; {hint}{see}")
    m = re.match(r"the following arguments are required: (.*)$", message)
    if m:
        return UsageError(m.group(1).split(",")[0].strip(), "(missing)", f"is required; {see}")
    m = re.match(r"argument (\S+?)(?:/\S+)?: (expected .*)$", message)
    if m:
        flag = m.group(1)
        return UsageError(flag, "(missing)", f"{m.group(2)}{_example_for(parser, flag)}")
    m = re.match(r"argument (\S+?)(?:/\S+)?: (.*)$", message)
    if m:
        return UsageError(m.group(1), "(given)", f"{m.group(2)}; {see}")
    return UsageError("arguments", "(given)", f"{message}; {see}")


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose parse errors raise UsageError (one `error:` line, exit 2, printed by
    the CLI's main) instead of printing the usage block; --help is unchanged. Every script built on
    it answers --version with the tool's version, and takes the kebab-case twin of every flag
    (`--no-attention` for `--no_attention`; `core/flag_spelling.py`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action="version", version=f"%(prog)s (benchmark-model-kernels) {__version__}",
                          help="print the tool's version and exit, e.g. --version")

    def error(self, message: str) -> NoReturn:
        raise usage_error_from_argparse(self, message)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """argparse's, after `flag_spelling.respell`: a kebab-case twin of a flag (`--kv-lens`,
        as vLLM spells its flags) is the flag; a vLLM flag named otherwise here is one line."""
        from .flag_spelling import respell  # it raises UsageError, defined in this module

        argv = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(respell(argv, self._option_string_actions, self.prog), namespace)


def shown_value(value: object, limit: int = 48) -> str:
    """A value as JSON writes it (strings quoted, null, true), cut to `limit` characters: how a
    config, plan or results value appears in an error line."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
