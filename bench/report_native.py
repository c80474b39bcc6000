"""The native host's part of docs/benchmarks.md (bench/report.py calls it): the targets for Toolgate as
an Envoy dynamic module (docs/design/native-host.md), computed from the same run's callgrind counts and
start-up measurements (bench/startup.py), and the Wasm/native side by side."""

from __future__ import annotations

import statistics

# Each native row beside its Wasm counterpart (same policies, same request).
PAIRS = (("n", "nm"), ("c", "cm"), ("d", "dm"), ("g1", "gm"), ("l1", "lm"))
STARTUP_MAX_S = 0.1
RSS_MAX_MIB = 5.0


def _verdict(ok: bool | None, why_not: str = "", missing: str = "") -> str:
    if ok is None:
        return f"not judged: no callgrind count of {missing} in this run" if missing else "not judged (a row is missing from this run)"
    return "PASS" if ok else "**FAIL**" + (f": {why_not}" if why_not else "")


def _k(x: float) -> str:
    return f"{x / 1e3:+,.1f} k"


def _per_start(starts: dict, key: str, field: str) -> list[float] | None:
    """Per start, `key`'s field minus (a)'s (the starts are interleaved: the same moment's load)."""
    if key not in starts or "a" not in starts:
        return None
    return [s[field] - b[field] for s, b in zip(starts[key]["starts"], starts["a"]["starts"])]


def _timed_delta(summ: dict, key: str, base: str) -> str:
    """The timed Envoy CPU per 300 B request, key − base (median of per-round differences)."""
    s = summ.get("300B", {}).get(key) or {}
    v = s.get(f"vs_{base}") if base != "a" else {"cpu": s.get("d_cpu")}
    if not v or v.get("cpu") is None:
        return ""
    return f"{v['cpu']:+.1f} µs Envoy CPU"


def _list_floor(results: dict, limit: float | None) -> str:
    """Why (lm) − (cm) cannot come under `limit`, when reading the answer alone costs more: the
    engine's own pass (both hosts run it) and the fastest validating JSON readers on crates.io, both
    counted natively in this run (bench/counts.py `engine_list_pass`, `json_floor`)."""
    engine = (results.get("engine_list_pass") or {}).get("Ir")
    floor = results.get("json_floor") or {}
    readers = floor.get("Ir") or {}
    if limit is None or engine is None or not readers or min(engine, *readers.values()) <= limit:
        return ""
    best = min(readers, key=readers.get)
    others = ", ".join(f"{r} {v / 1e3:,.1f} k" for r, v in readers.items() if r != best)
    return (f"the limit is below what reading the answer costs: the engine's list pass alone, natively, is "
            f"{engine / 1e3:,.1f} k instructions ({results['engine_list_pass']['bench']} `count list_json`), and only "
            f"validating the same {floor['bytes']:,} B answer takes the fastest JSON reader on crates.io "
            f"{readers[best] / 1e3:,.1f} k ({best}, AVX2; {others}: {floor['bench']}), both counted in this run; "
            "both hosts run the pass, so no host glue brings (lm) − (cm) under ¼ of (l1) − (c)")


def targets(results: dict, summ: dict) -> list[tuple[str, str, str, str]]:
    """(target, timed measure, callgrind measure, verdict) rows for the native host."""
    cg = results.get("callgrind") or {}
    rows = []

    def ir(k, base):
        return cg[k]["Ir"] - cg[base]["Ir"] if k in cg and base in cg else None

    def missing(*ks):
        return ", ".join(f"({k})" for k in ks if k not in cg)

    floor, work = ir("nm", "a"), ir("cm", "nm")
    floor_text = (f"the no-op dynamic module (nm) adds {_k(floor)} over (a), and Toolgate's hooks with Envoy's buffering "
                  f"of the body {_k(work)} over (nm) (docs/design/native-host.md: where they go)") if floor is not None and work is not None else ""
    cm = ir("cm", "a")
    for other, what in (("m", "Envoy's MCP filter + RBAC (m)"), ("n", "the no-op proxy-wasm filter (n)")):
        o = ir(other, "a")
        ok = None if cm is None or o is None else cm < o
        rows.append((f"(cm) Toolgate native adds fewer instructions over (a) than {what}",
                     f"(cm) {_timed_delta(summ, 'cm', 'a')}, ({other}) {_timed_delta(summ, other, 'a')}",
                     "" if ok is None else f"(cm) − (a) {_k(cm)} vs ({other}) − (a) {_k(o)} instructions per request",
                     _verdict(ok, floor_text, missing("cm", "a", other))))
    g, g2 = ir("gm", "cm"), ir("g2", "a")
    ok = None if g is None or g2 is None else g <= g2
    rows.append(("(gm) − (cm) ≤ (g2) − (a): Toolgate native's ExternalAuth gRPC callout costs no more than Envoy's ext_authz",
                 f"(gm) − (cm) {_timed_delta(summ, 'gm', 'cm') or '–'}; (g2) − (a) {_timed_delta(summ, 'g2', 'a') or '–'}",
                 "" if ok is None else f"(gm) − (cm) {_k(g)} vs (g2) − (a) {_k(g2)} instructions",
                 _verdict(ok, missing=missing("gm", "cm", "g2", "a"))))
    lm, l1 = ir("lm", "cm"), ir("l1", "c")
    ok = None if lm is None or l1 is None else lm <= l1 / 4
    small = summ.get("300B") or {}
    dc = {k: (small.get(k) or {}).get("d_cpu") for k in ("lm", "cm", "l1", "c")}
    timed = ""
    if None not in dc.values():
        timed = (f"(lm) − (cm) {dc['lm'] - dc['cm']:+.1f} µs vs ¼ × ((l1) − (c)) {(dc['l1'] - dc['c']) / 4:+.1f} µs "
                 "Envoy CPU (differences of the medians)")
    list_floor = _list_floor(results, None if l1 is None else l1 / 4)
    rows.append(("(lm) − (cm) ≤ ¼ of (l1) − (c): what a filtered 100-tool tools/list adds to a call, native against Wasm",
                 timed, "" if ok is None else f"(lm) − (cm) {_k(lm)} vs ¼ × ({_k(l1)}) = {_k(l1 / 4)} instructions",
                 _verdict(ok, list_floor, missing=missing("lm", "cm", "l1", "c"))))
    starts = results.get("startup") or {}
    for field, label in (("ready_s", "ready (/ready LIVE, listener open)"), ("first_s", "first call answered")):
        d = _per_start(starts, "cm", field)
        if d is None:
            continue
        med = statistics.median(d)
        dn = _per_start(starts, "nm", field)
        rows.append((f"Envoy with (cm) {label} within {STARTUP_MAX_S:.1f} s of bare Envoy (median of the per-start "
                     f"differences, {len(d)} interleaved starts)",
                     f"(cm) − (a) {med * 1e3:+.0f} ms (starts: {', '.join(f'{x * 1e3:+.0f}' for x in d)})"
                     + (f"; (nm) − (a) {statistics.median(dn) * 1e3:+.0f} ms" if dn else "")
                     + (f"; (c) − (a) {statistics.median(_per_start(starts, 'c', field)) * 1e3:+.0f} ms" if "c" in starts else ""),
                     "", _verdict(med <= STARTUP_MAX_S)))
    d = _per_start(starts, "cm", "rss_first_kib")
    timed = (summ.get("300B") or {}).get("cm") or {}
    timed_a = (summ.get("300B") or {}).get("a") or {}
    if d is not None or (timed and timed_a):
        parts, oks = [], []
        if d is not None:
            med = statistics.median(d) / 1024
            parts.append(f"after start-up and the first call: (cm) − (a) {med:+.1f} MiB (starts: "
                         f"{', '.join(f'{x / 1024:+.1f}' for x in d)})")
            oks.append(med <= RSS_MAX_MIB)
        if timed and timed_a:
            t = timed["rss"] - timed_a["rss"]
            parts.append(f"after the timed 300 B runs: {timed['rss']:.1f} vs {timed_a['rss']:.1f} MiB, {t:+.1f} MiB")
            oks.append(t <= RSS_MAX_MIB)
        rows.append((f"RSS with (cm) at most {RSS_MAX_MIB:.0f} MiB above bare Envoy (verdict on every measure shown)",
                     "; ".join(parts), "", _verdict(all(oks))))
    return rows


def section(results: dict, summ: dict) -> list[str]:
    """Markdown lines: start-up and memory of (a), (c), (cm), (nm), and the Wasm/native pairs."""
    cg = results.get("callgrind") or {}
    small = summ.get("300B") or {}
    starts = results.get("startup") or {}
    pairs = [(w, n) for w, n in PAIRS if n in results["configs"]]
    if not pairs and not starts:
        return []
    L = ["## The two hosts: proxy-wasm (V8) and the dynamic module\n"]
    if pairs:
        L.append("Each native row beside its Wasm counterpart: what it adds over bare Envoy (a) per 300 B request "
                 "((l1)/(lm): per tools/list), callgrind instructions and the timed Envoy CPU (median of per-round "
                 "differences).\n")
        L.append("| Wasm | k instr. Δ vs (a) | Envoy CPU µs Δ vs (a) | native | k instr. Δ vs (a) | Envoy CPU µs Δ vs (a) | native ÷ Wasm (instr. Δ) |")
        L.append("|---|--:|--:|---|--:|--:|--:|")
        for w, n in pairs:
            def d(k):
                return (cg[k]["Ir"] - cg["a"]["Ir"]) / 1e3 if k in cg and "a" in cg else None

            def t(k):
                return (small.get(k) or {}).get("d_cpu")
            dw, dn = d(w), d(n)
            ratio = f"{dn / dw:.2f}" if dw and dn is not None and dw > 0 else "–"
            L.append(f"| ({w}) {results['configs'].get(w, ('not in this run',))[0]} | {_f(dw, '+,.1f')} | {_f(t(w), '+.1f')} | "
                     f"({n}) {results['configs'][n][0]} | {_f(dn, '+,.1f')} | {_f(t(n), '+.1f')} | {ratio} |")
        L.append("")
    if starts:
        n = len(next(iter(starts.values()))["starts"])
        L.append("### Start-up and memory\n")
        L.append(f"bench/startup.py: each of {', '.join(f'({k})' for k in starts)} started {n} times, interleaved, with "
                 "its timed rows' configuration (one worker, pinned to CPU 0). Time from spawning the process to "
                 "*ready* (admin /ready LIVE and the listener accepting; polled every 5 ms) and to the *first call "
                 "answered* (agent-a's 300 B tools/call, 200, on a fresh HTTPS connection); RSS (VmRSS) at both. "
                 "Medians over the starts; Δ: median of the per-start differences to (a), started just before. "
                 "Start-up times depend on the machine's load (a shared VM here: see the spread per start).\n")
        L.append("| | ready ms | Δ vs (a) | first call ms | Δ vs (a) | RSS at ready MiB | RSS after first call MiB | Δ vs (a) | ready, each start (ms) |")
        L.append("|---|--:|--:|--:|--:|--:|--:|--:|---|")
        for k, v in starts.items():
            def dd(field, scale):
                x = _per_start(starts, k, field)
                return "" if k == "a" or x is None else f"{statistics.median(x) * scale:+,.1f}"
            each = ", ".join(f"{s['ready_s'] * 1e3:.0f}" for s in v["starts"])
            L.append(f"| ({k}) {results['configs'][k][0]} | {v['ready_s'] * 1e3:,.0f} | {dd('ready_s', 1e3)} | "
                     f"{v['first_s'] * 1e3:,.0f} | {dd('first_s', 1e3)} | {v['rss_ready_mib']:,.1f} | {v['rss_first_mib']:,.1f} | "
                     f"{dd('rss_first_kib', 1 / 1024)} | {each} |")
        L.append("")
    sizes = results.get("sizes") or {}
    if sizes.get("module_toolgate"):
        L.append(f"libtoolgate_module.so (`make module`): {sizes['module_toolgate']:,} bytes"
                 + (f"; the no-op dynamic module: {sizes['module_noop']:,} bytes" if sizes.get("module_noop") else "")
                 + f"; toolgate_filter.wasm: {sizes.get('wasm_toolgate', 0):,} bytes.\n")
    return L


def _f(x, spec):
    return "–" if x is None else format(x, spec)
