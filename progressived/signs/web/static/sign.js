// The meter sign page (docs/sign.md). The server draws every source (the page arrives
// already showing what the server holds, and every update carries the source's new HTML),
// so this script only: swaps updated sources in, rolls the digits up (odometer), fits the
// digits to the screen, tiles a bank of tables, ends a celebration after its time, and says
// STALE when it cannot vouch for what it shows. One EventSource: a full snapshot on every
// (re)connection, then each changed source. No polling, no reloads.
//
// Money stays exact: amounts are integer cents (`data-cents`), and every value shown is an
// integer. A double holds every integer up to 2^53 (about 9.007e15) exactly, and the largest
// meter a sign shows, $99,999,999.99, is 9,999,999,999 cents: sums, differences and
// Math.floor of a difference times a fraction in [0, 1] stay exact integers far below that,
// and dollars/cents are split with integer division and remainder, never by dividing by 100.
"use strict";
(function () {
  const body = document.body;
  const floor = document.getElementById("floor");
  const only = body.dataset.only || "";
  const reduce = window.matchMedia("(prefers-reduced-motion: reduce)");
  const deadlines = new Map(); // source key -> local time its winner banner ends (ms)
  const rolls = new Map();     // meter element -> {from, to, start, ms}
  let odometerMs = Number(body.dataset.odometerMs || 800);
  let broker = { state: body.dataset.stale === "true" ? "connecting" : "connected", detail: "" };
  let tickMs = 1000, lastHeard = performance.now(), events = null, staleSince = null, staleWhy = "";
  window.__signPaints = [];    // [{key, meter, seq, cents, t, frame}] for the latency bench:
                                // t the DOM shows it, frame the frame showing it was painted

  function money(cents) {
    const sign = cents < 0 ? "-" : "";
    const abs = Math.abs(cents);
    const whole = Math.floor(abs / 100), part = abs % 100;  // exact below 2^53 (see above)
    return sign + "$" + whole.toLocaleString("en-US") + "." + (part < 10 ? "0" : "") + part;
  }

  function now() { return performance.now(); }

  function paint(key, meter, cents) {
    const t = performance.timeOrigin + now();
    const rec = { key: key, meter: meter.dataset.meter, seq: Number(meter.dataset.seq), cents: cents, t: t, frame: 0 };
    window.__signPaints.push(rec);
    // After the frame that draws it: a task queued from requestAnimationFrame runs once
    // that frame's style, layout and paint are done.
    requestAnimationFrame(() => setTimeout(() => { rec.frame = performance.timeOrigin + now(); }, 0));
    if (window.__signPaints.length > 4000) window.__signPaints.splice(0, 2000);
  }

  function show(meter, cents) {
    const amount = meter.querySelector(".amount");
    if (!amount) return;
    const text = money(cents);
    const resize = amount.textContent.length !== text.length;
    amount.textContent = text;
    meter.dataset.shown = String(cents);
    if (resize) fit(meter.closest("section.source"));
  }

  // --- odometer ----------------------------------------------------------------------------
  // From the value shown to the value published: never above it (floor of an eased fraction
  // of the gap, the ease never above 1), there within odometerMs (at most 1000), at once
  // for a decrease (a hit) or with reduced motion.
  function ease(t) { return 1 - (1 - t) * (1 - t) * (1 - t); }

  function frame() {
    const t = now();
    for (const [meter, roll] of rolls) {
      if (!meter.isConnected) { rolls.delete(meter); continue; }
      const done = t - roll.start >= roll.ms;
      const value = done ? roll.to : roll.from + Math.floor((roll.to - roll.from) * Math.min(1, ease((t - roll.start) / roll.ms)));
      show(meter, Math.min(value, roll.to));
      if (done) {
        rolls.delete(meter);
        paint(roll.key, meter, roll.to);
      }
    }
    if (rolls.size) requestAnimationFrame(frame);
  }

  function settle(key, meter, previous) {
    const to = Number(meter.dataset.cents);
    const from = previous === undefined ? to : previous;
    rolls.delete(meter);
    if (from < to && odometerMs > 0 && !reduce.matches && meter.dataset.state !== "waiting") {
      show(meter, from);
      const wasIdle = rolls.size === 0;
      rolls.set(meter, { key: key, from: from, to: to, start: now(), ms: odometerMs });
      if (wasIdle) requestAnimationFrame(frame);
    } else {
      show(meter, to);
      paint(key, meter, to);
    }
  }

  // --- sources -------------------------------------------------------------------------------
  function wanted(key) { return !only || key === only; }

  function fromHtml(html) {
    const box = document.createElement("template");
    box.innerHTML = html;
    return box.content.firstElementChild;
  }

  function take(src) {
    if (!wanted(src.key) || !src.html) return;
    const next = fromHtml(src.html);
    const old = document.getElementById("src-" + src.key);
    const before = new Map();
    if (old) {
      for (const m of old.querySelectorAll(".meter[data-meter]")) before.set(m.dataset.meter, m);
    }
    // Never step back: a meter of the same boot with a lower seq than the one shown keeps
    // the one shown (a server restarted onto an older retained value).
    for (const m of next.querySelectorAll(".meter[data-meter]")) {
      const had = before.get(m.dataset.meter);
      if (had && had.dataset.boot === m.dataset.boot && Number(m.dataset.seq) < Number(had.dataset.seq)) {
        m.replaceWith(had.cloneNode(true));
      }
    }
    if (old) old.replaceWith(next);
    else {
      const boxes = [...floor.querySelectorAll("section.source")];
      const after = boxes.find((b) => b.dataset.key > src.key);
      floor.insertBefore(next, after || null);
      const empty = document.getElementById("empty");
      if (empty) empty.remove();
      tile();
    }
    for (const m of next.querySelectorAll(".meter[data-meter]")) {
      const had = before.get(m.dataset.meter);
      const shown = had && had.dataset.boot === m.dataset.boot ? Number(had.dataset.shown || had.dataset.cents) : undefined;
      settle(src.key, m, shown);
    }
    const banner = next.querySelector(".banner");
    if (banner) deadlines.set(src.key, now() + Number(banner.dataset.remainingMs || 0));
    else deadlines.delete(src.key);
    faults();
    fit(next);
  }

  // --- layout: digits as wide as the screen allows, a bank tiled to fill it ----------------
  const LEVEL = [1, 0.62, 0.5, 0.42];  // each level's digits against the first level's

  // The paytable: as large as its stylesheet says, smaller when long names would not fit.
  function fitTable(section) {
    const table = section.querySelector(".paytable");
    if (!table || table.offsetParent === null) return;
    table.style.fontSize = "";
    const room = section.clientWidth * 0.94, tall = section.clientHeight * 0.42;
    const scale = Math.min(1, room / table.offsetWidth, tall / table.offsetHeight);
    if (scale < 1) {
      table.style.fontSize = (parseFloat(getComputedStyle(table).fontSize) * scale * 0.98).toFixed(2) + "px";
    }
  }

  // The title and the table's name: on one line, smaller when they would not fit the width.
  function fitNames(section) {
    const room = section.clientWidth * 0.94;
    for (const el of section.querySelectorAll(".head .title, .head .where")) {
      el.style.fontSize = "";
      if (el.scrollWidth > room) {
        const size = parseFloat(getComputedStyle(el).fontSize);
        el.style.fontSize = (size * room / el.scrollWidth * 0.98).toFixed(2) + "px";
      }
    }
  }

  function fit(section) {
    if (!section) return;
    fitNames(section);
    fitTable(section);
    const levels = section.querySelector(".levels");
    if (!levels) return;
    const amounts = [...levels.querySelectorAll(".meter[data-meter] .amount")];
    if (!amounts.length) return;
    const width = levels.clientWidth * 0.96;
    let height = levels.clientHeight;
    for (const label of levels.querySelectorAll(".level")) height -= label.offsetHeight;
    let size = Infinity, stack = 0;
    amounts.forEach((a, i) => {
      const r = LEVEL[Math.min(i, LEVEL.length - 1)];
      a.style.fontSize = "100px";
      const perPx = a.offsetWidth / 100;
      if (perPx > 0) size = Math.min(size, width / (perPx * r));
      stack += r * 1.12;
    });
    size = Math.max(8, Math.min(size, height / stack));
    amounts.forEach((a, i) => {
      a.style.fontSize = (size * LEVEL[Math.min(i, LEVEL.length - 1)]).toFixed(2) + "px";
    });
  }

  function tile() {
    if (only) return;
    const tiles = floor.querySelectorAll("section.source").length || 1;
    const w = floor.clientWidth, h = floor.clientHeight;
    let best = 1, score = 0;
    for (let cols = 1; cols <= tiles; cols++) {
      const rows = Math.ceil(tiles / cols);
      const s = Math.min(w / cols, (h / rows) * 1.6);  // a tile a little wider than tall
      if (s > score) { score = s; best = cols; }
    }
    floor.style.setProperty("--cols", best);
    floor.style.setProperty("--rows", Math.ceil(tiles / best));
    floor.dataset.count = tiles;
  }

  function fitAll() {
    tile();
    for (const s of floor.querySelectorAll("section.source")) fit(s);
  }

  // --- STALE and the end of a celebration ----------------------------------------------------
  function faults() {
    for (const f of document.querySelectorAll(".fault")) f.textContent = staleWhy ? UPDATING : "";
  }

  // Players read this while the sign cannot vouch for its value; why (for staff) is in the
  // bar's data-detail, in /state.json and in the sign server's log, never on the glass.
  const UPDATING = "Jackpot meter updating soon";

  function staleness() {
    const t = now();
    let why = "";
    if (t - lastHeard > 3 * tickMs) why = "no word from the sign server";
    else if (broker.state !== "connected") {
      why = "broker " + broker.state + (broker.detail ? " (" + broker.detail + ")" : "");
    }
    if (why && !staleSince) staleSince = new Date();
    if (!why) staleSince = null;
    if (why) why += " — since " + staleSince.toLocaleTimeString();
    if (why !== staleWhy) {
      staleWhy = why;
      body.dataset.stale = why ? "true" : "false";
      document.getElementById("stale").hidden = !why;
      const bar = document.getElementById("stale");
      bar.dataset.detail = why;
      document.getElementById("stale-why").textContent = why ? UPDATING : "";
      faults();
      fitAll();  // the STALE bar takes (or gives back) a line of the screen
    }
    for (const [key, until] of deadlines) {
      if (t >= until) {
        deadlines.delete(key);
        const banner = document.querySelector('section.source[data-key="' + CSS.escape(key) + '"] .banner');
        if (banner) banner.remove();
      }
    }
  }

  function heard() { lastHeard = now(); }

  function connect() {
    if (events) events.close();
    events = new EventSource("/events");
    events.addEventListener("snapshot", (e) => {
      heard();
      const snap = JSON.parse(e.data);
      tickMs = (snap.tick_s || 1) * 1000;
      if (typeof snap.odometer_ms === "number") odometerMs = snap.odometer_ms;
      broker = snap.broker;
      // A tile the server no longer shows (a table retired from its configuration) goes.
      const keys = new Set(snap.sources.map((src) => src.key));
      for (const box of floor.querySelectorAll("section.source")) {
        if (!keys.has(box.dataset.key)) box.remove();
      }
      for (const src of snap.sources) take(src);
      staleness();
      fitAll();
    });
    events.addEventListener("source", (e) => { heard(); take(JSON.parse(e.data)); });
    events.addEventListener("broker", (e) => { heard(); broker = JSON.parse(e.data); staleness(); });
    events.addEventListener("tick", (e) => { heard(); broker = JSON.parse(e.data); });
    events.onerror = () => {
      // EventSource retries by itself while the connection is merely lost; if it gave up
      // (the server answered with an error) start again after a second.
      if (events.readyState === EventSource.CLOSED) setTimeout(connect, 1000);
    };
  }

  // A kiosk screen must not blank: ask for a screen wake lock where the browser grants one.
  function keepAwake() {
    if (navigator.wakeLock && document.visibilityState === "visible") {
      navigator.wakeLock.request("screen").catch(() => {});
    }
  }

  // The first frame came from the server: note what each meter shows, end banners on time.
  for (const m of document.querySelectorAll(".meter[data-meter]")) m.dataset.shown = m.dataset.cents;
  for (const b of document.querySelectorAll("section.source .banner")) {
    deadlines.set(b.closest("section.source").dataset.key, now() + Number(b.dataset.remainingMs || 0));
  }
  fitAll();
  window.addEventListener("resize", fitAll);
  document.addEventListener("visibilitychange", keepAwake);
  keepAwake();
  connect();
  setInterval(staleness, 250);
})();
