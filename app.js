// The race, drawn in the browser: each update from the server (the #feed component's value, JSON,
// render.on_page) carries the markup of the page's elements that changed (status, speed-up, stats,
// summary), which this sets, and only the new tokens and a few chart points, which it appends to
// the panes and draws as the chart's two lines. Model text goes in as text nodes, never as markup.
// A watch's first and last updates come as the component's value; the first names a stream of the
// page's own (page_stream.py) that brings the ones between, read here with an EventSource.
// Runs as gr.HTML's js_on_load: `element`, `props` and `watch` are Gradio's.
const state = { watch: null, points: { ar: [], sp: [] }, shown: { ar: 0, sp: 0 }, drawn: false, markup: {}, source: null };
const pane = (lane) => document.querySelector(`.pane[data-lane="${lane}"]`);
const phone = window.matchMedia("(max-width: 640px)");  // app.css's phone layout

function append(lane, pieces, full) {
  const box = pane(lane);
  if (!box) return;
  // On a phone a pane scrolls (app.css): it follows the newest tokens unless the visitor scrolled up
  // to read. Elsewhere panes grow, and their size is not read: that would lay the page out twice.
  const follow = phone.matches && box.scrollHeight - box.scrollTop - box.clientHeight < 24;
  if (full) {
    if (state.shown[lane] === pieces.length) { box.classList.add("done"); return; }
    box.textContent = "";  // an update was skipped: lay the whole text again
    state.shown[lane] = 0;
  } else if (state.shown[lane] === 0) {
    box.textContent = "";
  }
  const batch = document.createDocumentFragment();
  for (const [text, kind] of pieces) {
    const span = document.createElement("span");
    if (lane === "sp") span.className = `tok tok-${kind}`;
    span.textContent = text;
    batch.appendChild(span);
  }
  box.appendChild(batch);
  if (follow) box.scrollTop = box.scrollHeight;
  state.shown[lane] += pieces.length;
}

function nice(value) {
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((v) => v >= value);
}

function draw() {
  state.drawn = false;
  const svg = document.querySelector("#race-chart svg");
  if (!svg) return;
  const [w, h, left, right, top, bottom] = [380, 190, 48, 10, 10, 32];  // left: room for "tokens" beside "512"
  const pw = w - left - right, ph = h - top - bottom;
  const all = [...state.points.ar, ...state.points.sp];
  const xMax = all.length ? nice(Math.max(1e-3, ...all.map((p) => p[0]))) : 1;  // before a race: an empty frame
  const yMax = Math.max(state.max || 1, ...all.map((p) => p[1]));
  const at = (t, n) => `${(left + (pw * t) / xMax).toFixed(1)},${(top + ph * (1 - n / yMax)).toFixed(1)}`;
  let out = "";
  for (const f of [0, 0.5, 1]) {
    const x = left + pw * f, y = top + ph * (1 - f);
    const tick = xMax * f >= 10 || f === 0 ? (xMax * f).toFixed(0) : String(+(xMax * f).toPrecision(3));
    out += `<line x1="${x}" y1="${top}" x2="${x}" y2="${top + ph}" class="grid"/>`;
    out += `<line x1="${left}" y1="${y}" x2="${left + pw}" y2="${y}" class="grid"/>`;
    out += `<text x="${x}" y="${top + ph + 14}" text-anchor="middle">${tick}</text>`;
    out += `<text x="${left - 5}" y="${y + 4}" text-anchor="end">${Math.round(yMax * f)}</text>`;
  }
  for (const lane of ["ar", "sp"]) {
    const points = [[0, 0], ...state.points[lane]].map(([t, n]) => at(t, n)).join(" ");
    out += `<polyline points="${points}" fill="none" stroke="${svg.dataset[lane]}" stroke-width="2.5" stroke-linejoin="round"/>`;
  }
  out += `<text x="${left + pw / 2}" y="${h - 3}" text-anchor="middle" class="axis">compute time (s)</text>`;
  out += `<text x="11" y="${top + ph / 2}" text-anchor="middle" class="axis" transform="rotate(-90 11 ${top + ph / 2})">tokens</text>`;
  svg.innerHTML = out;
  const [ar, sp] = [state.points.ar.at(-1), state.points.sp.at(-1)];
  if (ar && sp) {
    svg.setAttribute("aria-label", `Tokens produced against compute time: autoregressive ${ar[1]} tokens in ` +
      `${ar[0].toFixed(2)} s, speculative ${sp[1]} in ${sp[0].toFixed(2)} s`);
  }
}

// An element's markup goes where Gradio rendered its first value; unchanged, it is left alone.
function set(id, markup) {
  if (state.markup[id] === markup) return;
  const box = document.querySelector(`#${id} .html-container > div`);
  if (!box) return;
  box.innerHTML = markup;
  state.markup[id] = markup;
}

function apply(text) {
  let update;
  try { update = JSON.parse(text); } catch (error) { return; }
  for (const [id, markup] of Object.entries(update.html || {})) set(id, markup);
  if (update.feed) tokens(update.feed);
  return update;
}

// Gradio's value: a watch's first update (which names its stream) or its last (which lays everything again).
function show() {
  if (!props.value) return;
  listen(null);  // what the stream had not brought yet, the last update has
  const update = apply(props.value);
  if (update && update.stream) listen(update.stream);
}

function listen(token) {
  if (state.source) state.source.close();
  state.source = null;
  if (!token) return;
  const source = state.source = new EventSource(new URL(`race_stream/${token}`, document.baseURI));
  source.onmessage = (event) => { if (state.source === source) apply(event.data); };
  source.onerror = () => { source.close(); if (state.source === source) state.source = null; };  // it ended
}

function tokens(update) {
  if (update.reset || update.watch !== state.watch) {
    state.watch = update.watch;
    state.max = update.max;
    state.points = { ar: [], sp: [] };
    state.shown = { ar: 0, sp: 0 };
  }
  for (const lane of ["ar", "sp"]) {
    const part = update.lanes[lane];
    if (update.full) state.points[lane] = [];
    state.points[lane].push(...part.points);
    append(lane, part.pieces, update.full);
    const box = pane(lane);
    if (box) box.classList.toggle("running", !part.done);
  }
  if (!state.drawn) { state.drawn = true; requestAnimationFrame(draw); }
}

watch("value", show);
// Before the first race the chart shows its empty frame, up to the tokens the slider asks for,
// once Gradio has put the chart and the slider on the page (this may run before they are there).
function frame(tries) {
  const slider = document.querySelector("#max-new-tokens input[type=number]");
  if (state.watch !== null) return;
  if (!slider || !document.querySelector("#race-chart svg")) { if (tries > 0) setTimeout(frame, 250, tries - 1); return; }
  state.max = Number(slider.value) || 1;
  draw();
}
frame(40);
