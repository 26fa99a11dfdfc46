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

  // An image given to the tool, shown only when the page already holds it (a data: URI or raw base64); a path
  // names a file on the server's machine, which the page never fetches.
  var MAGIC = { "iVBORw0KGgo": "image/png", "/9j/": "image/jpeg", "R0lGOD": "image/gif", "UklGR": "image/webp" };
  function imageSrc(value) {
    if (typeof value !== "string") return null;
    if (/^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+\/=\s]+$/.test(value)) return value;
    for (var m in MAGIC) if (value.indexOf(m) === 0 && /^[A-Za-z0-9+\/=\s]+$/.test(value)) return "data:" + MAGIC[m] + ";base64," + value;
    return null;
  }
  function imageName(value, i) {
    if (typeof value !== "string" || imageSrc(value)) return "image " + (i + 1);
    var parts = value.split(/[\\\/]/);
    return "image " + (i + 1) + " · " + parts[parts.length - 1];
  }
  function picture(value, i) {
    var src = imageSrc(value);
    return src ? h("img", { src: src, alt: imageName(value, i) }) : null;
  }
  function severityKind(sev) { return sev === "critical" || sev === "major" ? "bad" : sev === "minor" ? "warn" : null; }

  function judgeBlock(e) {
    var ok = e.status === "ok" || e.status === "fallback";
    var out = h("div", { "class": "judge" },
      h("div", { "class": "head" }, h("b", { text: e.agent_name || e.agent_id || "judge" }),
        ok ? h("span", { "class": "score", text: num(e.score) }) : badge(e.status || "failed", "bad")),
      ok ? bar(e.score, 100) : null,
      e.status === "fallback" ? h("p", { "class": "muted", text: "fallback score (the judge did not score)" }) : null,
      e.model ? h("p", { "class": "meta", text: e.model }) : null);
    if (e.top_issue) {
      add(out, h("div", { "class": "issue" }, h("b", { text: "TOP_ISSUE " }), badge(e.top_issue.severity || "", severityKind(e.top_issue.severity)),
        h("div", { text: e.top_issue.problem || "" }), e.top_issue.fix ? h("div", { "class": "muted", text: "fix: " + e.top_issue.fix }) : null));
    }
    if (e.feedback) add(out, h("p", { "class": "feedback", text: e.feedback }));
    if (e.what_worked && e.what_worked.length) add(out, h("ul", { "class": "list" }, e.what_worked.map(function (w) { return h("li", { text: "✓ " + w }); })));
    if (e.error) add(out, errorBox(e.error));
    return out;
  }

  // The run: the images side by side, each with every judge's score, TOP_ISSUE and feedback; the ranking; the
  // iteration chart. From evaluate_image's result (plus its arguments, in an MCP host) or from a stored run.
  function renderImageRun(d) {
    var iterations = d.iterations;
    if (!iterations) {
      var hist = (d.plateau && d.plateau.history) || [];
      iterations = hist.map(function (b, i) { return { iteration: i + 1, best: b }; });
      if (d.iteration) {
        while (iterations.length < d.iteration) iterations.push({ iteration: iterations.length + 1 });
        var cur = iterations[d.iteration - 1];
        cur.evaluations = d.evaluations; cur.ranking = d.ranking; cur.winner_index = d.winner_index; cur.prompt = d.prompt;
      }
    }
    var shown = null;
    iterations.forEach(function (it) { if (it.evaluations || it.ranking) shown = it; });
    var out = [h("h1", { text: "Image run" }),
      h("p", { "class": "meta", text: [d.run_id ? "run " + d.run_id : "", iterations.length ? iterations.length + " iteration" + (iterations.length > 1 ? "s" : "") : "",
        d.plateau && d.plateau.max_iterations ? "budget " + d.plateau.max_iterations : ""].filter(Boolean).join(" · ") })];
    if (d.brief) out.push(h("div", { "class": "brief", text: d.brief }));
    var body = h("div");
    var pick = null;
    if (iterations.filter(function (it) { return it.evaluations; }).length > 1) {
      var buttons = [];
      iterations.forEach(function (it) {
        if (!it.evaluations) return;
        var b = h("button", { text: "iteration " + it.iteration, onclick: function () {
          buttons.forEach(function (x) { x.className = ""; }); b.className = "on"; drawIteration(body, it, d);
        } });
        if (it === shown) b.className = "on";
        buttons.push(b);
      });
      pick = h("div", { "class": "toolbar" }, h("span", { "class": "muted", text: "show" }), buttons);
    }
    out.push(pick, body);
    if (shown) drawIteration(body, shown, d);
    var best = iterations.map(function (it) { return typeof it.best === "number" ? it.best : null; });
    var mean = iterations.map(function (it) { return typeof it.mean === "number" ? it.mean : null; });
    if (best.length) {
      var pl = d.plateau || {};
      var series = [{ name: "best aggregate", values: best, color: "#3b5bdb" }];
      if (mean.some(function (v) { return v !== null; })) series.push({ name: "mean aggregate", values: mean, color: "#94a3b8" });
      out.push(h("h2", { text: "iterations" }), lineChart(series, { min: 0, max: 100, label: "aggregate score per iteration",
        mark: pl.detected && pl.detected_at ? pl.detected_at - 1 : null,
        markLabel: pl.detected ? "plateau detected" + (pl.detected_at ? " at iteration " + pl.detected_at : "") : (pl.reason || "") }));
      if (iterations.some(function (it) { return it.prompt; })) {
        out.push(table(["iteration", "prompt", "best", "mean"], iterations.map(function (it) {
          return h("tr", null, cell(String(it.iteration), true), cell(it.prompt || ""), cell(num(it.best), true), cell(num(it.mean), true));
        }), [0, 2, 3]));
      }
    }
    return out;
  }

  function drawIteration(body, it, d) {
    body.textContent = "";
    var evals = it.evaluations || [], ranking = it.ranking || [], images = d.images || [];
    var n = Math.max(images.length, 0);
    ranking.forEach(function (r) { n = Math.max(n, r.image_index + 1); });
    evals.forEach(function (e) { n = Math.max(n, e.image_index + 1); });
    var rankOf = {};
    ranking.forEach(function (r, i) { rankOf[r.image_index] = { rank: i + 1, r: r }; });
    var judges = {};
    evals.forEach(function (e) { judges[e.agent_id || e.agent_name] = 1; });
    var winner = it.winner_index;
    add(body, h("div", { "class": "cards" },
      card("iteration", String(it.iteration || "–")),
      card("winner", winner === null || winner === undefined ? "none" : "image " + (winner + 1), winner === null || winner === undefined ? "bad" : "good"),
      card("best aggregate", num(ranking.length ? ranking[0].aggregate_score : null)),
      card("judges", String(Object.keys(judges).length)),
      card("plateau", d.plateau ? (d.plateau.detected ? "detected" : "not yet") : "–")));
    if (it.prompt) add(body, h("p", { "class": "meta", text: "prompt: " + it.prompt }));
    add(body, h("h2", { text: "images" }));
    var grid = h("div", { "class": "grid" });
    for (var i = 0; i < n; i++) {
      var ro = rankOf[i];
      var panel = h("div", { "class": "panel" + (winner === i ? " winner" : "") },
        picture(images[i], i),
        h("div", { "class": "head" }, h("h3", { text: imageName(images[i], i) }),
          ro ? badge("#" + ro.rank + (winner === i ? " winner" : ""), winner === i ? "good" : null) : null),
        ro ? h("p", null, "aggregate ", h("span", { "class": "score", text: num(ro.r.aggregate_score) }),
          h("span", { "class": "muted", text: "  " + ro.r.judges_scored + " scored, " + ro.r.judges_failed + " failed" })) : null,
        ro ? bar(ro.r.aggregate_score, 100) : null);
      evals.filter(function (e) { return e.image_index === i; }).forEach(function (e) { add(panel, judgeBlock(e)); });
      grid.appendChild(panel);
    }
    add(body, grid);
    if (ranking.length) {
      add(body, [h("h2", { text: "ranking" }), table(["rank", "image", "aggregate", "judges scored", "judges failed"],
        ranking.map(function (r, k) {
          return h("tr", null, cell(String(k + 1), true), cell(imageName(images[r.image_index], r.image_index)),
            cell(num(r.aggregate_score), true), cell(String(r.judges_scored), true), cell(String(r.judges_failed), true));
        }), [0, 2, 3, 4])]);
    }
  }

  function candidateBox(value, label, kind, winner) {
    var src = kind === "image" ? imageSrc(value) : null;
    return h("div", { "class": "panel" + (winner ? " winner" : "") },
      h("div", { "class": "head" }, h("h3", { text: label }), winner ? badge("winner", "good") : null),
      src ? h("img", { src: src, alt: label }) :
        h("div", { "class": "text", text: typeof value === "string" ? (kind === "image" ? imageName(value, 0).replace(/^image 1 · /, "") : value) : json(value) }));
  }

  // pairwise_compare: the two candidates side by side with the verdict of each order.
  function renderPairwise(d) {
    var meta = d.meta || {}, orders = meta.orders || [], cands = d.candidates || [];
    var kind = cands.every(function (c) { return imageSrc(c) || /\.(png|jpe?g|gif|webp)$/i.test(String(c)); }) && cands.length ? "image" : "text";
    var value = d.value;
    var out = [h("h1", { text: d.type === "single_score" ? "VIEScore" : "Pairwise comparison" })];
    if (d.model) out.push(h("p", { "class": "meta", text: "judge " + d.model }));
    if (d.instruction) out.push(h("div", { "class": "brief", text: d.instruction }));
    var verdictKind = /fail/i.test(String(value)) ? "bad" : /tie/i.test(String(value)) ? null : "good";
    out.push(h("div", { "class": "cards" },
      card(d.type === "single_score" ? "score" : "verdict", typeof value === "number" ? num(value, 2) : String(value), verdictKind),
      d.consistent === null || d.consistent === undefined ? null : card("both orders agree", d.consistent ? "yes" : "no", d.consistent ? "good" : "bad"),
      d.margin ? card("margin", d.margin) : null,
      d.usage && typeof d.usage.cost_usd === "number" ? card("cost", money(d.usage.cost_usd)) : null));
    if (cands.length) {
      var labels = ["A", "B"];
      out.push(h("h2", { text: "candidates" }), h("div", { "class": cands.length > 1 ? "pair" : "grid" }, cands.map(function (c, i) {
        var won = typeof value === "string" && new RegExp("\\b" + labels[i] + "$").test(value.trim());
        return candidateBox(c, (kind === "image" ? "Image " : "Response ") + labels[i], kind, won);
      })));
    }
    if (orders.length) {
      out.push(h("h2", { text: "each order" }), table(["order", "shown first", "the judge said", "in the original order", "read as", "error"],
        orders.map(function (o) {
          return h("tr", { "class": o.failure_kind ? "fail" : null }, cell(o.order), cell(o.order === "swapped" ? "B" : "A"),
            cell(o.verdict), cell(h("b", { text: o.mapped })), cell(o.read_as || ""), cell(o.error || ""));
        })));
      orders.forEach(function (o) { if (o.raw_responses && o.raw_responses.length) out.push(details("the judge's reply (" + o.order + " order)", o.raw_responses[o.raw_responses.length - 1])); });
    }
    if (meta.vie_score) out.push(h("h2", { text: "VIEScore" }), h("pre", { text: json(meta.vie_score) }));
    (d.failures || []).forEach(function (f) { out.push(errorBox((f.order ? f.order + " order: " : "") + f.kind + " " + f.message)); });
    return out;
  }

  // rank_texts: the leaderboard (Bradley–Terry, Elo, wins/losses/ties) and every game.
  function renderRanking(d) {
    var cands = d.candidates || [];
    function name(i) { return "#" + (i + 1) + (typeof cands[i] === "string" ? " " + (cands[i].length > 90 ? cands[i].slice(0, 90) + "…" : cands[i]) : ""); }
    var out = [h("h1", { text: "Ranking · " + (d.method || "") }),
      h("p", { "class": "meta", text: (d.model ? "judge " + d.model + " · " : "") + (d.games || []).length + " games · " + num(d.planned_model_calls) + " model calls planned" })];
    if (d.instruction) out.push(h("div", { "class": "brief", text: d.instruction }));
    var pb = d.position_bias;
    out.push(h("div", { "class": "cards" }, card("candidates", String((d.ranking || []).length)),
      card("ties", num(d.ties)), card("inconsistent games", num(d.inconsistent_games), d.inconsistent_games ? "bad" : null),
      card("failed games", num(d.failed_games), d.failed_games ? "bad" : null),
      pb ? card("position bias", pb.detected ? "leans " + pb.leans : "none seen", pb.detected ? "bad" : "good") : null));
    var bt = (d.ranking || []).map(function (r) { return r.bradley_terry; }).filter(function (x) { return typeof x === "number"; });
    var btMax = bt.length ? Math.max.apply(null, bt) : 1;
    out.push(h("h2", { text: "leaderboard" }), table(["rank", "candidate", "Bradley–Terry", "Elo", "W", "L", "T", "inconsistent", "failed", d.method === "score" ? "score" : "round"],
      (d.ranking || []).map(function (r) {
        return h("tr", null, cell(r.rank === null ? "–" : String(r.rank), true), cell(name(r.index)),
          cell([num(r.bradley_terry, 3), typeof r.bradley_terry === "number" ? bar(r.bradley_terry, btMax) : null], true),
          cell(num(r.elo, 0), true), cell(String(r.wins), true), cell(String(r.losses), true), cell(String(r.ties), true),
          cell(String(r.inconsistent), true), cell(String(r.failed), true), cell(d.method === "score" ? num(r.score) : num(r.round_reached), true));
      }), [0, 2, 3, 4, 5, 6, 7, 8, 9]));
    if ((d.games || []).length) {
      out.push(h("h2", { text: "games" }), table(["a", "b", "round", "outcome", "winner", "orders"],
        d.games.map(function (g) {
          return h("tr", { "class": g.outcome === "failed" || g.outcome === "inconsistent" ? "fail" : null },
            cell("#" + (g.a + 1)), cell("#" + (g.b + 1)), cell(num(g.round)), cell(g.outcome),
            cell(g.winner === null || g.winner === undefined ? "–" : "#" + (g.winner + 1)),
            cell((g.orders || []).map(function (o) { return h("div", { text: o.order + ": " + o.verdict + (o.error ? " (" + o.error + ")" : "") }); })));
        })));
    }
    if (cands.length) out.push(h("h2", { text: "candidates" }), h("div", { "class": "grid" }, cands.map(function (c, i) { return candidateBox(c, "#" + (i + 1), "text", false); })));
    return out;
  }

  // calibrate_judge / get_calibration: agreement, the humans' own agreement, bias, the confusion matrix, the
  // largest disagreements and every item, browsable.
  function renderCalibration(d) {
    if (d.job_id) return [h("h1", { text: "Calibration running" }), h("p", { text: "Background job " + d.job_id + ": get_job reports it; get_calibration shows the report here when it is done." })];
    var out = [h("h1", { text: "Calibration · " + d.judge }),
      h("p", { "class": "meta", text: "judge " + d.model + (d.calibration_id ? " · calibration " + d.calibration_id : "") + (d.created_at ? " · " + when(d.created_at) : "") })];
    var c = [card("items", num(d.items)), card("judged", num(d.judged)), card("failed", num(d.failed), d.failed ? "bad" : null)];
    if (d.pairwise) c.push(card("accuracy", pct(d.pairwise.accuracy)), card("Cohen's kappa", num(d.pairwise.cohen_kappa, 3)));
    if (d.scores) c.push(card("Spearman", num(d.scores.spearman, 3)), card("Kendall tau", num(d.scores.kendall_tau, 3)),
      card("Pearson", num(d.scores.pearson, 3)), card("mean abs. error", num(d.scores.mean_absolute_error, 3)));
    if (d.humans) c.push(card("humans' alpha", num(d.humans.krippendorff_alpha, 3)));
    if (d.position_bias) c.push(card("flip rate", pct(d.position_bias.flip_rate), d.position_bias.flip_rate > 0.2 ? "bad" : null));
    if (d.length_bias) c.push(card("length bias (" + d.length_bias.measure + ")", num(d.length_bias.correlation, 3)));
    out.push(h("div", { "class": "cards" }, c));
    var cf = d.confusion;
    if (cf && cf.labels && cf.labels.length) {
      var max = 1;
      cf.matrix.forEach(function (row) { row.forEach(function (v) { max = Math.max(max, v); }); });
      out.push(h("h2", { text: "confusion matrix (rows: humans, columns: judge)" }), h("table", { "class": "matrix" },
        h("thead", null, h("tr", null, h("th", { text: "humans \\ judge" }), cf.labels.map(function (l) { return h("th", { text: l }); }))),
        h("tbody", null, cf.matrix.map(function (row, i) {
          return h("tr", null, h("th", { text: cf.labels[i] }), row.map(function (v, j) {
            var td = h("td", { "class": i === j ? "diag" : null, text: String(v) });
            var a = v / max;
            td.style.backgroundColor = i === j ? "rgba(43,138,62," + (0.08 + 0.5 * a) + ")" : v ? "rgba(201,42,42," + (0.06 + 0.45 * a) + ")" : "";
            return td;
          }));
        }))));
    }
    if (d.humans) out.push(h("p", { "class": "meta", text: "humans: " + d.humans.raters + " raters at most, " + d.humans.units + " items rated twice or more, " + d.humans.level + " level" }));
    function itemRows(items) {
      return items.map(function (it) {
        return h("tr", { "class": it.failure ? "fail" : null }, cell(it.id), cell(typeof it.human === "number" ? num(it.human, 2) : String(it.human)),
          cell(typeof it.judge === "number" ? num(it.judge, 2) : it.judge === null ? "–" : String(it.judge)),
          cell(num(it.disagreement, 3), true), cell((it.orders || []).join(" / ")), cell(it.failure || ""));
      });
    }
    var heads = ["item", "humans", "judge", "disagreement", "orders", "failure"];
    if ((d.largest_disagreements || []).length) out.push(h("h2", { text: "largest disagreements" }), table(heads, itemRows(d.largest_disagreements), [3]));
    var all = d.results || [], page = 0, per = 50, filter = "all";
    var body = h("tbody"), info = h("span", { "class": "muted" });
    function chosen() {
      return all.filter(function (it) {
        return filter === "all" || (filter === "failed" ? !!it.failure : !it.failure && it.disagreement !== null && it.disagreement > 0);
      });
    }
    function draw() {
      var list = chosen(), pages = Math.max(1, Math.ceil(list.length / per));
      page = Math.min(page, pages - 1);
      body.textContent = "";
      add(body, itemRows(list.slice(page * per, page * per + per)));
      info.textContent = list.length + " items · page " + (page + 1) + " of " + pages;
    }
    var fbuttons = ["all", "disagree", "failed"].map(function (f) {
      var b = h("button", { text: f, "class": f === filter ? "on" : null, onclick: function () {
        filter = f; page = 0; fbuttons.forEach(function (x) { x.className = x === b ? "on" : ""; }); draw();
      } });
      return b;
    });
    out.push(h("h2", { text: "every item" }), h("div", { "class": "toolbar" }, fbuttons,
      h("button", { text: "‹ previous", onclick: function () { if (page > 0) { page--; draw(); } } }),
      h("button", { text: "next ›", onclick: function () { page++; draw(); } }), info), table(heads, body, [3]));
    draw();
    return out;
  }

  // The /ui/ index: the organization's recent runs and calibrations.
  function renderRecent(d) {
    var out = [h("h1", { text: "judge-mcp · " + (d.organization || "") }), h("h2", { text: "recent image runs" })];
    out.push((d.runs || []).length ? table(["brief", "iterations", "best", "updated"], d.runs.map(function (r) {
      return h("tr", null, cell(h("a", { href: "runs/" + encodeURIComponent(r.run_id), text: r.brief })),
        cell(String(r.iterations), true), cell(num(r.best), true), cell(when(r.updated_at)));
    }), [1, 2]) : h("p", { "class": "muted", text: "no runs yet (evaluate_image makes one)" }));
    out.push(h("h2", { text: "recent calibrations" }));
    out.push((d.calibrations || []).length ? table(["judge", "model", "items", "created"], d.calibrations.map(function (c) {
      return h("tr", null, cell(h("a", { href: "calibrations/" + encodeURIComponent(c.calibration_id), text: c.judge })),
        cell(c.model), cell(String(c.items), true), cell(when(c.created_at)));
    }), [2]) : h("p", { "class": "muted", text: "no calibrations yet (calibrate_judge makes one)" }));
    return out;
  }

  function renderJson(data) { return [h("pre", { text: json(data) })]; }

  var VIEWS = { eval: renderEval, image_run: renderImageRun, pairwise: renderPairwise, ranking: renderRanking,
    calibration: renderCalibration, recent: renderRecent };

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
    var nextId = 1, host = window.parent, input = {};
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
      if (msg.method === "ui/notifications/tool-input") {
        input = (msg.params && msg.params.arguments) || {};
      } else if (msg.method === "ui/notifications/tool-result") {
        var result = msg.params || {};
        if (result.isError) show(view, textOf(result) || "the tool failed", true);
        else if (result.structuredContent && typeof result.structuredContent === "object") {
          // The result names no brief, images or candidates: the call's own arguments do.
          var data = {};
          ["brief", "images", "prompt", "instruction", "candidates"].forEach(function (k) { if (k in input) data[k] = input[k]; });
          for (var k in result.structuredContent) if (Object.prototype.hasOwnProperty.call(result.structuredContent, k)) data[k] = result.structuredContent[k];
          show(view, data, false);
        } else show(view, textOf(result), true);
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
