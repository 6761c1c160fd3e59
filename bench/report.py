"""The benchmark report: each figure against its target, as a table and as JSON rows.

Why a module of its own: the targets (docs/performance.md) live here, apart from the code
that measures; a section's figures can change without touching how they are judged.
"""

from __future__ import annotations

from typing import Any

Row = tuple[str, str, str, bool]  # measure, result, target, ok


def verdicts(r: dict[str, Any]) -> list[Row]:
    """Each figure of the run ``r`` against its target, section by section (a section the
    run left out gives no rows); the latency ratios to the floor are added to ``r``."""
    rows: list[Row] = []
    fl = r.get("floor")
    if lat := r.get("latency"):
        rows += _latency_rows(lat, fl)
    if tp := r.get("throughput"):
        rows += _throughput_rows(tp)
    if link := r.get("link"):
        rows += _link_rows(link, fl)
    if ha := r.get("link_ha"):
        rows += _ha_rows(ha)
    if sign := r.get("websign"):
        rows += _websign_rows(sign)
    if mem := r.get("memory"):
        rows += _memory_rows(mem)
    rows += _startup_rows(r.get("startup"))
    return rows


def _latency_rows(lat: dict[str, Any], fl: dict[str, Any] | None) -> list[Row]:
    """Key-to-sign and LOCK-to-meter, alone and against the floor."""
    rows: list[Row] = []
    p99 = lat["key_to_sign"]["p99_ms"]
    rows.append(("key-to-sign p99", f"{p99:.1f} ms", "<= 4 ms", p99 <= 4))
    for d, m in lat.get("lock_to_meter_by_delay_s", {}).items():
        rows.append((f"LOCK {d} s after bets: meter p99", f"{m['p99_ms']:.1f} ms",
                     "<= 4 ms", m["p99_ms"] <= 4))
    rows.append(("meter repeats", str(lat.get("meter_repeats", 0)), "0",
                 lat.get("meter_repeats", 0) == 0))
    lost = len(lat.get("presses_without_message", []))
    rows.append(("presses without a message", str(lost), "0", lost == 0))
    if fl:
        ratio = p99 / fl["floor"]["p99_ms"]
        lat["ratio_p99_to_floor_p99"] = round(ratio, 2)
        lat["ratio_p50_to_floor_p50"] = round(
            lat["key_to_sign"]["p50_ms"] / fl["floor"]["p50_ms"], 2
        )
        rows.append(("key-to-sign p99 / floor p99", f"{ratio:.2f}x", "<= 4x", ratio <= 4))
        meter_ratio = lat["lock_to_meter"]["p99_ms"] / fl["floor"]["p99_ms"]
        lat["meter_ratio_p99_to_floor_p99"] = round(meter_ratio, 2)
        lat["meter_ratio_p50_to_floor_p50"] = round(
            lat["lock_to_meter"]["p50_ms"] / fl["floor"]["p50_ms"], 2
        )
        rows.append(("LOCK-to-meter p99 / floor p99", f"{meter_ratio:.2f}x", "<= 4x",
                     meter_ratio <= 4))
    return rows


def _throughput_rows(tp: dict[str, Any]) -> list[Row]:
    """Durable contributions per second, the ledger against bare SQLite."""
    rows: list[Row] = []
    rows.append(("durable contributions/s", f"{tp['ledger_per_s']:,}", ">= 20,000",
                 tp["ledger_per_s"] >= 20_000))
    rows.append(("ledger (append_many) / bare sqlite", f"{tp['append_ratio']:.2f}x", "<= 2x",
                 tp["append_ratio"] <= 2))
    return rows


def _link_rows(link: dict[str, Any], fl: dict[str, Any] | None) -> list[Row]:
    """The link controller: wagers per second, claim to sign, memory, its ledger."""
    rows: list[Row] = []
    tput = link["throughput"]["wagers_per_s"]
    rows.append(("link: wagers/s durable + acked (50 tables)", f"{tput:,}", ">= 20,000",
                 tput >= 20_000))
    c99 = link["claim_to_sign"]["p99_ms"]
    rows.append(("link: claim -> every sign p99", f"{c99:.1f} ms", "<= 50 ms", c99 <= 50))
    if fl:
        link["claim_ratio_p99_to_floor_p99"] = round(c99 / fl["floor"]["p99_ms"], 2)
    rss = link["link_rss_max_mib"]
    rows.append(("link controller RSS (max)", f"{rss:.1f} MiB", "<= 80 MB", rss <= 80))
    ratio = link["ledger"]["ratio"]
    rows.append(("link ledger / bare sqlite", f"{ratio:.2f}x", "<= 2x", ratio <= 2))
    return rows


def _ha_rows(ha: dict[str, Any]) -> list[Row]:
    """The HA link on PostgreSQL."""
    rows: list[Row] = []
    tput = ha["wagers_per_s"]
    rows.append((f"HA link: wagers/s durable + acked ({ha['tables']} tables)", f"{tput:,}",
                 ">= 10,000", tput >= 10_000))  # fmt: skip
    ratio = ha["ledger_cost_ratio"]
    rows.append(("HA link: ledger write / bare psycopg", f"{ratio:.2f}x", "<= 2x",
                 ratio <= 2))  # fmt: skip
    c99 = ha["claim_to_every_sign_ms"]["p99"]
    rows.append(("HA link: claim -> every sign p99", f"{c99:.1f} ms", "<= 50 ms", c99 <= 50))
    for holder, rss in ha["controller_rss_mb"].items():
        rows.append((f"HA link: {holder} RSS (max)", f"{rss:.1f} MB", "<= 80 MB", rss <= 80))
    return rows


def _websign_rows(sign: dict[str, Any]) -> list[Row]:
    """The web sign: message to painted frame, its server's memory."""
    rows: list[Row] = []
    frame = sign["pixels"]["frame"]["p99_ms"]
    rows.append(("web sign: message -> painted frame p99", f"{frame:.1f} ms", "<= 100 ms",
                 frame <= 100))
    rss, pages = sign["memory"]["rss_pages_mb"], sign["memory"]["pages"]
    rows.append((f"web sign server RSS, {pages} pages", f"{rss:.1f} MB", "<= 60 MB",
                 rss <= 60))
    return rows


def _memory_rows(mem: dict[str, Any]) -> list[Row]:
    """The daemon's memory after rounds."""
    rows: list[Row] = []
    rows.append(("RSS after rounds (loop)", f"{mem['rss_mb_after_rounds']:.1f} MB", "<= 60 MB",
                 mem["rss_mb_after_rounds"] <= 60))
    flat = mem["growth_mb_after_first_sample"]
    rows.append(("RSS growth after first sample", f"{flat:.1f} MB", "flat (<= 2 MB)",
                 flat <= 2))
    return rows


def _startup_rows(st: dict[str, Any] | None) -> list[Row]:
    """Start-up, ledger verify and idle CPU (verify and idle are measured with start-up)."""
    rows: list[Row] = []
    if st:
        ready = st["ready_s"].get("ready_notify", st["ready_s"].get("log_running"))
        if ready is not None:
            rows.append(("start-up to READY", f"{ready:.3f} s", "<= 1 s", ready <= 1))
        if "daemon_rss_mb_after_start" in st:
            rows.append(("daemon RSS after start", f"{st['daemon_rss_mb_after_start']:.1f} MB",
                         "<= 60 MB", st["daemon_rss_mb_after_start"] <= 60))
    v = (st or {}).get("verify")
    if v:
        rows.append(("ledger verify", f"{v['seconds']:.1f} s", "<= 15 s",
                     v["seconds"] <= 15 and v["exit"] == 0))
        rows.append(("ledger verify / its floor", f"{v['ratio']:.2f}x", "<= 1.5x",
                     v["ratio"] <= 1.5 and v["exit"] == 0))
        q = v.get("since_verified")
        if q:
            rows.append((f"verify --since-verified (+{q['rows_appended']:,} rows) / its floor",
                         f"{q['ratio']:.2f}x", "<= 1.5x",
                         q["ratio"] <= 1.5 and q["exit"] == 0 and q["mode_ok"]))
    idle = (st or {}).get("idle")
    if idle:
        rows.append(("idle CPU", f"{idle['cpu_percent']:.2f} %", "<= 1 %",
                     idle["cpu_percent"] <= 1))
    return rows


def print_table(r: dict[str, Any], rows: list[Row]) -> None:
    fl, lat = r.get("floor"), r.get("latency")
    if fl:
        for name in ("sqlite_commit", "mqtt_qos1_round_trip", "floor"):
            s = fl[name]
            print(f"  {name:<28} p50 {s['p50_ms']:7.2f} ms  p99 {s['p99_ms']:7.2f} ms  "
                  f"max {s['max_ms']:7.2f} ms  (n={s['n']})")
    if lat:
        lines = {"key_to_sign": lat["key_to_sign"], "lock_to_meter": lat["lock_to_meter"]}
        for d, m in lat.get("lock_to_meter_by_delay_s", {}).items():
            lines[f"  LOCK {d} s after bets"] = m
        for part, m in lat.get("lock_split", {}).items():
            if isinstance(m, dict):
                lines[f"  LOCK {part}"] = m
        for name, s in lines.items():
            print(f"  {name:<28} p50 {s['p50_ms']:7.2f} ms  p99 {s['p99_ms']:7.2f} ms  "
                  f"max {s['max_ms']:7.2f} ms  (n={s['n']})")
    print()
    print(f"  {'measure':<32} {'result':>14}  {'target':<16} ok")
    for name, value, target, ok in rows:
        print(f"  {name:<32} {value:>14}  {target:<16} {'yes' if ok else 'NO'}")
