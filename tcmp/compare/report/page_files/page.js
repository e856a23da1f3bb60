"use strict";
// tcmp's HTML report: reads the payload tcmp/compare/report/page.py wrote (its docstring lists the fields), then draws the
// error along the network (plotly.js), the rows (DataTables with Scroller: only the rows in view are in the DOM)
// and, for the selected op, its producers and consumers in the graph with their verdicts.
(function () {
  const $ = (id) => document.getElementById(id);
  const FILL = { r: "#d62728", y: "#e6b800", g: "#2ca02c" };
  const SCALE = { codes: { r: 0, y: 1, g: 2 }, colorscale: [[0, FILL.r], [0.5, FILL.y], [1, FILL.g]], cmin: 0, cmax: 2 };
  const tokenColour = (k) => `hsl(${Math.round((210 + k * 137.508) % 360)}, 70%, 38%)`; // golden angle: neighbours differ; blue first, not a verdict's red
  const DRAWN_POINTS = 10000; // tokens past this many points start hidden (a click on the legend draws them)
  const DEPTH = 3; // neighbourhood: steps up and down the graph
  const WIDTH = 12; // nodes listed per step
  const BASE64 = "application/x-tcmp-base64"; // page_assets.BASE64_TYPE
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  // plotly's text is its own small markup: tags and the entities &amp; &lt; &gt; (not &quot;, shown as it is)
  const plotText = (s) => String(s).replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]);

  function bytesOf(id) {
    const text = atob($(id).textContent);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return bytes;
  }

  // The rows are inflated in a worker, while plotly.js (the script after this one) starts on the main thread.
  const INFLATE = `onmessage = async (event) => {
    const text = atob(event.data);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    const json = new Uint8Array(await new Response(stream).arrayBuffer());
    postMessage(json, [json.buffer]);
  };`;

  async function readPayload() {
    if (typeof DecompressionStream === "undefined") {
      throw new Error("this browser cannot inflate the rows (no DecompressionStream: Chrome 80, Firefox 113, " +
        "Safari 16.4 or newer have it); the CSV beside this page holds the same rows");
    }
    const url = URL.createObjectURL(new Blob([INFLATE], { type: "text/javascript" }));
    const worker = new Worker(url);
    try {
      const json = await new Promise((done, failed) => {
        worker.onmessage = (event) => done(event.data);
        worker.onerror = (event) => failed(new Error("the rows could not be inflated: " + event.message));
        worker.postMessage($("tcmp-data").textContent);
      });
      return JSON.parse(new TextDecoder().decode(json));
    } finally {
      worker.terminate();
      URL.revokeObjectURL(url);
    }
  }

  async function loadDataTables() {
    const url = URL.createObjectURL(new Blob([bytesOf("lib-datatables")], { type: "text/javascript" }));
    try {
      const bundle = await import(url);
      // The bundle's Select extension joins every table (this one selects nothing): at each draw it would walk
      // all 100,000 x 33 cells to count the selected ones.
      bundle.jQuery(document).off(".dtSelect");
      return bundle.default;
    } finally {
      URL.revokeObjectURL(url);
    }
  }

  function loadPlotly() { // its text as it is, or in base64 where it holds what would end its block
    const block = $("lib-plotly");
    const script = document.createElement("script");
    script.textContent = block.type === BASE64 ? new TextDecoder().decode(bytesOf("lib-plotly")) : block.textContent;
    document.head.append(script);
    return window.Plotly;
  }

  function num(cell) { // a metric cell as a number: NaN for N/A and NaN, ±Infinity for inf
    if (cell === "inf") return Infinity;
    if (cell === "-inf") return -Infinity;
    return cell === "" || cell === "N/A" ? NaN : Number(cell);
  }

  function model(data) {
    const col = Object.fromEntries(data.columns.map((name, i) => [name, i]));
    const n = data.rows.length;
    const token = new Int32Array(n);
    const byOp = new Map(); // "token:node" -> its rows
    for (let i = 0; i < n; i++) {
      const row = data.rows[i];
      for (let j = 0; j < row.length; j++) if (typeof row[j] === "number") row[j] = data.words[j][row[j]];
      token[i] = Number(data.rows[i][col.Token]);
      const key = token[i] + ":" + data.node[i];
      if (!byOp.has(key)) byOp.set(key, []);
      byOp.get(key).push(i);
    }
    const consumers = data.nodes.names.map(() => []);
    data.nodes.producers.forEach((producers, v) => producers.forEach((u) => consumers[u].push(v)));
    return Object.assign(data, { col, token, byOp, consumers, selected: null, filters: {} });
  }

  // --- the chart ------------------------------------------------------------------------------------------

  function metrics(m) {
    const t = m.meta.thresholds;
    const cell = (i, name) => m.rows[i][m.col[name]];
    if (m.meta.mode === "tensor") {
      return [
        // from the unrounded cosine (`dist`), not the cell: near 1 its 8 digits would draw the noise as steps
        { label: "1 − Cosine", value: (i) => m.dist[i] ?? NaN, limit: 1 - t.cosine, log: true,
          shown: ["Cosine", "MaxRelativeErr", "MaxAbsErr"] },
        { label: "MaxRelativeErr", value: (i) => num(cell(i, "MaxRelativeErr")), limit: t.max_relative_err,
          log: true, shown: ["Cosine", "MaxRelativeErr", "MaxAbsErr"] },
      ];
    }
    if (m.meta.mode === "statistics") {
      return [{ label: "NormRelativeErr", value: (i) => num(cell(i, "NormRelativeErr")), limit: t.stats_relative_err,
        log: true, shown: ["NormRelativeErr", "MaxRelativeErr", "MinRelativeErr"] }];
    }
    const crc = { PASS: 0, FAIL: 1 };
    return [{ label: "CRC-32", value: (i) => crc[cell(i, "Result")] ?? 0.5, limit: null, log: false,
      shown: ["NPU MD5", "BENCH MD5"] }];
  }

  // On a log axis 0 has no place: values <= 0 are drawn at a floor below the smallest, NaN/inf/N/A at a ceiling
  // above the largest (the hover says what the value is); `bands` are the levels used, to label them.
  function placed(values, metric) {
    if (!metric.log) return { y: values, bands: [] };
    let low = Infinity;
    let high = metric.limit;
    for (const v of values) {
      if (v > 0 && v < Infinity) {
        low = Math.min(low, v);
        high = Math.max(high, v);
      }
    }
    const floor = Math.min(low, metric.limit) / 10;
    const ceiling = high * 10;
    const level = (v) => (v > 0 && v < Infinity ? v : v <= 0 && v > -Infinity ? floor : ceiling);
    const y = values.map(level);
    const bands = [];
    if (y.includes(floor)) bands.push([floor, "0"]);
    if (y.includes(ceiling)) bands.push([ceiling, "NaN, inf or N/A"]);
    return { y, bands };
  }

  function hover(m, i, metric) {
    const cell = (name) => m.rows[i][m.col[name]];
    const message = cell("Err_message");
    return [
      `<b>${plotText(cell("API Name"))}</b>`,
      metric.shown.map((name) => `${name}: ${plotText(cell(name))}`).join("  "),
      `${cell("Result")} / Accuracy Reached: ${cell("Accuracy Reached or Not")}`,
      message ? plotText(message.length > 160 ? message.slice(0, 160) + "…" : message) : "",
    ].filter(Boolean).join("<br>");
  }

  function chart(m, metric) {
    const outputs = [];
    for (let i = 0; i < m.rows.length; i++) if (m.out[i] === "1") outputs.push(i);
    const { y, bands } = placed(outputs.map(metric.value), metric);
    const yOf = new Map(outputs.map((row, k) => [row, y[k]]));
    // more output rows than the writer's limit are drawn with WebGL, where the browser has it (the CSP allows it)
    const webgl = outputs.length > m.meta.svg_points && !!document.createElement("canvas").getContext("webgl");
    const type = webgl ? "scattergl" : "scatter";
    const points = (rows) => ({ x: rows.map((i) => m.x[i]), y: rows.map((i) => yOf.get(i)), customdata: rows });
    const tokens = new Map();
    for (const i of outputs) {
      if (!tokens.has(m.token[i])) tokens.set(m.token[i], []);
      tokens.get(m.token[i]).push(i);
    }
    let drawn = 0; // points of the tokens drawn so far: the first token always is
    const hidden = [];
    const only = $("chart-token").value === "" ? null : Number($("chart-token").value); // one token shown
    const visible = (token, rows) => {
      if (only !== null) return token === only ? true : "legendonly";
      drawn += rows.length;
      if (drawn === rows.length || drawn <= DRAWN_POINTS) return true;
      hidden.push(token);
      return "legendonly";
    };
    // a token: its line and the rims of its points in its own colour; a point's fill is its row's verdict
    const traces = [...tokens].map(([token, rows], k) => ({
      visible: visible(token, rows), type, mode: "lines+markers", name: `token ${token}`, ...points(rows), hoverinfo: "text",
      text: rows.map((i) => hover(m, i, metric)), line: { width: 1.5, color: tokenColour(k) },
      marker: { size: 8, color: rows.map((i) => SCALE.codes[m.colour[i]]), colorscale: SCALE.colorscale,
        cmin: SCALE.cmin, cmax: SCALE.cmax, line: { width: 1.5, color: tokenColour(k) } },
    }));
    const marked = m.meta.divergences.filter((d) => d.node !== null);
    const markedRows = marked.flatMap((d) => (m.byOp.get(d.token + ":" + d.node) || []).filter((i) => yOf.has(i)));
    traces.push({ type, mode: "markers", name: "first divergence", ...points(markedRows), hoverinfo: "text",
      text: markedRows.map((i) => `first divergence, token ${m.token[i]}<br>${hover(m, i, metric)}`),
      marker: { symbol: "diamond-open", size: 17, color: "#000", line: { width: 2 } } });
    traces.push({ type, mode: "markers", name: "selected", x: [], y: [], customdata: [], hoverinfo: "skip",
      marker: { symbol: "circle-open", size: 21, color: "#1f77b4", line: { width: 3 } } });
    const annotations = [];
    const labelled = new Set();
    for (const d of marked) {
      const row = markedRows.find((i) => m.token[i] === d.token && m.node[i] === d.node);
      if (row === undefined || labelled.has(d.node) || labelled.size >= 8) continue;
      labelled.add(d.node);
      annotations.push({ x: m.x[row], y: metric.log ? Math.log10(yOf.get(row)) : yOf.get(row), ax: 30, ay: -40,
        text: `first divergence: ${plotText(d.op)}`, showarrow: true, arrowhead: 2, bgcolor: "rgba(255,255,255,0.85)" });
    }
    const shapes = [];
    if (metric.limit !== null) {
      shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, y0: metric.limit, y1: metric.limit,
        line: { dash: "dash", color: "#555", width: 1 } });
      annotations.push({ xref: "paper", x: 1, xanchor: "right", y: Math.log10(metric.limit), yanchor: "bottom",
        text: `PASS limit ${+metric.limit.toPrecision(6)}`, showarrow: false, font: { color: "#555" } });
    }
    for (const [level, label] of bands) {
      shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, y0: level, y1: level,
        line: { dash: "dot", color: "#aaa", width: 1 } });
      annotations.push({ xref: "paper", x: 0, xanchor: "left", y: Math.log10(level), yanchor: "bottom",
        text: label, showarrow: false, font: { color: "#888", size: 11 } });
    }
    const yaxis = metric.log
      ? { type: "log", title: { text: metric.label }, exponentformat: "power" }
      : { type: "linear", title: { text: metric.label }, tickvals: [0, 0.5, 1], ticktext: ["match", "N/A", "mismatch"],
        range: [-0.2, 1.2] };
    const layout = { margin: { l: 70, r: 20, t: 20, b: 50 }, hovermode: "closest", yaxis, shapes, annotations,
      xaxis: { title: { text: "op in execution order (per token)" }, zeroline: false }, legend: { orientation: "h" } };
    return { traces, layout, yOf, type, hidden };
  }

  function drawChart(m, metric) {
    const built = chart(m, metric);
    m.chart = Object.assign(built, { metric });
    $("chart-note").textContent = (built.hidden.length
      ? `${built.hidden.length} of ${built.traces.length - 2} tokens start hidden to keep the page quick ` +
        "(their points are in the chart). "
      : "") + "A click on a token in the legend shows or hides it, a double click shows it alone.";
    return m.Plotly.react($("chart"), built.traces, built.layout, { displaylogo: false, responsive: true });
  }

  function chartControls(m) {
    const tokens = [...new Set(m.token)].sort((a, b) => a - b);
    $("chart-token").insertAdjacentHTML("beforeend", tokens.map((t) => `<option value="${t}">${t}</option>`).join(""));
    $("chart-token").addEventListener("change", async () => {
      if (!m.chart) return; // the first drawing reads the choice itself
      await drawChart(m, m.chart.metric);
      await markSelected(m);
    });
    const choices = metrics(m);
    if (choices.length < 2) return;
    $("chart-controls").innerHTML = "y: " + choices.map((c, k) =>
      `<label><input type="radio" name="metric" value="${k}"${k ? "" : " checked"}> ${esc(c.label)}</label>`).join("");
    $("chart-controls").addEventListener("change", async (event) => {
      await drawChart(m, choices[Number(event.target.value)]);
      await markSelected(m);
    });
  }

  function markSelected(m) {
    if (!m.chart) return Promise.resolve(); // not drawn yet
    const rows = m.selected ? (m.byOp.get(m.selected.token + ":" + m.selected.node) || []) : [];
    const shown = rows.filter((i) => m.chart.yOf.has(i));
    const selected = m.chart.traces.length - 1;
    return m.Plotly.restyle($("chart"), { x: [shown.map((i) => m.x[i])], y: [shown.map((i) => m.chart.yOf.get(i))],
      customdata: [shown] }, [selected]);
  }

  // --- the table ------------------------------------------------------------------------------------------

  function keep(m, i) {
    const f = m.filters;
    return (!f.result || m.rows[i][m.col.Result] === f.result) && (!f.colour || m.colour[i] === f.colour) &&
      (!f.type || m.nodes.types[m.node[i]] === f.type) &&
      (!m.selected || (m.token[i] === m.selected.token && m.node[i] === m.selected.node)) &&
      (!f.text || lowered(m, i).includes(f.text));
  }

  function lowered(m, i) { // a row's cells as one lower-case string, made at the first free-text search
    if (!m.lowered) m.lowered = new Array(m.rows.length);
    if (m.lowered[i] === undefined) m.lowered[i] = m.rows[i].join("\u0001").toLowerCase();
    return m.lowered[i];
  }

  // DataTables' own search would first turn all 100,000 x 33 cells into search strings; every filter here is
  // one function instead (`keep`), so no column is "searchable" for DataTables.
  function table(m, DataTable) {
    const numeric = new Set(m.meta.numeric);
    DataTable.ext.type.order["tcmp-num-pre"] = (cell) => { // N/A first, NaN with inf last
      const v = num(cell);
      return Number.isNaN(v) ? (cell === "NaN" ? Infinity : -Infinity) : v;
    };
    DataTable.ext.search.push((_settings, _cells, i) => keep(m, i));
    const render = (cell, type) => (type === "display" ? esc(cell) : cell);
    // shown in the writer's order (`meta.shown`: API Name, then what the verdict comes from), API Name frozen at
    // the left edge when the table scrolls sideways; the rows keep the CSV's order of cells
    const rows = new DataTable($("rows"), {
      data: m.rows,
      columns: m.meta.shown.map((i) => ({ title: esc(m.columns[i]), data: i,
        type: numeric.has(m.columns[i]) ? "tcmp-num" : "string", render, searchable: false })),
      fixedColumns: { start: 1 },
      deferRender: true, scroller: { displayBuffer: 4 }, // the rows in the DOM: four screens' worth
      scrollY: "60vh", scrollX: true, order: [],
      autoWidth: false, layout: { topStart: "info", topEnd: null, bottomStart: null, bottomEnd: null },
      createdRow: (tr, _cells, i) => {
        tr.className = "c-" + m.colour[i];
        for (const td of tr.cells) td.title = td.textContent;
      },
    });
    const types = [...new Set(m.nodes.types.slice(0, m.nodes.table))].sort();
    $("f-type").insertAdjacentHTML("beforeend", types.map((t) => `<option>${esc(t)}</option>`).join(""));
    for (const [id, key] of [["f-result", "result"], ["f-colour", "colour"], ["f-type", "type"]]) {
      $(id).addEventListener("change", () => {
        m.filters[key] = $(id).value;
        rows.draw();
      });
    }
    let typing;
    $("f-text").addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => {
        m.filters.text = $("f-text").value.toLowerCase();
        rows.draw();
      }, 250);
    });
    return rows;
  }

  // --- the neighbourhood ----------------------------------------------------------------------------------

  function verdict(m, token, node) { // of an op in a token: its output rows' results, its worst colour
    const rows = m.byOp.get(token + ":" + node);
    if (!rows) return null;
    const outputs = rows.filter((i) => m.out[i] === "1");
    const judged = outputs.length ? outputs : rows;
    const counts = ["FAIL", "PASS", "N/A"].map((r) => [r, judged.filter((i) => m.rows[i][m.col.Result] === r).length]);
    return { rows, colour: ["r", "y", "g"].find((c) => judged.some((i) => m.colour[i] === c)),
      text: counts.filter(([, k]) => k).map(([r, k]) => `${k} ${r}`).join(", ") + (outputs.length ? "" : " (inputs)") };
  }

  function steps(start, next) { // nodes 1..DEPTH steps away, nearest first
    const seen = new Set([start]);
    const layers = [];
    let frontier = [start];
    for (let d = 0; d < DEPTH && frontier.length; d++) {
      const layer = [];
      for (const v of frontier) {
        for (const u of next(v)) {
          if (!seen.has(u)) {
            seen.add(u);
            layer.push(u);
          }
        }
      }
      if (layer.length) layers.push(layer);
      frontier = layer;
    }
    return layers;
  }

  function showNeighbourhood(m) {
    const { token, node } = m.selected;
    const n = m.nodes;
    const item = (v) => {
      const found = verdict(m, token, v);
      const name = found
        ? `<a href="#" class="select c-${found.colour}" data-token="${token}" data-node="${v}">${esc(n.names[v])}</a>`
        : `<span class="norows">${esc(n.names[v])}</span>`;
      return `<li class="c-${found ? found.colour : ""}">${name} <span class="type">${esc(n.types[v])}</span> ` +
        `${found ? found.text : v < n.table ? "no rows in this token" : "no rows"}</li>`;
    };
    const column = (title, layers) => `<div><h3>${title}</h3>` + (layers.length ? layers.map((layer, d) =>
      `<h4>${d + 1} step${d ? "s" : ""} away</h4><ul>${layer.slice(0, WIDTH).map(item).join("")}` +
      `${layer.length > WIDTH ? `<li>… ${layer.length - WIDTH} more</li>` : ""}</ul>`).join("") : "<p>none</p>") + "</div>";
    const own = verdict(m, token, node);
    const rows = own.rows.map((i) => `<li class="c-${m.colour[i]}">${esc(m.rows[i][m.col["API Name"]])}: ` +
      `<b>${m.rows[i][m.col.Result]}</b></li>`).join("");
    const missing = n.found[node] ? "" : '<p class="note">not found in the graph file (an op GE inserted, or a name ' +
      "the graph does not hold): no edges to show</p>";
    $("hood").innerHTML = column("producers (up)", steps(node, (v) => n.producers[v])) +
      `<div class="self"><h3>${esc(n.names[node])} <span class="type">${esc(n.types[node])}</span></h3>` +
      `<p>token ${token}: ${own.text}</p>${missing}<ul>${rows}</ul></div>` +
      column("consumers (down)", steps(node, (v) => m.consumers[v]));
  }

  function select(m, token, node) {
    m.selected = token === null ? null : { token, node };
    $("f-op").hidden = !m.selected;
    if (m.selected) {
      $("f-op").querySelector("b").textContent = `${m.nodes.names[node]} (token ${token})`;
      showNeighbourhood(m);
    }
    m.table.draw();
    return markSelected(m);
  }

  const painted = () => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));

  // The table first, then the chart: plotly.js takes about a second to start, so it is run only once the rows
  // show (its text is inline, in a block that does not run by itself).
  async function main() {
    const phases = { start: performance.now() }; // ms since navigation start, when each step was done
    const parsed = new Promise((done) => document.addEventListener("DOMContentLoaded", done)); // plotly's block too
    const [data, DataTable] = await Promise.all([readPayload(), loadDataTables()]);
    phases.payload = performance.now();
    const m = model(data);
    m.table = table(m, DataTable);
    m.table.table().body().addEventListener("click", (event) => {
      const tr = event.target.closest("tr");
      const i = tr ? m.table.row(tr).index() : undefined;
      if (i !== undefined) select(m, m.token[i], m.node[i]);
    });
    document.addEventListener("click", (event) => {
      const link = event.target.closest("a.select");
      if (!link) return;
      event.preventDefault();
      select(m, Number(link.dataset.token), Number(link.dataset.node));
      $("hood-section").scrollIntoView();
    });
    $("f-op-clear").addEventListener("click", () => select(m, null, null));
    await painted();
    phases.table = performance.now();
    $("status").textContent = "Drawing the chart…";
    await parsed;
    m.Plotly = loadPlotly();
    chartControls(m);
    await drawChart(m, metrics(m)[0]);
    $("chart").on("plotly_click", (event) => {
      const point = event.points.find((p) => typeof p.customdata === "number");
      if (point) select(m, m.token[point.customdata], m.node[point.customdata]);
    });
    await markSelected(m); // a selection made before the chart was there
    await painted();
    phases.chart = performance.now();
    // for tests and benchmarks: what the page holds, and when the rows (firstRender) and the chart were drawn
    window.tcmpReport = { model: m, table: m.table, select: (token, node) => select(m, token, node), phases,
      firstRender: phases.table };
    document.body.dataset.state = "ready";
  }

  main().catch((error) => {
    $("status").textContent = "The page could not be drawn: " + error.message;
    document.body.dataset.state = "error";
    throw error;
  });
})();
