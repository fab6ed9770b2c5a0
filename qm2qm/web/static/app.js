// qm2qm web view: polls the admin API's JSON and renders it as text (never as HTML: labels and bodies are
// whatever a peer sent). No build step, no dependencies.
"use strict";
const QM = (() => {
  const REFRESH_MS = 2000;
  const previous = new Map();          // key -> [value, time]: totals seen at the last poll, for rates

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") node.textContent = v; else node.setAttribute(k, v);
    }
    for (const child of children) node.append(child);
    return node;
  }

  async function getJSON(path) {
    const response = await fetch(path, { cache: "no-store" });
    const data = await response.json();
    if (!response.ok) throw new Error(`${path}: ${data.message || response.status}`);
    return data;
  }

  // Fetch all paths at once; if any fails, throw the first failure in the order given (not in arrival order),
  // so the page names the same error every time.
  async function getAll(paths) {
    const settled = await Promise.allSettled(paths.map(getJSON));
    const failed = settled.find(s => s.status === "rejected");
    if (failed) throw failed.reason;
    return settled.map(s => s.value);
  }

  // The rate of a running total since the previous poll (per second of server time); "" on the first poll.
  function rate(key, total, time) {
    const before = previous.get(key);
    previous.set(key, [total, time]);
    if (!before || time <= before[1]) return "";
    return ((total - before[0]) / (time - before[1])).toFixed(1);
  }

  // Fill the <tbody> of table#id: columns are [heading-key, render(row) -> string | Node, css class].
  function fill(id, columns, rows, emptyText) {
    const body = document.querySelector(`#${id} tbody`);
    body.replaceChildren();
    if (!rows.length) {
      body.append(el("tr", { class: "empty" }, el("td", { colspan: columns.length, text: emptyText })));
      return;
    }
    for (const row of rows) {
      const tr = el("tr");
      for (const [, render, cls] of columns) {
        const value = render(row);
        const td = el("td", cls ? { class: cls } : {});
        if (value instanceof Node) td.append(value); else td.textContent = value == null ? "" : String(value);
        tr.append(td);
      }
      body.append(tr);
    }
  }

  function kv(id, pairs) {
    const box = document.getElementById(id);
    box.replaceChildren(...pairs.map(([k, v]) => el("div", {}, el("span", { text: k }), String(v))));
  }

  function queueLink(pathname) {
    return el("a", { href: `/ui/queue?name=${encodeURIComponent(pathname)}`, text: pathname });
  }

  function start(render) {
    const stamp = document.getElementById("updated");
    async function tick() {
      try {
        await render();
        stamp.textContent = `updated ${new Date().toLocaleTimeString()}`;
        stamp.classList.remove("error");
        document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
      } catch (err) {
        stamp.textContent = `error: ${err.message}`;
        stamp.classList.add("error");
      }
    }
    tick();
    setInterval(tick, REFRESH_MS);
  }

  // A read's ulTimeout in milliseconds; 0xFFFFFFFF is INFINITE (MS-MQQP 2.2.2.1 REMOTEREADDESC.ulTimeout).
  function timeout(ms) {
    return ms === 4294967295 ? "INFINITE" : String(ms);
  }

  return { el, getJSON, getAll, rate, fill, kv, queueLink, start, timeout };
})();
