"""Command line of td-core: ``tensordict inspect PATH`` (also ``python -m tensordict inspect PATH``).

Exit status: ``0`` the store is complete, ``1`` it is incomplete or damaged, ``2`` the
path is not a stored TensorDict (or cannot be inspected here, e.g. HDF5 without h5py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tensordict._inspect import inspect_store, render
from tensordict._version import __version__

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tensordict",
        description="Tools for stored TensorDicts (td-core).",
    )
    parser.add_argument("--version", action="version", version=f"td-core {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    inspect = sub.add_parser(
        "inspect",
        help="print the key tree of a stored TensorDict without loading its data",
        description=(
            "Prints the key tree of a stored TensorDict, reading only metadata: a td-memmap folder, "
            "an HDF5 file (needs h5py) or a consolidated file. Shows keys, shapes, dtypes, batch sizes, "
            "bytes on disk, non-tensor values (shortened) and whether the store is complete. "
            "Exit status: 0 complete, 1 incomplete or damaged, 2 not a store."
        ),
    )
    inspect.add_argument("path", help="td-memmap folder, HDF5 file or consolidated file")
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.add_argument("--depth", type=int, default=None, help="levels of nesting to show (default: all)")
    inspect.add_argument("--ascii", action="store_true", help="draw the tree with ASCII characters only")
    return parser


def _can_encode(text: str) -> bool:
    try:
        text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status.

    Args:
        argv (list of str, optional): arguments without the program name (default: ``sys.argv[1:]``).

    Returns:
        int: ``0`` complete store, ``1`` incomplete or damaged store, ``2`` not a store / usage error.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command != "inspect":
        parser.print_help(sys.stderr)
        return 2

    try:
        report = inspect_store(args.path)
    except (FileNotFoundError, ValueError, ImportError, RecursionError, PermissionError) as err:
        print(f"tensordict inspect: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        text = json.dumps(report.to_dict(), indent=2)
    else:
        text = render(report, max_depth=args.depth, ascii_only=args.ascii or not _can_encode("├│└"))
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `tensordict inspect PATH | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0 if report.complete else 1


if __name__ == "__main__":
    sys.exit(main())
