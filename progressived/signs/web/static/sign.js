// The meter sign page. One EventSource to the sign server: a full snapshot on every
// (re)connection, then each changed table. No polling, no reloads. The local timer only
// ends banners and decides STALE (docs/sign.md): the broker is not connected, or the
// server has said nothing (it ticks every second) for three ticks.
"use strict";
(function () {
  const only = decodeURIComponent((location.pathname.match(/^\/table\/([^/]+)/) || [])[1] || "");
  const floor = document.getElementById("floor");
  const shown = new Map();      // key -> source as last drawn
  const deadlines = new Map();  // key -> local time the banner ends (ms)
  let broker = { state: "connecting", detail: "" };
  let tickMs = 1000, lastHeard = performance.now(), source = null, staleSince = null;
  window.__signPaints = [];     // [{key, meter, seq, cents, t}] for the latency test

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function wanted(src) { return !only || src.key === "table/" + only || src.id === only; }

  // Never show a value older than one already shown: same boot, lower seq -> keep ours.
  function merge(prev, next) {
    if (!prev) return next;
    const old = new Map(prev.meters.map((m) => [m.meter, m]));
    next.meters = next.meters.map((m) => {
      const had = old.get(m.meter);
      return had && had.boot === m.boot && m.seq < had.seq ? had : m;
    });
    return next;
  }

  function draw(src, now) {
    let box = document.getElementById("src-" + src.key);
    if (!box) {
      box = el("section", "source");
      box.id = "src-" + src.key;
      box.dataset.key = src.key;
      const boxes = [...floor.querySelectorAll("section.source")];
      const after = boxes.find((b) => b.dataset.key > src.key);
      floor.insertBefore(box, after || null);
      const empty = document.getElementById("empty");
      if (empty) empty.remove();
    }
    const closed = src.status === "offline" || src.meters.some((m) => m.state === "closed");
    const pending = src.pending.length > 0 || src.meters.some((m) => m.state === "pending");
    box.className = "source" + (closed ? " closed" : pending ? " pending" : "");
    box.dataset.status = src.status;
    box.replaceChildren();
    const title = el("h2");
    title.append(el("span", "id", src.kind.toUpperCase() + " " + src.id));
    title.append(el("span", "status", src.status === "offline" ? "CONTROLLER OFFLINE" : ""));
    box.append(title);
    const until = deadlines.get(src.key) || 0;
    if (src.banner && now < until) {
      const b = el("div", "banner");
      b.dataset.seat = src.banner.seat;
      b.append(el("span", "", "WINNER  TABLE " + (src.banner.table || src.id) + "  SEAT " + src.banner.seat +
        "  " + src.banner.hand.toUpperCase()));
      b.append(el("span", "big", src.banner.display));
      box.append(b);
    }
    for (const a of src.pending) {
      const p = el("div", "pending-award",
        "PENDING  seat " + a.seat + "  " + a.hand + "  " + a.display + "  awaiting the supervisor");
      p.dataset.seat = a.seat;
      box.append(p);
    }
    for (const m of src.meters) {
      const state = src.status === "offline" ? "closed" : m.state;
      const row = el("div", "meter");
      row.dataset.meter = m.meter;
      row.dataset.state = state;
      const label = el("div", "label");
      label.append(el("span", "", m.meter));
      label.append(el("span", "state " + state, state === "waiting" ? "" : state.toUpperCase()));
      row.append(label);
      row.append(el("div", "amount", m.display));
      box.append(row);
    }
    if (closed) box.append(el("div", "why", "CLOSED: " + (src.closed_reason || "closed")));
    if (src.envy.length) {
      const list = el("ul", "envy");
      for (const e of src.envy) {
        list.append(el("li", "", "seat " + e.seat + "  " + e.display + "  (" + e.hand +
          " at seat " + e.from_seat + ")"));
      }
      box.append(list);
    }
    const t = performance.timeOrigin + performance.now();
    for (const m of src.meters) {
      window.__signPaints.push({ key: src.key, meter: m.meter, seq: m.seq, cents: m.cents, t: t });
    }
    if (window.__signPaints.length > 2000) window.__signPaints.splice(0, 1000);
  }

  function take(src) {
    if (!wanted(src)) return;
    const now = performance.now();
    const prev = shown.get(src.key);
    const next = merge(prev, src);
    const oldBanner = prev && prev.banner ? JSON.stringify(prev.banner) : "";
    if (next.banner && JSON.stringify(next.banner) !== oldBanner) {
      deadlines.set(src.key, now + next.banner.remaining_ms);
    }
    if (!next.banner) deadlines.delete(src.key);
    shown.set(src.key, next);
    draw(next, now);
  }

  function staleness() {
    const now = performance.now();
    let why = "";
    if (now - lastHeard > 3 * tickMs) why = "no word from the sign server";
    else if (broker.state !== "connected") {
      why = "broker " + broker.state + (broker.detail ? " (" + broker.detail + ")" : "");
    }
    if (why && !staleSince) staleSince = new Date();
    if (!why) staleSince = null;
    if (why) why += " — since " + staleSince.toLocaleTimeString();
    document.body.dataset.stale = why ? "true" : "false";
    document.getElementById("stale").hidden = !why;
    document.getElementById("stale-why").textContent = why;
    document.getElementById("link").textContent = why ? "STALE" : "LIVE";
    for (const [key, until] of deadlines) {
      if (now >= until) {
        deadlines.delete(key);
        const src = shown.get(key);
        if (src) { src.banner = null; draw(src, now); }
      }
    }
  }

  function heard() { lastHeard = performance.now(); }

  function connect() {
    if (source) source.close();
    source = new EventSource("/events");
    source.addEventListener("snapshot", (e) => {
      heard();
      const snap = JSON.parse(e.data);
      tickMs = (snap.tick_s || 1) * 1000;
      broker = snap.broker;
      for (const src of snap.sources) take(src);
      staleness();
    });
    source.addEventListener("source", (e) => { heard(); take(JSON.parse(e.data)); });
    source.addEventListener("broker", (e) => { heard(); broker = JSON.parse(e.data); staleness(); });
    source.addEventListener("tick", (e) => { heard(); broker = JSON.parse(e.data); });
    source.onerror = () => {
      // EventSource retries by itself while the connection is merely lost; if it gave up
      // (the server answered with an error) start again after a second.
      if (source.readyState === EventSource.CLOSED) setTimeout(connect, 1000);
    };
  }

  if (only) document.getElementById("title").textContent = "PROGRESSIVE · TABLE " + only;
  connect();
  setInterval(staleness, 250);
})();
