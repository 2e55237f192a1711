"""Table cells for the scripts that run signet beside a peer server, from `signet bench load
--json` results: what was answered and how fast, and the server's own CPU per operation."""


def answered(r):
    """`1,498/s, p50 8.7 ms, p99 14.9 ms`, with the errors if there were any."""
    errs = sum(r["errors"].values())
    lat = r["latency_ms"]
    return f"{r['achieved_rps']:,.0f}/s, p50 {lat['p50']:,.1f} ms, p99 {lat['p99']:,.1f} ms" + (f", {errs} errors" if errs else "")


def cpu_us(r):
    """The server's CPU per operation in µs (`--server-pid`), or None."""
    return (r.get("server_cpu") or {}).get("us_per_op")


def us(x):
    return f"{x:,.1f}" if x else "–"


def ratio(peer, signet):
    return f"{peer / signet:.1f}×" if peer and signet else "–"
