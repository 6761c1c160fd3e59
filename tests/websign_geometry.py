"""What a player sees, measured in the browser: boxes, overflow and text contrast.

Scripts run in the page (headless Chromium through selenium) and return plain data; the
tests assert on it. Contrast is WCAG 2's, computed from the colours the browser rendered
(``getComputedStyle``) against the first opaque background behind each text.
"""

from __future__ import annotations

import asyncio
from typing import Any

from selenium import webdriver

# Every element that draws text of its own, visible: its box, colours and where it is cut.
TEXTS_JS = """
const out = [];
function rgb(text) {
  const m = text.match(/rgba?\\(([^)]+)\\)/);
  if (!m) return null;
  const p = m[1].split(',').map((x) => parseFloat(x));
  return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
}
function ground(el) {
  for (let n = el; n; n = n.parentElement) {
    const c = rgb(getComputedStyle(n).backgroundColor);
    if (c && c.a > 0.99) return c;
  }
  return rgb(getComputedStyle(document.documentElement).backgroundColor) || {r: 255, g: 255, b: 255, a: 1};
}
function lum(c) {
  const ch = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * ch(c.r) + 0.7152 * ch(c.g) + 0.0722 * ch(c.b);
}
for (const el of document.querySelectorAll('body *')) {
  const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
  if (!own) continue;
  const cs = getComputedStyle(el);
  if (cs.display === 'none' || cs.visibility !== 'visible' || el.closest('[hidden]')) continue;
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.height === 0) continue;
  const fg = rgb(cs.color), bg = ground(el);
  const hi = Math.max(lum(fg), lum(bg)), lo = Math.min(lum(fg), lum(bg));
  const box = el.closest('section.source');
  const clip = box ? box.getBoundingClientRect() : {left: 0, top: 0, right: innerWidth, bottom: innerHeight};
  out.push({
    text: el.textContent.trim().slice(0, 60), cls: el.className,
    left: r.left, top: r.top, right: r.right, bottom: r.bottom,
    clipped: r.left < clip.left - 0.5 || r.top < clip.top - 0.5 || r.right > clip.right + 0.5 || r.bottom > clip.bottom + 0.5,
    contrast: (hi + 0.05) / (lo + 0.05), opacity: cs.opacity,
  });
}
const doc = document.documentElement;
return {
  texts: out, width: innerWidth, height: innerHeight,
  scroll: [doc.scrollWidth, doc.scrollHeight, document.body.scrollWidth, document.body.scrollHeight],
  scrollers: [...document.querySelectorAll('*')].filter((n) => {
    const o = getComputedStyle(n);
    return /(auto|scroll)/.test(o.overflow + o.overflowX + o.overflowY) &&
      (n.scrollWidth > n.clientWidth + 1 || n.scrollHeight > n.clientHeight + 1);
  }).map((n) => n.className),
};
"""

METERS_JS = """
const box = document.querySelector('section.source[data-key="' + arguments[0] + '"]');
const tile = box.getBoundingClientRect();
return {tile: [tile.left, tile.top, tile.right, tile.bottom],
  meters: [...box.querySelectorAll('.meter[data-meter]')].map((m) => {
  const a = m.querySelector('.amount'), r = a.getBoundingClientRect();
  return {meter: m.dataset.meter, text: a.textContent, left: r.left, right: r.right, top: r.top,
          bottom: r.bottom, width: r.width, font: parseFloat(getComputedStyle(a).fontSize)};
})};
"""

SETTLED_JS = """
const done = arguments[arguments.length - 1];
requestAnimationFrame(() => requestAnimationFrame(() => done(true)));
"""


async def viewport(driver: webdriver.Chrome, width: int, height: int) -> None:
    """Resize the page's viewport and wait for two frames (the page refits on resize)."""
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    await asyncio.to_thread(driver.execute_cdp_cmd, "Emulation.setDeviceMetricsOverride", metrics)
    await settled(driver)


async def settled(driver: webdriver.Chrome) -> None:
    await asyncio.to_thread(driver.execute_async_script, SETTLED_JS)


async def texts(driver: webdriver.Chrome) -> dict[str, Any]:
    found: dict[str, Any] = await asyncio.to_thread(driver.execute_script, TEXTS_JS)
    return found


async def meters(driver: webdriver.Chrome, key: str) -> dict[str, Any]:
    found: dict[str, Any] = await asyncio.to_thread(driver.execute_script, METERS_JS, key)
    return found


def layout_problems(page: dict[str, Any]) -> list[str]:
    """Text outside the screen or cut off by its box, scroll bars, text below 7:1."""
    wrong = []
    width, height = page["width"], page["height"]
    if (
        max(page["scroll"][0], page["scroll"][2]) > width
        or max(page["scroll"][1], page["scroll"][3]) > height
    ):
        wrong.append(f"the page scrolls: {page['scroll']} in {width}x{height}")
    if page["scrollers"]:
        wrong.append(f"scrolling boxes: {page['scrollers']}")
    for text in page["texts"]:
        where = f"{text['cls']!r} {text['text']!r}"
        if (
            text["left"] < -0.5
            or text["top"] < -0.5
            or text["right"] > width + 0.5
            or text["bottom"] > height + 0.5
        ):
            wrong.append(f"{where} outside the {width}x{height} screen: {text}")
        if text["clipped"]:
            wrong.append(f"{where} cut off by its box: {text}")
        if text["contrast"] < 7:
            wrong.append(f"{where} contrast {text['contrast']:.2f}:1 < 7:1")
        if float(text["opacity"]) < 1:
            wrong.append(f"{where} drawn at opacity {text['opacity']}")
    return wrong
