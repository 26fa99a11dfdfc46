"use strict";
// judge-mcp views: draws a tool's result with DOM calls only (textContent, never innerHTML): caller text is
// shown, never parsed as markup. No request leaves the page (the page's CSP forbids it).
(function () {
  var SVG = "http://www.w3.org/2000/svg";

  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] === null || attrs[k] === undefined) continue;
        if (k === "class") el.className = attrs[k];
        else if (k === "text") el.textContent = String(attrs[k]);
        else if (k === "onclick") el.addEventListener("click", attrs[k]);
        else el.setAttribute(k, String(attrs[k]));
      }
    }
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }
  function add(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(el, c); }); return; }
    el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  function s(tag, attrs) {
    var el = document.createElementNS(SVG, tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) {
      if (k === "text") el.textContent = String(attrs[k]); else el.setAttribute(k, String(attrs[k]));
    }
    for (var i = 2; i < arguments.length; i++) if (arguments[i]) el.appendChild(arguments[i]);
    return el;
  }
  function num(x, digits) {
    if (x === null || x === undefined || x === "") return "–";
    if (typeof x !== "number") return String(x);
    return Number.isInteger(x) ? String(x) : x.toFixed(digits === undefined ? 1 : digits);
  }
  function pct(x) { return typeof x === "number" ? (x * 100).toFixed(1) + "%" : "–"; }
  function money(x) { return typeof x === "number" ? "$" + x.toFixed(x < 0.01 && x > 0 ? 4 : 2) : "–"; }
  function json(x) { try { return JSON.stringify(x, null, 2); } catch (e) { return String(x); } }
  function badge(text, kind) { return h("span", { "class": "badge" + (kind ? " " + kind : ""), text: text }); }
  function card(label, value, kind) {
    return h("div", { "class": "card" }, h("div", { "class": "label", text: label }),
      h("div", { "class": "value" + (kind ? " " + kind : ""), text: value }));
  }
  function bar(score, max) {
    var span = h("span");
    var w = typeof score === "number" ? Math.max(0, Math.min(100, 100 * score / (max || 100))) : 0;
    span.style.width = w + "%";
    return h("div", { "class": "bar" }, span);
  }
  function details(label, value) {
    return h("details", null, h("summary", { text: label }), h("pre", { text: typeof value === "string" ? value : json(value) }));
  }
  function table(headers, rows, numeric) {
    numeric = numeric || [];
    return h("table", null,
      h("thead", null, h("tr", null, headers.map(function (x, i) {
        return h("th", { "class": numeric.indexOf(i) >= 0 ? "num" : null, text: x });
      }))),
      rows instanceof Element && rows.tagName === "TBODY" ? rows : h("tbody", null, rows));
  }
  function cell(value, numeric) { return h("td", { "class": numeric ? "num" : null }, value); }
  function when(iso) {
    if (!iso) return "";
    var d = new Date(iso);
    return isNaN(d.getTime()) ? String(iso) : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC");
  }
  function errorBox(text) { return h("div", { "class": "error", text: text }); }

  // A line chart (one or more series of numbers over 1..n), drawn as SVG.
  function lineChart(series, opts) {
    opts = opts || {};
    var W = 640, H = 220, L = 40, R = 12, T = 14, B = 28;
    var n = 0, lo = opts.min === undefined ? Infinity : opts.min, hi = opts.max === undefined ? -Infinity : opts.max;
    series.forEach(function (sr) {
      n = Math.max(n, sr.values.length);
      sr.values.forEach(function (v) { if (typeof v === "number") { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
    });
    if (!isFinite(lo)) { lo = 0; hi = 100; }
    if (hi === lo) { hi = lo + 1; }
    var x = function (i) { return L + (n <= 1 ? (W - L - R) / 2 : i * (W - L - R) / (n - 1)); };
    var y = function (v) { return T + (hi - v) * (H - T - B) / (hi - lo); };
    var svg = s("svg", { "class": "chart", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": opts.label || "chart" });
    [lo, (lo + hi) / 2, hi].forEach(function (v) {
      svg.appendChild(s("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#e4e7ec" }));
      svg.appendChild(s("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", text: num(v) }));
    });
    for (var i = 0; i < n; i++) svg.appendChild(s("text", { x: x(i), y: H - 8, "text-anchor": "middle", text: String(i + 1) }));
    if (opts.mark !== undefined && opts.mark !== null && opts.mark < n) {
      svg.appendChild(s("line", { x1: x(opts.mark), x2: x(opts.mark), y1: T, y2: H - B, stroke: "#e67700", "stroke-dasharray": "4 3" }));
    }
    series.forEach(function (sr) {
      var pts = [];
      sr.values.forEach(function (v, i) { if (typeof v === "number") pts.push(x(i) + "," + y(v)); });
      if (pts.length > 1) svg.appendChild(s("polyline", { points: pts.join(" "), fill: "none", stroke: sr.color, "stroke-width": 2.5 }));
      sr.values.forEach(function (v, i) {
        if (typeof v === "number") svg.appendChild(s("circle", { cx: x(i), cy: y(v), r: 3.5, fill: sr.color },
          s("title", { text: sr.name + " " + (i + 1) + ": " + num(v) })));
      });
    });
    var legend = h("p", { "class": "meta" }, series.map(function (sr) {
      var dot = h("span", { text: "● " }); dot.style.color = sr.color;
      return [dot, sr.name + "   "];
    }), opts.markLabel || "");
    return h("div", null, svg, legend);
  }

  // ---- views -------------------------------------------------------------------------------------------------

  function renderEval(r) {
    var sm = r.summary || {};
    var items = r.items || [];
    var out = [h("h1", { text: "judge-mcp eval · " + (r.tool || "?") }),
      h("p", { "class": "meta", text: "dataset " + (r.dataset || "?") + (r.suite ? " · suite " + r.suite : "") +
        " · " + when(r.started_at) + (r.finished_at ? " → " + when(r.finished_at) : "") })];
    out.push(h("div", { "class": "cards" },
      card("result", sm.ok ? "passed" : "failed", sm.ok ? "good" : "bad"),
      card("items", num(sm.items)), card("passed", num(sm.passed)), card("failed", num(sm.failed)),
      card("errors", num(sm.errors)),
      card("pass rate", pct(sm.pass_rate) + (typeof sm.min_pass_rate === "number" ? " / " + pct(sm.min_pass_rate) : "")),
      card("cost", money(sm.cost_usd)), card("model requests", num(sm.model_requests))));
    var filter = "all";
    var body = h("tbody");
    function status(it) { return it.is_error ? "error" : it.passed ? "passed" : "failed"; }
    function draw() {
      body.textContent = "";
      items.forEach(function (it) {
        var st = status(it);
        if (filter !== "all" && filter !== st) return;
        var checks = (it.assertions || []).map(function (a) {
          return h("div", null, badge(a.passed ? "✓" : "✗", a.passed ? "good" : "bad"), " ", a.name,
            a.passed ? null : h("span", { "class": "muted", text: " expected " + json(a.expected) + ", got " + json(a.actual) }));
        });
        body.appendChild(h("tr", { "class": st === "passed" ? null : "fail" },
          cell(String(it.index)), cell(it.id === undefined || it.id === null ? "" : String(it.id)),
          cell(badge(st, st === "passed" ? "good" : st === "error" ? "warn" : "bad")),
          cell([checks, it.error ? errorBox(it.error) : null,
            details("arguments", it.arguments), it.result !== undefined && it.result !== null ? details("result", it.result) : null]),
          cell(it.cached ? "yes" : "", false), cell(money(it.cost_usd), true)));
      });
    }
    var buttons = ["all", "failed", "error", "passed"].map(function (f) {
      var b = h("button", { text: f, "class": f === filter ? "on" : null, onclick: function () {
        filter = f; buttons.forEach(function (x) { x.className = x.textContent === f ? "on" : ""; }); draw();
      } });
      return b;
    });
    out.push(h("h2", { text: "items" }), h("div", { "class": "toolbar" }, h("span", { "class": "muted", text: "show" }), buttons));
    out.push(table(["#", "id", "status", "assertions", "cached", "cost"], body, [5]));
    draw();
    return out;
  }

  function renderJson(data) { return [h("pre", { text: json(data) })]; }

  var VIEWS = { eval: renderEval };

  function show(view, data, isError) {
    var main = document.getElementById("view");
    main.textContent = "";
    if (isError) { add(main, [h("h1", { text: "The tool reported an error" }), errorBox(data)]); return; }
    var render = VIEWS[view] || renderJson;
    try { add(main, render(data)); }
    catch (e) { add(main, [errorBox("This view could not draw the result: " + e), renderJson(data)]); }
  }

  // ---- MCP Apps (SEP-1865): the host sends the tool's result by postMessage ----------------------------------
  function appMode(view) {
    var nextId = 1, host = window.parent;
    function send(msg) { host.postMessage(msg, "*"); }
    function textOf(result) {
      return (result.content || []).filter(function (c) { return c && c.type === "text"; })
        .map(function (c) { return c.text; }).join("\n");
    }
    function resized() {
      send({ jsonrpc: "2.0", method: "ui/notifications/size-changed",
        params: { width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight } });
    }
    window.addEventListener("message", function (ev) {
      if (ev.source !== host) return;
      var msg = ev.data;
      if (!msg || msg.jsonrpc !== "2.0") return;
      if (msg.method === "ui/notifications/tool-result") {
        var result = msg.params || {};
        if (result.isError) show(view, textOf(result) || "the tool failed", true);
        else if (result.structuredContent) show(view, result.structuredContent, false);
        else show(view, textOf(result), true);
        resized();
      } else if (msg.id === 1 && msg.result !== undefined) {
        send({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} });
      }
    });
    send({ jsonrpc: "2.0", id: nextId++, method: "ui/initialize", params: {
      protocolVersion: "2026-01-26", appInfo: { name: "judge-mcp " + view, version: "1" }, appCapabilities: {} } });
  }

  var view = document.body.getAttribute("data-view");
  var block = document.getElementById("view-data");
  if (block) show(view, JSON.parse(block.textContent), false);
  else if (window.parent !== window) appMode(view);
})();
