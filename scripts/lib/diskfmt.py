"""Markdown for what the machine did beside a `signet bench load` run, shared by the bench-*
scripts: the disk probe (the disk's own fdatasync beside the run, and the run's worst per-second
p99 in the seconds when the disk did not stall), and the hypervisor's CPU steal."""


def disk_note(result):
    """A sentence to append to a table cell; empty without a probe."""
    d = result.get("disk")
    if not d:
        return ""
    q = (f"; in the {d['quiet_seconds']} seconds without an fdatasync ≥ 20 ms, the worst per-second p99 was "
         f"{d['quiet_worst_p99_ms']:.1f} ms") if d.get("quiet_worst_p99_ms") is not None else ""
    return f". Disk fdatasync in the same run: p99 {d['p99_ms']:.1f} ms, max {d['max_ms']:.0f} ms{q}"


def disk_cells(result):
    """Two table cells: `fdatasync p99 / max` and `p99 in disk-quiet seconds`."""
    d = result.get("disk") or {}
    quiet = d.get("quiet_worst_p99_ms")
    quiet_cell = "–" if quiet is None else f"{quiet:.0f} ms ({d['quiet_seconds']} s)"
    return f"{d.get('p99_ms', 0):.1f} / {d.get('max_ms', 0):.0f} ms | {quiet_cell}"


def steal_note(cpu_file):
    """`; host CPU steal N %` from two /proc/stat `cpu` lines (before, after); empty if unreadable.

    Steal is the time the hypervisor ran something else while this VM's vCPUs wanted to run:
    capacity the measured run did not get, which no change in signet could win back."""
    try:
        before, after = (list(map(int, line.split()[1:9])) for line in open(cpu_file).read().splitlines()[:2])
    except (OSError, ValueError):
        return ""
    d = [b - a for a, b in zip(before, after)]
    total = sum(d)
    return f"; host CPU steal {100 * d[7] / total:.0f} %" if total else ""
