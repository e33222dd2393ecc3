"""Tools people run to check the Space itself, each `python -m bench.tools.NAME` (`--help` for options).

- `served`: what serving costs a race, each lane served through the page against the same run alone;
- `workshop`: a workshop arriving at the page, how long each visitor waits and how each race ends;
- `soak`: clients racing through the queue for minutes, nothing lost, memory bounded;
- `examples`: the page's examples raced as the page races them;
- `image`: the Docker image built and run as a Space runs it, its size and start-up;
- `screenshot`: the README's picture, from the real page;
- `first_start`: a new user's first start from an empty models folder, its seconds and memory;
- `cpu_check`: what the open issues still need measured on a CPU class not run on yet, in one command;
- `cpu_class`: a command run with OpenVINO seeing a smaller CPU class than this one (emulated AVX2).

`served_app` is what they share: the app started on a free port, its page's settings, a race asked for as a click asks;
`interval`, a median's bootstrap interval. Here, what every tool's entry point shares: `Parser`
(`python -m bench`'s and the studies' too), `output_file` (refused at once if it cannot be written) and `run_tool`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, NoReturn


class Parser(argparse.ArgumentParser):
    """argparse that says what is wrong in one line (exit 2), without the usage dump. Give it
    `prog=f"python -m {__spec__.name}"`: the command a user types, not the file's name."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def output_file(value: str) -> Path:
    """argparse type for a file a tool writes once its work is done: its folder must exist and be
    writable now, or the work is lost to a traceback at the end."""
    path = Path(value).expanduser()
    folder = path.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{value}: no folder {folder} to write it in")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"{value}: this user cannot write there")
    return path


def run_tool(main: Callable[[], int]) -> NoReturn:
    """A tool's entry point: its exit code. Ctrl-C, and a file or command it cannot use, are one line
    each; a tool that started processes stops them in its own `finally`."""
    try:
        code = main()
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        code = 130
    except OSError as error:
        print(f"error: {error.strerror or error}{': ' + str(error.filename) if error.filename else ''}", file=sys.stderr)
        code = 1
    sys.exit(code)
