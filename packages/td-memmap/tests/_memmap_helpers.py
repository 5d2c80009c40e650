"""Helpers shared by the td-memmap tests (imported by path: tests have no package)."""

import os


def rss_kib() -> int:
    """Resident set size of this process, from /proc/self/status (KiB)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def allocated_bytes(path) -> int:
    """Disk blocks actually allocated for a file (sparse files allocate none)."""
    return os.stat(path).st_blocks * 512


def tree_files(root) -> list:
    """Every path under ``root`` (files and folders), relative, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)
