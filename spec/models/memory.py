"""Memory this process may still take: the machine's available memory, or less where a memory
cgroup (a container's `--memory`, a Space's limit) caps the process below what the machine has."""
from __future__ import annotations

from pathlib import Path

_CGROUPS = Path("/sys/fs/cgroup")
_OWN_CGROUPS = Path("/proc/self/cgroup")


def available_bytes() -> int:
    """What can still be allocated before the machine or this process's memory cgroup runs out."""
    import psutil

    machine = psutil.virtual_memory().available
    room = _cgroup_room()
    return machine if room is None else min(machine, room)


def _cgroup_room() -> int | None:
    """The cgroup's limit less what it holds (cgroup v2 or v1's memory controller); None without a limit."""
    try:
        lines = _OWN_CGROUPS.read_text().splitlines()
    except OSError:
        return None  # not Linux
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: limit and usage in the unified hierarchy
            root, files = _CGROUPS, ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):
            root, files = _CGROUPS / "memory", ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        # Inside a container the process's own cgroup is mounted as the root, under another name.
        for folder in (root / path.lstrip("/"), root):
            if (folder / files[0]).exists():
                return _room(folder, *files)
    return None


def _room(folder: Path, limit_file: str, usage_file: str, reclaimable: str) -> int | None:
    """The limit less the usage, files read long ago (`reclaimable` in memory.stat) not counted:
    the kernel drops those first, as `docker stats` leaves them out."""
    try:
        limit, usage = (folder / limit_file).read_text().strip(), (folder / usage_file).read_text().strip()
    except OSError:
        return None  # gone meanwhile, or not readable: no limit known
    if limit == "max" or int(limit) >= 1 << 60:  # no limit (v1 says so with a huge number)
        return None
    try:
        stats = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines() if line.count(" ") == 1)
    except OSError:
        stats = {}
    return max(0, int(limit) - int(usage) + int(stats.get(reclaimable, 0)))
