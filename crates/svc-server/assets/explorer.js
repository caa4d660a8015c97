// The explorer's live part: lists and tables marked with data-stream follow the catalog's
// change stream (Server-Sent Events) from the moment the page was built. Every page works
// without this script. Records are strangers' text: it is only ever set as text, and links
// are built from the explorer's own paths.
"use strict";

const TIMES = ["occurredAt", "createdAt", "detectedAt", "computedAt"];
const DID = /^did:[a-z]+:[A-Za-z0-9._:%-]+$/;
const LENS = "dev.panproto.schema.lens";

function element(name, text, className) {
  const made = document.createElement(name);
  if (text !== undefined) made.textContent = text;
  if (className) made.className = className;
  return made;
}

function link(text, href) {
  const anchor = element("a", text, "text");
  anchor.href = href;
  return anchor;
}

// "at://did/collection/rkey" -> its page, "/at/did/collection/rkey".
function recordPath(uri) {
  return "/at/" + uri.slice("at://".length);
}

function title(uri, record) {
  const name = record && typeof record.name === "string" ? record.name.trim() : "";
  return name || uri.split("/").pop();
}

function atPath(record, path) {
  let here = record;
  for (const step of path.split(".")) {
    if (Array.isArray(here)) here = here[0];
    if (here === null || typeof here !== "object") return undefined;
    here = here[step.split("[")[0]];
  }
  return here;
}

// One value as a cell, as the server writes it: text, DIDs and lenses linked, arrays by length.
function cell(value, label) {
  const td = element("td");
  td.dataset.label = label;
  if (Array.isArray(value) && value.length === 1) value = value[0];
  if (value === undefined) return td;
  if (typeof value === "string") {
    const text = value.length > 160 ? value.slice(0, 160) + "…" : value;
    let shown;
    if (DID.test(value)) shown = link(text, "/at/" + value);
    else if (value.startsWith("at://") && value.split("/")[3] === LENS) shown = link(text, recordPath(value));
    else shown = element("span", text, "text");
    // Cut to one line by the stylesheet: the whole text is its title.
    shown.title = text;
    td.append(shown);
  } else if (Array.isArray(value)) {
    td.textContent = value.length + " items";
  } else {
    td.textContent = JSON.stringify(value);
  }
  return td;
}

function timeOf(record) {
  const field = TIMES.find((name) => record && typeof record[name] === "string");
  return field ? record[field] : "";
}

function row(table, message) {
  const item = message.item;
  const tr = element("tr");
  tr.dataset.uri = message.uri;
  const first = element("td");
  first.dataset.label = "Record";
  first.append(link(title(message.uri, item.record), recordPath(message.uri)));
  const author = element("td");
  author.dataset.label = "Author";
  author.append(link(item.author, "/at/" + item.author));
  tr.append(first, author);
  for (const th of table.querySelectorAll("th[data-path]")) {
    tr.append(cell(atPath(item.record, th.dataset.path), th.textContent));
  }
  const time = element("td");
  time.dataset.label = "Time";
  time.append(element("time", timeOf(item.record)));
  tr.append(time);
  return tr;
}

function addToTotal(change) {
  const total = document.getElementById("total");
  if (total) total.textContent = String(Number(total.textContent) + change);
}

function followTable(table, message) {
  const body = table.tBodies[0];
  const existing = [...body.rows].find((tr) => tr.dataset.uri === message.uri);
  if (message.op === "leave") {
    if (existing && !existing.classList.contains("left")) {
      existing.classList.add("left");
      addToTotal(-1);
    }
    return;
  }
  if (!message.item) return;
  const fresh = row(table, message);
  fresh.classList.add("entered");
  if (existing) {
    const wasLeft = existing.classList.contains("left");
    existing.replaceWith(fresh);
    if (wasLeft) addToTotal(1);
  } else {
    body.prepend(fresh);
    if (message.op === "enter") addToTotal(1);
  }
}

function countKind(uri, change) {
  const kind = uri.split("/")[3];
  const cell = document.querySelector(`tr[data-kind="${CSS.escape(kind)}"] .count`);
  if (cell) {
    cell.textContent = String(Number(cell.textContent) + change);
    addToTotal(change);
  }
}

function followList(list, message) {
  const li = element("li", undefined, "entered");
  li.append(element("span", message.op, "op " + message.op), " ");
  const record = message.item ? message.item.record : null;
  const name = title(message.uri, record);
  li.append(message.item ? link(name, recordPath(message.uri)) : element("span", name, "text"));
  const parts = message.uri.slice("at://".length).split("/");
  li.append(" ", element("code", parts[1] || "", "kind"), " by ", link(parts[0], "/at/" + parts[0]));
  li.append(" ", element("time", message.time));
  list.prepend(li);
  const keep = Number(list.dataset.keep || 20);
  while (list.children.length > keep) list.lastElementChild.remove();
  if (message.op === "enter") countKind(message.uri, 1);
  if (message.op === "leave") countKind(message.uri, -1);
  const empty = list.parentElement.querySelector(".empty");
  if (empty) empty.remove();
}

/* A chart of changes per minute that the stream keeps current: each change adds to the
   current minute's bar; as a minute begins, the oldest leaves. The scale grows to fit. */
function liveChart(svg) {
  const bars = [...svg.querySelectorAll("rect.bar")];
  const counts = bars.map((bar) => Number(bar.dataset.value));
  const top = Number(svg.dataset.top);
  const bottom = Number(svg.dataset.bottom);
  let topValue = Number(svg.dataset.topValue);
  let last = Number(svg.dataset.liveMinute);
  let pending = false;
  const clock = (minute) => {
    const ofDay = ((minute % 1440) + 1440) % 1440;
    return String(Math.floor(ofDay / 60)).padStart(2, "0") + ":" + String(ofDay % 60).padStart(2, "0");
  };
  // As the server scales: four lines of 1, 2 or 5 times a power of ten.
  const nice = (n) => {
    const perLine = Math.max(1, Math.ceil(n / 4));
    for (let power = 1; ; power *= 10) {
      for (const step of [1, 2, 5]) if (step * power >= perLine) return 4 * step * power;
    }
  };
  const draw = () => {
    pending = false;
    topValue = Math.max(topValue, nice(Math.max(...counts)));
    svg.querySelectorAll(".y-tick").forEach((tick, i, ticks) => {
      tick.textContent = String(Math.round((topValue * i) / (ticks.length - 1)));
    });
    bars.forEach((bar, i) => {
      const height = ((bottom - top) * Math.min(1, counts[i] / topValue)).toFixed(1);
      bar.setAttribute("y", (bottom - height).toFixed(1));
      bar.setAttribute("height", height);
      bar.dataset.value = String(counts[i]);
      const minute = last - (bars.length - 1 - i);
      bar.querySelector("title").textContent = clock(minute) + ": " + counts[i] + " changes";
    });
  };
  return () => {
    const now = Math.floor(Date.now() / 60000);
    for (; last < now; last++) {
      counts.shift();
      counts.push(0);
    }
    counts[counts.length - 1] += 1;
    if (!pending) {
      pending = true;
      setTimeout(draw, 250);
    }
  };
}

const chartedMinutes = document.querySelector("svg[data-live-minute]");
const countChange = chartedMinutes ? liveChart(chartedMinutes) : () => {};

function follow(target) {
  const state = target.closest("section").querySelector(".live-state");
  const say = (text) => {
    if (!state) return;
    state.hidden = false;
    state.textContent = text;
  };
  const source = new EventSource(target.dataset.stream);
  source.onopen = () => say("Live: new changes appear as they happen.");
  source.onmessage = (event) => {
    const message = JSON.parse(event.data);
    if (message.error || message.info) {
      say("Live updates stopped (" + (message.error || message.info) + "); reload the page to resume.");
      source.close();
      return;
    }
    if (target.tagName === "TABLE") followTable(target, message);
    else followList(target, message);
    if (message.uri) countChange();
    target.dataset.seen = String(message.seq);
  };
  source.onerror = () => say("Live updates are reconnecting…");
}

document.querySelectorAll("[data-stream]").forEach(follow);
