// console.js — Strata's web console: reads the admin API (/v1/cluster, /v1/topics,
// /v1/partitions, /v1/groups), browses records (/v1/topics/{t}/partitions/{p}/records), creates
// topics (POST /v1/topics) and edits their configs (POST /v1/topics/{t}/configs).
// No framework: every view is rebuilt from the latest answers by the render* functions; every
// text from the broker goes into the page through textContent, never as HTML.
"use strict";

const REFRESH_MS = 5000;
const state = { cluster: null, topics: [], partitions: [], groups: [], detail: null, next: null };

// ---- helpers ----------------------------------------------------------------------------------

function $(id) { return document.getElementById(id); }

// el("td", {class: "num"}, "text", childNode, ...): a new element.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k == null ? "" : String(k)));
  return e;
}

function fill(tbody, rows, empty, cols) {
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: cols, class: "muted" }, empty))]));
}

function bytes(n) {
  if (n == null) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

function num(n) { return n == null ? "–" : Number(n).toLocaleString("en-US"); }

async function api(path, opts) {
  const r = await fetch(path, Object.assign({ headers: { Accept: "application/json" } }, opts || {}));
  let body = null;
  try { body = await r.json(); } catch (e) { body = { error: "not JSON (" + r.status + ")" }; }
  if (!r.ok) throw new Error((body && body.error) || ("HTTP " + r.status));
  return body;
}

function post(path, obj) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" },
                     body: JSON.stringify(obj) });
}

function result(id, ok, text) {
  const p = $(id);
  p.className = "result " + (ok ? "ok" : "bad");
  p.textContent = text;
}

// ---- tabs (the URL's hash: #overview, #topics/NAME, #groups, #messages/T/P/OFFSET/FORMAT, #create)

function route() {
  const parts = (location.hash.replace(/^#/, "") || "overview").split("/").map(decodeURIComponent);
  const tab = ["overview", "topics", "groups", "messages", "create"].includes(parts[0]) ? parts[0] : "overview";
  for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.tab === tab);
  for (const s of document.querySelectorAll(".view")) s.classList.toggle("active", s.id === "view-" + tab);
  if (tab === "topics") { state.detail = parts[1] || null; renderTopics(); }
  if (tab === "messages" && parts[1]) {
    fillBrowseTopics(parts[1]);
    fillBrowsePartitions(parts[2] || "0");
    if (parts[3] !== undefined && parts[3] !== "") { $("browse-from").value = "offset"; $("browse-at").value = parts[3]; }
    if (["text", "json", "hex"].includes(parts[4])) $("browse-format").value = parts[4];
    browse();
  }
}

// ---- data -------------------------------------------------------------------------------------

async function refresh() {
  try {
    const [c, t, p, g] = await Promise.all([api("/v1/cluster"), api("/v1/topics"), api("/v1/partitions"), api("/v1/groups")]);
    state.cluster = c; state.topics = t.topics; state.partitions = p.partitions; state.groups = g.groups;
    render();
    $("status").textContent = "updated " + new Date().toLocaleTimeString("en-GB");
  } catch (e) {
    $("status").textContent = "cannot read the admin API: " + e.message;
  }
}

function partsOf(topic) { return state.partitions.filter(p => p.topic === topic); }

function render() {
  renderOverview();
  renderTopics();
  renderGroups();
  fillBrowseTopics();
}

// ---- overview ---------------------------------------------------------------------------------

function renderOverview() {
  const c = state.cluster;
  $("cluster-line").textContent = "cluster " + c.cluster_id + " · node " + c.node_id + " · v" + c.version;
  const user = state.topics.filter(t => !t.internal);
  const lag = state.groups.reduce((s, g) => s + (g.lag || 0), 0);
  const card = (k, v, id) => el("div", { class: "card", id: id }, el("div", { class: "k" }, k), el("div", { class: "v" }, v));
  $("cards").replaceChildren(
    card("Brokers", c.brokers.length, "card-brokers"),
    card("Controller", c.controller_id == null ? "–" : c.controller_id, "card-controller"),
    card("Topics", user.length, "card-topics"),
    card("Partitions", user.reduce((s, t) => s + t.partitions, 0), "card-partitions"),
    card("Consumer groups", state.groups.length, "card-groups"),
    card("Total lag", num(lag), "card-lag"),
    card("Ready", c.ready ? "yes" : "no", "card-ready"));
  fill($("brokers").tBodies[0], c.brokers.map(b => {
    const fenced = b.fenced === true;
    const role = [];
    if (b.node_id === c.controller_id) role.push("controller");
    if (b.node_id === c.node_id) role.push("this node");
    return el("tr", { "data-broker": b.node_id },
      el("td", {}, b.node_id),
      el("td", { class: "mono" }, b.host + ":" + b.port),
      el("td", {}, b.rack || "–"),
      el("td", {}, el("span", { class: "badge " + (fenced ? "bad" : "ok") }, fenced ? "fenced" : "active")),
      el("td", {}, role.join(", ") || "–"));
  }), "no brokers registered", 5);
  fill($("topics-summary").tBodies[0], user.map(t => el("tr", { "data-topic": t.name },
    el("td", {}, el("a", { href: "#topics/" + encodeURIComponent(t.name) }, t.name)),
    el("td", { class: "num" }, t.partitions), el("td", { class: "num" }, t.replication_factor),
    el("td", { class: "num" }, num(t.records)), el("td", { class: "num" }, bytes(t.size_bytes)))),
    "no topics yet", 5);
  fill($("groups-summary").tBodies[0], state.groups.map(g => el("tr", { "data-group": g.group },
    el("td", {}, el("a", { href: "#groups" }, g.group)), el("td", {}, stateBadge(g.state)),
    el("td", { class: "num" }, g.members), el("td", { class: "num group-lag" }, num(g.lag)))),
    "no consumer groups", 4);
}

function stateBadge(s) {
  const cls = s === "Stable" ? "ok" : s === "Empty" ? "" : s === "Dead" ? "bad" : "warn";
  return el("span", { class: "badge " + cls }, s);
}

// ---- topics -----------------------------------------------------------------------------------

function renderTopics() {
  const internal = $("show-internal").checked;
  const ts = state.topics.filter(t => internal || !t.internal);
  fill($("topics").tBodies[0], ts.map(t => el("tr", { "data-topic": t.name },
    el("td", {}, el("a", { href: "#topics/" + encodeURIComponent(t.name) }, t.name), t.internal ? " " : "",
       t.internal ? el("span", { class: "badge" }, "internal") : ""),
    el("td", { class: "num" }, t.partitions), el("td", { class: "num" }, t.replication_factor),
    el("td", { class: "num" }, num(t.records)), el("td", { class: "num" }, bytes(t.size_bytes)),
    el("td", { class: "mono" }, Object.entries(t.configs || {}).map(([k, v]) => k + "=" + v).join(", ") || "–"),
    el("td", {}, el("a", { href: "#messages/" + encodeURIComponent(t.name) + "/0" }, "messages")))),
    "no topics yet", 7);
  const t = state.topics.find(x => x.name === state.detail);
  $("topic-detail").hidden = !t;
  if (!t) return;
  $("detail-name").textContent = t.name;
  fill($("partitions").tBodies[0], partsOf(t.name).map(p => el("tr", { "data-partition": p.partition },
    el("td", { class: "num" }, p.partition), el("td", { class: "num" }, p.leader < 0 ? "none" : p.leader),
    el("td", {}, (p.replicas || []).join(", ") || "–"), el("td", {}, (p.isr || []).join(", ") || "–"),
    el("td", { class: "num" }, num(p.log_start_offset)), el("td", { class: "num" }, num(p.high_watermark)),
    el("td", { class: "num" }, bytes(p.size_bytes)), el("td", { class: "num" }, num(p.segments)),
    el("td", {}, el("a", { href: "#messages/" + encodeURIComponent(t.name) + "/" + p.partition }, "browse")))),
    "no partitions", 9);
  const body = $("configs").tBodies[0];
  if (body.dataset.topic === t.name && body.contains(document.activeElement)) return; // being edited
  body.dataset.topic = t.name;
  fill(body, Object.entries(t.configs || {}).map(([k, v]) => el("tr", {},
    el("td", { class: "mono" }, k), el("td", {}, el("input", { "data-config": k, value: v, "data-was": v })))),
    "no overrides: every config is the broker's default", 2);
}

async function saveConfigs(ev) {
  ev.preventDefault();
  const t = state.detail;
  const changes = {};
  for (const i of document.querySelectorAll("#configs input[data-config]"))
    if (i.value !== i.dataset.was) changes[i.dataset.config] = i.value === "" ? null : i.value;
  const nn = $("config-new-name").value.trim();
  if (nn) changes[nn] = $("config-new-value").value === "" ? null : $("config-new-value").value;
  if (!Object.keys(changes).length) return result("config-result", false, "nothing changed");
  try {
    const r = await post("/v1/topics/" + encodeURIComponent(t) + "/configs", changes);
    result("config-result", true, "saved: " + r.altered.join(", "));
    $("config-new-name").value = ""; $("config-new-value").value = "";
    $("configs").tBodies[0].dataset.topic = "";
    setTimeout(refresh, 1200); // the topic view follows the metadata within a second
  } catch (e) { result("config-result", false, e.message); }
}

// ---- groups -----------------------------------------------------------------------------------

function renderGroups() {
  if (!state.groups.length) {
    $("groups").replaceChildren(el("p", { class: "muted" }, "no consumer groups"));
    return;
  }
  $("groups").replaceChildren(...state.groups.map(g => el("div", { class: "group", "data-group": g.group },
    el("h3", {}, g.group, " ", stateBadge(g.state), " ",
       el("span", { class: "muted" }, g.members + " member" + (g.members === 1 ? "" : "s") + " · lag "),
       el("span", { class: "group-lag" }, num(g.lag))),
    el("table", {},
      el("thead", {}, el("tr", {}, el("th", {}, "Topic"), el("th", { class: "num" }, "Partition"),
        el("th", { class: "num" }, "Committed"), el("th", { class: "num" }, "High watermark"), el("th", { class: "num" }, "Lag"))),
      el("tbody", {}, ...g.offsets.map(o => el("tr", { "data-topic": o.topic, "data-partition": o.partition },
        el("td", {}, o.topic), el("td", { class: "num" }, o.partition), el("td", { class: "num" }, num(o.committed)),
        el("td", { class: "num" }, num(o.high_watermark)),
        el("td", { class: "num lag " + (o.lag === 0 ? "lag-zero" : o.lag > 1000 ? "lag-high" : ""),
                   "data-lag": o.lag == null ? "" : o.lag }, num(o.lag)))))))));
}

// ---- messages ---------------------------------------------------------------------------------

function fillBrowseTopics(want) {
  const sel = $("browse-topic");
  const cur = want || sel.value;
  const names = state.topics.filter(t => !t.internal).map(t => t.name);
  if (cur && !names.includes(cur)) names.unshift(cur);
  if (sel.options.length !== names.length || [...sel.options].some((o, i) => o.value !== names[i]))
    sel.replaceChildren(...names.map(n => el("option", { value: n }, n)));
  if (cur) sel.value = cur;
  fillBrowsePartitions();
}

function fillBrowsePartitions(want) {
  const sel = $("browse-partition");
  const cur = want || sel.value || "0";
  const t = state.topics.find(x => x.name === $("browse-topic").value);
  const n = t ? t.partitions : Math.max(1, Number(cur) + 1);
  if (sel.options.length !== n) sel.replaceChildren(...Array.from({ length: n }, (_, i) => el("option", { value: i }, i)));
  sel.value = cur;
}

function b64bytes(s) { const b = atob(s); return Uint8Array.from(b, c => c.charCodeAt(0)); }

function hex(s) {
  return [...b64bytes(s)].map(x => x.toString(16).padStart(2, "0")).join(" ");
}

// The key or value as the chosen format shows it.
function show(text, b64, fmt) {
  if (b64 == null) return el("span", { class: "muted" }, "null");
  if (fmt === "hex" || text == null) return el("pre", { class: "hex" }, hex(b64));
  if (fmt === "json") {
    try { return el("pre", { class: "json" }, JSON.stringify(JSON.parse(text), null, 2)); } catch (e) { /* as text */ }
  }
  return el("pre", {}, text);
}

async function browse(from) {
  const t = $("browse-topic").value, p = $("browse-partition").value;
  if (!t) return result("browse-result", false, "no topic to read");
  const q = new URLSearchParams({ max: $("browse-max").value || "50" });
  const mode = $("browse-from").value, at = $("browse-at").value.trim();
  if (from !== undefined) q.set("offset", from);
  else if (mode === "offset") q.set("offset", at || "0");
  else if (mode === "timestamp") q.set("timestamp", /^\d+$/.test(at) ? at : String(Date.parse(at)));
  try {
    const r = await api("/v1/topics/" + encodeURIComponent(t) + "/partitions/" + p + "/records?" + q);
    const fmt = $("browse-format").value;
    fill($("records").tBodies[0], r.records.map(m => el("tr", { "data-offset": m.offset },
      el("td", { class: "num" }, m.offset), el("td", { class: "mono" }, new Date(m.timestamp).toISOString()),
      el("td", {}, show(m.key, m.key_b64, fmt)), el("td", {}, show(m.value, m.value_b64, fmt)),
      el("td", { class: "mono" }, m.headers.map(h => h.key + "=" + (h.value != null ? h.value : h.value_b64 == null ? "null" : "0x" + hex(h.value_b64).replace(/ /g, ""))).join(", ")))),
      "no records from offset " + r.offset, 5);
    result("browse-result", true, r.records.length + " record(s) from offset " + r.offset + " of " + t + "/" + p +
      " (log start " + r.log_start_offset + ", high watermark " + r.high_watermark + ")");
    state.next = r.next_offset < r.high_watermark ? r.next_offset : null;
    $("browse-next").disabled = state.next == null;
  } catch (e) { result("browse-result", false, e.message); }
}

// ---- create -----------------------------------------------------------------------------------

async function createTopic(ev) {
  ev.preventDefault();
  const body = { name: $("create-name").value.trim() };
  if ($("create-partitions").value) body.partitions = Number($("create-partitions").value);
  if ($("create-rf").value) body.replication_factor = Number($("create-rf").value);
  const configs = {};
  for (const line of $("create-configs").value.split("\n")) {
    const m = line.match(/^\s*([^=\s]+)\s*=\s*(.*?)\s*$/);
    if (m) configs[m[1]] = m[2];
  }
  if (Object.keys(configs).length) body.configs = configs;
  try {
    const r = await post("/v1/topics", body);
    result("create-result", true, "created " + r.created);
    setTimeout(refresh, 1200);
  } catch (e) { result("create-result", false, e.message); }
}

// ---- start ------------------------------------------------------------------------------------

$("config-form").addEventListener("submit", saveConfigs);
$("create-form").addEventListener("submit", createTopic);
$("browse-form").addEventListener("submit", ev => { ev.preventDefault(); browse(); });
$("browse-next").addEventListener("click", () => { if (state.next != null) browse(state.next); });
$("browse-topic").addEventListener("change", () => fillBrowsePartitions("0"));
$("show-internal").addEventListener("change", renderTopics);
window.addEventListener("hashchange", route);
refresh().then(route);
setInterval(refresh, REFRESH_MS);
