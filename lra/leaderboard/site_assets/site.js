// The leaderboard page (lra/leaderboard/site.py embeds this file and the data it draws).
// Plain DOM and SVG, no library: it runs from file:// and from any static host.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("data").textContent);
  var SVGNS = "http://www.w3.org/2000/svg";
  var PROTOCOL = { lra: "LRA protocol", modern: "Modern protocol" };
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
    "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5"];

  var state = { view: null, metric: null, kind: "", q: "", published: false,
    sort: { col: "name", dir: 1 } };

  // ------------------------------------------------------------------------------------------
  // DOM helpers.

  function el(tag, attrs) {
    var node = document.createElement(tag);
    setAttrs(node, attrs);
    for (var i = 2; i < arguments.length; i++) add(node, arguments[i]);
    return node;
  }
  function sv(tag, attrs) {
    var node = document.createElementNS(SVGNS, tag);
    setAttrs(node, attrs);
    for (var i = 2; i < arguments.length; i++) add(node, arguments[i]);
    return node;
  }
  function setAttrs(node, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      if (k === "text") node.textContent = v;
      else if (k === "html") node.innerHTML = v;  // only for text site.py escaped
      else if (k.slice(0, 2) === "on") node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    });
  }
  function add(node, kid) {
    if (arguments.length > 2) {
      for (var i = 1; i < arguments.length; i++) add(node, arguments[i]);
      return;
    }
    if (kid === null || kid === undefined || kid === false) return;
    if (Array.isArray(kid)) { kid.forEach(function (k) { add(node, k); }); return; }
    node.appendChild(typeof kid === "string" || typeof kid === "number"
      ? document.createTextNode(String(kid)) : kid);
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function enc(s) { return encodeURIComponent(s); }
  function runHref(file) { return D.results + "runs/" + enc(file); }
  function effHref(file) { return D.results + "efficiency/" + enc(file); }

  // One colour per family, the same in every chart (softmax black).
  var COLOURS = {};
  (function () {
    var ids = {};
    D.views.forEach(function (v) { v.rows.forEach(function (r) { ids[r.family] = 1; }); });
    D.efficiency.forEach(function (e) { e.series.forEach(function (s) { ids[s.id] = 1; }); });
    Object.keys(ids).sort().filter(function (k) { return k !== "softmax"; })
      .forEach(function (k, i) { COLOURS[k] = PALETTE[i % PALETTE.length]; });
    COLOURS.softmax = "#000000";
  })();
  function colour(id) { return COLOURS[id] || "#555555"; }

  // ------------------------------------------------------------------------------------------
  // Routing: #<view>, #<view>/<task>/<row>, #efficiency[/<setting>], #peers.

  function viewLabel(v) {
    return PROTOCOL[v.protocol] + " · " + v.preset + " · " + v.device;
  }

  function parse(hash) {
    var h = hash.replace(/^#/, "");
    if (!h) return { page: "accuracy", view: D.views[0] };
    var parts = h.split("/").map(function (p) {
      try { return decodeURIComponent(p); } catch (e) { return p; }
    });
    if (parts[0] === "efficiency") return { page: "efficiency", target: parts[1] };
    if (parts[0] === "peers") return { page: "peers" };
    for (var n = Math.min(3, parts.length); n >= 2; n--) {
      var id = parts.slice(0, n).join("/");
      var view = D.views.filter(function (v) { return v.id === id; })[0];
      if (view) return { page: "accuracy", view: view, task: parts[n], row: rowOf(parts, n) };
    }
    // protocol/preset of a preset measured on several devices: the first device with that cell
    var prefix = parts.slice(0, 2).join("/") + "/";
    var task = parts[2], row = rowOf(parts, 2);
    var matches = D.views.filter(function (v) { return v.id.indexOf(prefix) === 0; });
    var withCell = matches.filter(function (v) { return task && (v.seeds[task] || {})[row]; });
    if (withCell.length || matches.length) {
      return { page: "accuracy", view: (withCell[0] || matches[0]), task: task, row: row };
    }
    return { page: "accuracy", view: D.views[0], missing: h };
  }
  function rowOf(parts, n) {
    return parts.length > n + 1 ? parts.slice(n + 1).join("/") : undefined;
  }

  var lastPage = null;
  function route() {
    var r = parse(location.hash);
    var pages = ["accuracy", "efficiency", "peers"];
    pages.forEach(function (p) { document.getElementById("page-" + p).hidden = p !== r.page; });
    if (r.page !== lastPage) window.scrollTo(0, 0);
    lastPage = r.page;
    drawNav(r);
    if (r.page === "efficiency") {
      drawEfficiency();
      var target = r.target && document.getElementById("eff-" + r.target);
      if (target) target.scrollIntoView();
      return;
    }
    if (r.page === "peers") { drawPeers(); return; }
    if (!r.view) { document.getElementById("page-accuracy").textContent = "No measured results yet."; return; }
    if (state.view !== r.view) {
      state.view = r.view;
      state.metric = r.view.metrics[0].key;
      drawAccuracy(r.missing);
    }
    openCell(r.task, r.row);
  }

  function drawNav(r) {
    var nav = document.getElementById("nav");
    clear(nav);
    var items = D.views.map(function (v) {
      return { href: "#" + v.id, text: viewLabel(v), current: r.page === "accuracy" && r.view === v };
    });
    if (D.efficiency.length) {
      items.push({ href: "#efficiency", text: "Efficiency", current: r.page === "efficiency" });
    }
    if (D.peers) items.push({ href: "#peers", text: "Peers (CPU)", current: r.page === "peers" });
    add(nav, el("ul", null, items.map(function (it) {
      return el("li", null, el("a", { href: it.href, "aria-current": it.current ? "page" : null,
        text: it.text }));
    })));
  }

  // ------------------------------------------------------------------------------------------
  // The accuracy view.

  function drawAccuracy(missing) {
    var v = state.view;
    var sec = document.getElementById("page-accuracy");
    clear(sec);
    var metricSel = el("select", { id: "metric", onchange: function (e) {
      state.metric = e.target.value; drawTable(); closeCellIfOpen(); } },
      v.metrics.map(function (m, i) {
        return el("option", { value: m.key, selected: m.key === state.metric,
          text: m.label + (i === 0 ? " (headline)" : "") });
      }));
    var kindSel = el("select", { id: "kind", onchange: function (e) {
      state.kind = e.target.value; drawTable(); } },
      el("option", { value: "", text: "every kind" }),
      D.kinds.map(function (k) { return el("option", { value: k, selected: k === state.kind, text: k }); }));
    var nameIn = el("input", { id: "q", type: "search", value: state.q, placeholder: "e.g. mamba",
      autocomplete: "off", oninput: function (e) { state.q = e.target.value; drawTable(); } });
    var pub = el("input", { id: "published", type: "checkbox", checked: state.published,
      onchange: function (e) { state.published = e.target.checked; drawTable(); } });
    add(sec, [
      missing ? el("p", { class: "warn", role: "alert" }, "No view or cell #" + missing +
        " here; views: " + D.views.map(function (x) { return x.id; }).join(", ") + ".") : null,
      el("h2", { id: "view-title" }, viewLabel(v)),
      el("p", { class: "note" }, v.protocol === "modern"
        ? "The families' published modern recipes (--protocol modern): never ranked with the LRA protocol's tables."
        : "LRA's protocol: the headline is test accuracy at the last step, as LRA's Table 1 reports."),
      el("p", { class: "note budget" }, "Budget: " + v.budget + ". Hardware: " + v.hardware + "."),
      el("form", { class: "controls", onsubmit: function (e) { e.preventDefault(); } },
        el("label", null, el("span", null, "Metric"), metricSel),
        el("label", null, el("span", null, "Kind"), kindSel),
        el("label", null, el("span", null, "Name"), nameIn),
        el("label", { class: "check" }, pub, el("span", null, "Published rows"))),
      el("div", { class: "scroll", id: "board-wrap" }, el("table", { id: "board" })),
      legend(),
      el("section", { id: "detail", hidden: true, "aria-live": "polite", "aria-label": "The cell's seeds" })
    ]);
    drawTable();
  }

  function legend() {
    return el("details", { class: "legend", open: true },
      el("summary", null, "How to read a cell"),
      el("p", null, D.legend.replace(/\*\*/g, "")),
      el("dl", null,
        el("dt", null, el("strong", null, "bold")), el("dd", null, D.marks.best),
        el("dt", null, "≈"), el("dd", null, D.marks.tied.replace(/^≈ /, "")),
        el("dt", null, "†"), el("dd", null, D.marks.few.replace(/^† /, "")),
        el("dt", null, "k/n"), el("dd", null, D.marks.chance),
        el("dt", null, "published"), el("dd", null,
          "a paper's printed number, not measured here; never ranked with the measured rows")),
      el("p", null, "Select a cell (click, or Tab then Enter) to see its seeds and validation curves; " +
        "its address (#protocol/preset/task/family) can be cited."));
  }

  function cellOf(row, task) { return (row.cells[state.metric] || {})[task]; }

  function sortValue(row, col, published) {
    if (col === "name") return (row.name + " " + (row.overrides || "")).toLowerCase();
    if (col === "kind") return row.kind || null;
    if (col === "avg") return published ? row.avg : (row.avg || {})[state.metric];
    var c = published ? row.cells[col] : cellOf(row, col);
    return c ? c.m : null;
  }

  function sorted(rows, published) {
    var col = state.sort.col, dir = state.sort.dir;
    return rows.map(function (r, i) { return { r: r, i: i, v: sortValue(r, col, published) }; })
      .sort(function (a, b) {
        var an = a.v === null || a.v === undefined, bn = b.v === null || b.v === undefined;
        if (an !== bn) return an ? 1 : -1;  // missing cells last, either direction
        if (!an && a.v !== b.v) return (a.v < b.v ? -1 : 1) * dir;
        return a.i - b.i;
      }).map(function (x) { return x.r; });
  }

  function shown(row) {
    if (state.kind && row.kind !== state.kind) return false;
    var q = state.q.trim().toLowerCase();
    if (!q) return true;
    return [row.name, row.family, row.row].some(function (s) {
      return s && s.toLowerCase().indexOf(q) >= 0;
    });
  }

  // The average column only where some row shown has one (no column of dashes).
  function hasAvg(v) {
    return v.rows.some(function (r) { var a = (r.avg || {})[state.metric]; return a !== null && a !== undefined; }) ||
      (state.published && v.published.some(function (r) { return r.avg !== null && r.avg !== undefined; }));
  }

  function taskCols(cols) { return cols.slice(2).filter(function (c) { return c.id !== "avg"; }); }

  function withAvg(cols) { return cols[cols.length - 1].id === "avg"; }

  function drawTable() {
    var v = state.view;
    var table = document.getElementById("board");
    clear(table);
    setAttrs(table, { "data-view": v.id, "data-protocol": v.protocol, "data-preset": v.preset,
      "data-device": v.device, "data-metric": state.metric });
    var metric = v.metrics.filter(function (m) { return m.key === state.metric; })[0];
    var cols = [{ id: "name", label: "Family", num: false }, { id: "kind", label: "Kind", num: false }]
      .concat(v.tasks.map(function (t) {
        return { id: t.id, label: t.name, num: true,
          hint: t.valtest && state.metric === "test_accuracy_at_best_val"
            ? "validation = test split: this task has no validation split, so best-validation selection is made on test" : null };
      }))
      .concat(hasAvg(v) ? [{ id: "avg", label: "avg (5 tasks)", num: true,
        hint: "mean of the ListOps, Text, Retrieval, Image and Pathfinder means (LRA's average, Path-X left out); only where all five are measured" }] : []);
    add(table, el("caption", null, metric.label + " (%), " + viewLabel(v)));
    add(table, el("thead", null, el("tr", null, cols.map(function (c) {
      var active = state.sort.col === c.id;
      return el("th", { scope: "col", class: c.num ? "num" : c.id === "kind" ? "kind" : null,
        "aria-sort": active ? (state.sort.dir > 0 ? "ascending" : "descending") : null },
        el("button", { type: "button", class: "sort", "data-col": c.id,
          onclick: function () { sortBy(c); } },
          c.label, el("span", { class: "arrow", "aria-hidden": "true" },
            active ? (state.sort.dir > 0 ? " ▲" : " ▼") : "")),
        c.hint ? el("span", { class: "mk hint", tabindex: "0", "data-tip": c.hint }, "?") : null);
    }))));
    var measured = v.rows.filter(function (r) { return !r.overrides && shown(r); });
    var variants = v.rows.filter(function (r) { return r.overrides && shown(r); });
    var pubs = state.published ? v.published.filter(shown) : [];
    var n = cols.length;
    add(table, el("tbody", { class: "measured" }, sorted(measured, false).map(function (r) {
      return measuredRow(r, cols);
    }), measured.length ? null : el("tr", null, el("td", { colspan: n, class: "empty" },
      "No measured row matches the filters."))));
    if (variants.length) {
      add(table, el("tbody", { class: "variants" },
        el("tr", { class: "group" }, el("th", { colspan: n, scope: "rowgroup" },
          "Runs whose config is not the preset's, or whose data is not the column's: own rows, never ranked " +
          "(in brackets the keys that differ, or the data's fingerprint)")),
        sorted(variants, false).map(function (r) { return measuredRow(r, cols); })));
    }
    if (pubs.length) {
      add(table, el("tbody", { class: "published" },
        el("tr", { class: "group" }, el("th", { colspan: n, scope: "rowgroup" },
          "Published (not measured here; at another budget: " + state.view.publishedBudget +
          "): cells and averages as printed (the recomputation beside an average where it differs), never ranked with the measured rows")),
        sorted(pubs, true).map(function (r) { return publishedRow(r, cols); })));
    }
  }

  function sortBy(c) {
    if (state.sort.col === c.id) state.sort.dir = -state.sort.dir;
    else state.sort = { col: c.id, dir: c.num ? -1 : 1 };  // numbers: best first
    drawTable();
    var b = document.querySelector('#board button[data-col="' + c.id + '"]');
    if (b) b.focus();
  }

  function cellHref(task, row) { return "#" + state.view.id + "/" + enc(task) + "/" + enc(row); }

  function measuredRow(r, cols) {
    return el("tr", { "data-row": r.row, "data-kind": r.kind },
      el("th", { scope: "row" }, el("span", { class: "fam" }, r.name),
        r.overrides ? el("span", { class: "over" }, " " + r.overrides) : null,
        el("span", { class: "kindsub" }, r.kind)),
      el("td", { class: "kind" }, r.kind || "—"),
      taskCols(cols).map(function (c) {
        var cell = cellOf(r, c.id);
        if (!cell) return el("td", { class: "num none", "data-task": c.id }, "—");
        return el("td", { class: "num", "data-task": c.id }, cellLink(cell, c.id, r));
      }),
      withAvg(cols) ? el("td", { class: "num avg" }, fmt((r.avg || {})[state.metric])) : null);
  }

  function fmt(x) { return x === null || x === undefined ? "—" : x.toFixed(2); }

  function cellTip(cell) {
    var t = cell.s ? cell.t + " ± " + cell.s + " [95% interval " + cell.lo + ", " + cell.hi + "]"
      : cell.t + " (one seed: no spread)";
    t += ", " + cell.n + " seed" + (cell.n > 1 ? "s" : "");
    if (cell.b) t += ". Bold: " + D.marks.best;
    if (cell.ti) t += ". " + D.marks.tied;
    if (cell.f) t += ". " + D.marks.few;
    if (cell.c) t += ". " + cell.c + "/" + cell.n + " at chance: " + D.marks.chance;
    return t + ". Select to see the seeds.";
  }

  function cellLink(cell, task, r) {
    return el("a", { class: "cell" + (cell.b ? " best" : ""), href: cellHref(task, r.row),
      "data-tip": cellTip(cell) },
      el("span", { class: "v" }, cell.t),
      cell.ti ? el("span", { class: "mk tied", "data-tip": D.marks.tied }, "≈") : null,
      cell.f ? el("span", { class: "mk few", "data-tip": D.marks.few }, "†") : null,
      el("span", { class: "sub" },
        cell.s ? el("span", { class: "sd" }, "± " + cell.s) : null,
        el("span", { class: "n" }, "(" + cell.n + ")")),
      cell.c ? el("span", { class: "mk chance", "data-tip": D.marks.chance },
        cell.c + "/" + cell.n + " at chance") : null);
  }

  function publishedRow(r, cols) {
    return el("tr", { class: "pub", "data-kind": r.kind },
      el("th", { scope: "row" }, el("span", { class: "fam" }, r.name),
        el("span", { class: "badge", "data-tip": r.source }, "published"),
        el("span", { class: "kindsub" }, r.kind)),
      el("td", { class: "kind" }, r.kind || "—"),
      taskCols(cols).map(function (c) {
        var cell = r.cells[c.id];
        return el("td", { class: "num" + (cell ? "" : " none"), "data-task": c.id,
          "data-tip": cell ? "as printed in " + r.source : null }, cell ? cell.t : "—");
      }),
      withAvg(cols) ? el("td", { class: "num avg", "data-tip": (r.printed ? "printed: " + r.printed + "; " : "") +
        "recomputed from the printed cells: " + fmt(r.avg) }, r.avgText || fmt(r.avg)) : null);
  }

  // ------------------------------------------------------------------------------------------
  // A cell's panel: its seeds and their validation curves.

  function closeCellIfOpen() {
    var d = document.getElementById("detail");
    if (d && !d.hidden) {
      history.replaceState(null, "", "#" + state.view.id);
      d.hidden = true;
    }
  }

  function openCell(task, row) {
    var d = document.getElementById("detail");
    if (!d) return;
    var cur = document.querySelector("#board a.cell.open");
    if (cur) cur.classList.remove("open");
    if (!task || row === undefined) { d.hidden = true; return; }
    var v = state.view;
    var seeds = (v.seeds[task] || {})[row];
    var r = v.rows.filter(function (x) { return x.row === row; })[0];
    clear(d);
    d.hidden = false;
    if (!seeds || !r) {
      add(d, el("p", { class: "warn", role: "alert" }, "No cell " + task + " / " + row + " in " +
        viewLabel(v) + "."));
      return;
    }
    var link = document.querySelector('#board tr[data-row="' + cssEsc(row) + '"] td[data-task="' +
      cssEsc(task) + '"] a.cell');
    if (link) link.classList.add("open");
    var anchor = "#" + v.id + "/" + enc(task) + "/" + enc(row);
    var chance = v.chance[task];
    var heading = el("h3", { tabindex: "-1" }, taskName(v, task) + " · " + r.name +
      (r.overrides ? " " + r.overrides : ""));
    add(d, [
      el("div", { class: "detail-head" }, heading,
        el("a", { class: "close", href: "#" + v.id, "aria-label": "Close the cell" }, "Close ✕")),
      el("p", { class: "where" }, viewLabel(v) + (r.kind ? " · " + r.kind : "") + ". Link: ",
        el("a", { href: anchor }, anchor)),
      el("dl", { class: "stats" }, v.metrics.map(function (m) {
        var c = (r.cells[m.key] || {})[task];
        return [el("dt", null, m.label), el("dd", null, c ? c.text.replace(/\*\*/g, "") : "—")];
      })),
      el("div", { class: "scroll" }, seedTable(seeds)),
      curveFigure(seeds, chance, task)
    ]);
    d.scrollTop = 0;
    heading.focus({ preventScroll: true });
  }

  function taskName(v, id) {
    var t = v.tasks.filter(function (x) { return x.id === id; })[0];
    return t ? t.name : id;
  }

  function cssEsc(s) { return window.CSS && CSS.escape ? CSS.escape(s) : s.replace(/["\\]/g, "\\$&"); }

  // One column per seed (a cell has a few), one row per field: narrow enough for a phone.
  function seedTable(seeds) {
    function dash(x) { return x === null || x === undefined ? "—" : String(x); }
    var fields = [
      ["test acc, last step", function (s) { return fmt(s.last); }],
      ["test acc, best-val step", function (s) { return fmt(s.bv); }],
      ["best-val step", function (s) { return dash(s.bstep); }],
      ["steps", function (s) { return String(s.steps); }],
      ["steps/s", function (s) { return s.sps === null ? "—" : s.sps.toFixed(2); }],
      ["peak memory GiB", function (s) { return dash(s.mem); }],
      ["commit", function (s) {
        return el("code", { "data-tip": s.commit + (s.dirty ? " (uncommitted changes)" : "") },
          s.commit.slice(0, 10) + (s.dirty ? "+" : ""));
      }],
      ["data fingerprint", function (s) {
        return s.fp ? el("code", { "data-tip": "sha256 of the data files: " + s.fp }, s.fp.slice(0, 12))
          : el("span", { "data-tip": "a result file of format 1 records no fingerprint" }, "—");
      }],
      ["run file", function (s) { return el("a", { href: runHref(s.file), class: "file" }, s.file); }]
    ];
    return el("table", { class: "seeds" },
      el("thead", null, el("tr", null, el("th", { scope: "col" }, "seed"),
        seeds.map(function (s) { return el("th", { scope: "col", class: "num", "data-seed": s.seed }, String(s.seed)); }))),
      el("tbody", null, fields.map(function (f) {
        return el("tr", null, el("th", { scope: "row" }, f[0]),
          seeds.map(function (s) { return el("td", { class: "num" }, f[1](s)); }));
      })));
  }

  // ------------------------------------------------------------------------------------------
  // Charts.

  function niceTicks(lo, hi, count) {
    var span = hi - lo || 1;
    var step = Math.pow(10, Math.floor(Math.log10(span / count)));
    var err = span / count / step;
    step *= err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1;
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(+t.toFixed(10));
    return out;
  }

  function logTicks(lo, hi) {
    var out = [];
    for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      [1, 2, 5].forEach(function (m) {
        var t = m * Math.pow(10, e);
        if (t >= lo * 0.999 && t <= hi * 1.001) out.push(t);
      });
    }
    return out;
  }

  function num(x) {
    if (x >= 1000) return String(Math.round(x));
    return String(+x.toPrecision(3));
  }

  // A frame with axes; returns {g, x(value), y(value)} for one panel.
  function frame(o) {
    var W = o.w, H = o.h, m = { l: 52, r: 12, t: 22, b: 40 };
    var pw = W - m.l - m.r, ph = H - m.t - m.b;
    var sx = scale(o.x, m.l, m.l + pw), sy = scale(o.y, m.t + ph, m.t);
    var g = sv("g", { class: "frame" });
    add(g, sv("rect", { x: m.l, y: m.t, width: pw, height: ph, class: "plot" }));
    o.x.ticks.forEach(function (t) {
      var px = sx(t);
      add(g, sv("line", { x1: px, x2: px, y1: m.t, y2: m.t + ph, class: "grid" }));
      add(g, sv("text", { x: px, y: m.t + ph + 14, class: "tick", "text-anchor": "middle" },
        o.x.fmt ? o.x.fmt(t) : num(t)));
    });
    o.y.ticks.forEach(function (t) {
      var py = sy(t);
      add(g, sv("line", { x1: m.l, x2: m.l + pw, y1: py, y2: py, class: "grid" }));
      add(g, sv("text", { x: m.l - 5, y: py + 3.5, class: "tick", "text-anchor": "end" },
        o.y.fmt ? o.y.fmt(t) : num(t)));
    });
    add(g, sv("text", { x: m.l + pw / 2, y: H - 6, class: "axis", "text-anchor": "middle" }, o.x.label));
    add(g, sv("text", { x: 12, y: m.t + ph / 2, class: "axis", "text-anchor": "middle",
      transform: "rotate(-90 12 " + (m.t + ph / 2) + ")" }, o.y.label));
    if (o.title) add(g, sv("text", { x: m.l, y: 14, class: "ptitle" }, o.title));
    return { g: g, x: sx, y: sy, box: { l: m.l, r: m.l + pw, t: m.t, b: m.t + ph } };
  }

  function scale(ax, a, b) {
    if (ax.log) {
      var l0 = Math.log(ax.lo), l1 = Math.log(ax.hi);
      return function (v) { return a + (Math.log(v) - l0) / (l1 - l0 || 1) * (b - a); };
    }
    return function (v) { return a + (v - ax.lo) / (ax.hi - ax.lo || 1) * (b - a); };
  }

  function linAxis(values, label, pad, count) {
    var lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    var p = (hi - lo || Math.abs(hi) || 1) * pad;
    var ticks = niceTicks(lo - p, hi + p, count || 5);
    return { lo: Math.min(lo - p, ticks[0]), hi: Math.max(hi + p, ticks[ticks.length - 1]),
      ticks: ticks, label: label };
  }

  function logAxis(values, label, ticks) {
    var lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    var f = Math.pow(hi / lo, 0.06) || 1.2;
    lo /= f; hi *= f;
    return { lo: lo, hi: hi, log: true, ticks: ticks || logTicks(lo, hi), label: label };
  }

  function svgRoot(w, h, label) {
    return sv("svg", { viewBox: "0 0 " + w + " " + h, width: w, height: h, role: "img",
      "aria-label": label, class: "chart" });
  }

  function curveFigure(seeds, chance, task) {
    var drawn = seeds.filter(function (s) { return s.curve && s.curve.length; });
    if (!drawn.length) {
      return el("p", { class: "note" }, "No validation curve: these result files hold no eval_history.");
    }
    var steps = [], accs = [];
    drawn.forEach(function (s) { s.curve.forEach(function (p) { steps.push(p[0]); accs.push(p[1]); }); });
    if (chance) accs.push(chance[0]);
    var W = 560, H = 260;
    var xa = linAxis(steps.concat([0]), "training step", 0.02, 6);
    xa.lo = Math.max(xa.lo, 0);
    var ya = linAxis(accs, "validation accuracy (%)", 0.08, 5);
    var f = frame({ w: W, h: H, x: xa, y: ya });
    var svgEl = svgRoot(W, H, "Validation accuracy against step, " + task + ", one line per seed");
    add(svgEl, f.g);
    if (chance) {
      var cy = f.y(chance[0]);
      add(svgEl, sv("line", { x1: f.box.l, x2: f.box.r, y1: cy, y2: cy, class: "chance" }));
      add(svgEl, sv("text", { x: f.box.r - 4, y: cy - 4, class: "tick", "text-anchor": "end" },
        "chance " + chance[1]));
    }
    drawn.forEach(function (s, i) {
      var c = PALETTE[i % PALETTE.length];
      add(svgEl, sv("polyline", { class: "line", stroke: c, points: s.curve.map(function (p) {
        return f.x(p[0]).toFixed(1) + "," + f.y(p[1]).toFixed(1); }).join(" ") }));
      s.curve.forEach(function (p) {
        add(svgEl, sv("circle", { cx: f.x(p[0]).toFixed(1), cy: f.y(p[1]).toFixed(1), r: 3.5, fill: c,
          class: "pt", tabindex: "0",
          "data-tip": "seed " + s.seed + ", step " + p[0] + ": " + p[1].toFixed(2) + "% validation accuracy" +
            (p[0] === s.bstep ? " (best-validation step)" : "") }));
      });
    });
    var keys = el("ul", { class: "keys" }, drawn.map(function (s, i) {
      return el("li", null, el("span", { class: "sw", style: "background:" + PALETTE[i % PALETTE.length] }),
        "seed " + s.seed);
    }));
    return el("figure", { class: "curve" }, el("div", { class: "scroll" }, svgEl),
      el("figcaption", null, "Validation accuracy during training, one line per seed (from the result " +
        "files' eval_history)" + (chance ? "; dashed: chance (" + chance[1] + ")" : "") + ".", keys));
  }

  // ------------------------------------------------------------------------------------------
  // Efficiency.

  var effDrawn = false;
  function drawEfficiency() {
    if (effDrawn) return;
    effDrawn = true;
    var sec = document.getElementById("page-efficiency");
    add(sec, el("h2", null, "Efficiency"),
      el("p", { class: "note" }, "Training steps per second and peak memory per device against input " +
        "length, from the newest bench file (python -m lra.bench) of each setting; hover or focus a " +
        "point for its numbers."));
    D.efficiency.forEach(function (e) { add(sec, effSetting(e)); });
  }

  function effSetting(e) {
    var art = el("article", { id: "eff-" + e.id, class: "setting" });
    add(art, el("h3", null, el("a", { href: "#efficiency/" + e.id, class: "self" }, e.title)),
      el("p", { class: "note" }, "File ", el("a", { href: effHref(e.file) }, e.file),
        " (commit " + e.commit + ", " + e.date + ", median of " + e.steps + " timed steps). Memory: " +
        e.memory_method + "."));
    var charts = el("div", { class: "charts" });
    if (e.bubble) add(charts, bubbleChart(e));
    if (e.lengths.length > 1) add(charts, scalingChart(e));
    else add(charts, el("p", { class: "note one-length" }, "One length measured (" + e.lengths[0] +
      "): no curve to draw."));
    add(art, charts, effTable(e));
    if (e.older.length) {
      add(art, el("p", { class: "note" }, "Earlier files for this setting (not shown): ",
        e.older.map(function (f, i) { return [i ? ", " : "", el("a", { href: effHref(f) }, f)]; })));
    }
    return art;
  }

  function effTable(e) {
    var head = ["family", "kind"].concat(e.lengths.map(function (n) { return "steps/s " + n; }))
      .concat(e.lengths.map(function (n) { return "memory GiB " + n; }));
    return el("div", { class: "scroll" }, el("table", { class: "eff" },
      el("thead", null, el("tr", null, head.map(function (h) { return el("th", { scope: "col" }, h); }))),
      el("tbody", null, e.series.map(function (s) {
        var at = {};
        s.pts.forEach(function (p) { at[p[0]] = p; });
        var skip = {};
        s.skipped.forEach(function (p) { skip[p[0]] = p[1]; });
        function cell(n, k) {
          if (at[n]) return el("td", { class: "num" }, num(at[n][k]));
          return el("td", { class: "num none", "data-tip": skip[n] || null }, skip[n] ? "skipped" : "—");
        }
        return el("tr", null,
          el("th", { scope: "row" }, el("span", { class: "sw", style: "background:" + colour(s.id) }), s.name),
          el("td", { class: "kind" }, s.kind || "—"),
          e.lengths.map(function (n) { return cell(n, 1); }),
          e.lengths.map(function (n) { return cell(n, 3); }));
      }))));
  }

  function bubbleChart(e) {
    var b = e.bubble, W = 560, H = 360;
    var xa = linAxis(b.points.map(function (p) { return p.x; }).concat([1]),
      "steps/s relative to softmax at length " + b.at, 0.12, 6);
    var ya = linAxis(b.points.map(function (p) { return p.y; }),
      "test accuracy at the last step (%)", 0.15, 5);
    var f = frame({ w: W, h: H, x: xa, y: ya, title: "Speed, accuracy and memory at length " + b.at });
    var svgEl = svgRoot(W, H, "Bubble chart: speed against accuracy, bubble area = memory, " + e.title);
    add(svgEl, f.g);
    var maxMem = Math.max.apply(null, b.points.map(function (p) { return p.mem; }));
    var pts = b.points.slice().sort(function (p, q) { return q.mem - p.mem; });  // small ones on top
    pts.forEach(function (p) {
      var r = 4 + 18 * Math.sqrt(p.mem / maxMem);
      var tip = p.name + ": " + num(p.x) + "x softmax's steps/s, " + p.y.toFixed(2) +
        "% mean test accuracy, " + num(p.mem) + " GiB peak memory at length " + b.at;
      add(svgEl, sv("circle", { cx: f.x(p.x).toFixed(1), cy: f.y(p.y).toFixed(1), r: r.toFixed(1),
        fill: colour(p.id), class: "bubble", tabindex: "0", "data-tip": tip, "aria-label": tip }));
    });
    b.points.forEach(function (p) {
      add(svgEl, sv("text", { x: (f.x(p.x) + 5).toFixed(1), y: (f.y(p.y) - 5).toFixed(1), class: "blabel" },
        p.name));
    });
    return el("figure", { class: "bubble-fig" }, el("div", { class: "scroll" }, svgEl),
      el("figcaption", null, "LRA's Figure 3 form: x = speed relative to softmax, y = mean test accuracy " +
        "at the last step over seeds (preset " + b.preset + ", over " + b.over + "), bubble area = peak " +
        "memory at length " + b.at + "."));
  }

  function scalingChart(e) {
    var series = e.series.filter(function (s) { return s.pts.length; });
    var lengths = e.lengths;
    var W = 560, H = 300;
    var figs = [["time per step (ms)", 2, "ms"], ["peak memory (GiB)", 3, "GiB"]].map(function (what) {
      var vals = [];
      series.forEach(function (s) { s.pts.forEach(function (p) { vals.push(p[what[1]]); }); });
      var xa = logAxis(lengths, "input length (log)", lengths);
      xa.fmt = function (t) { return String(t); };
      var ya = logAxis(vals, what[0] + ", log");
      var f = frame({ w: W, h: H, x: xa, y: ya, title: what[0] + " against length" });
      var svgEl = svgRoot(W, H, what[0] + " against input length, log-log, " + e.title);
      add(svgEl, f.g);
      series.forEach(function (s) {
        var c = colour(s.id);
        add(svgEl, sv("polyline", { class: "line", stroke: c, points: s.pts.map(function (p) {
          return f.x(p[0]).toFixed(1) + "," + f.y(p[what[1]]).toFixed(1); }).join(" ") }));
        s.pts.forEach(function (p) {
          add(svgEl, sv("circle", { cx: f.x(p[0]).toFixed(1), cy: f.y(p[what[1]]).toFixed(1), r: 3.5,
            fill: c, class: "pt", tabindex: "0", "data-tip": s.name + " at length " + p[0] + ": " +
              num(p[1]) + " steps/s, " + num(p[2]) + " ms per step, " + num(p[3]) + " GiB" }));
        });
      });
      return el("div", { class: "scroll" }, svgEl);
    });
    var keys = el("ul", { class: "keys" }, series.map(function (s) {
      return el("li", null, el("span", { class: "sw", style: "background:" + colour(s.id) }), s.name);
    }));
    return el("figure", { class: "scaling-fig" }, figs,
      el("figcaption", null, "Scaling with length (log-log): a slope of 2 is quadratic, 1 linear; " +
        "memory includes the parameters and optimizer state, which do not grow with length.", keys));
  }

  // ------------------------------------------------------------------------------------------
  // Peers.

  var peersDrawn = false;
  function drawPeers() {
    if (peersDrawn) return;
    peersDrawn = true;
    var p = D.peers, sec = document.getElementById("page-peers");
    add(sec, el("h2", null, "Attention layer vs the best third-party implementation (CPU, fwd+bwd)"),
      el("p", { class: "note" }, "The newest peers file, ",
        el("a", { href: effHref(p.file) }, p.file), ", as the Markdown tabulates it."),
      p.paras.map(function (h) { return el("p", { html: h }); }),
      el("div", { class: "scroll" }, el("table", { class: "peers" },
        el("thead", null, el("tr", null, p.header.map(function (h) {
          return el("th", { scope: "col", html: h }); }))),
        el("tbody", null, p.rows.map(function (r) {
          return el("tr", null, r.map(function (c, i) {
            return el(i ? "td" : "th", { scope: i ? null : "row", html: c }); }));
        })))),
      p.older.length ? el("p", { class: "note" }, "Older peers files (each in LEADERBOARD.md): ",
        p.older.map(function (f, i) { return [i ? ", " : "", el("a", { href: effHref(f) }, f)]; })) : null);
  }

  // ------------------------------------------------------------------------------------------
  // Tooltips on hover and on keyboard focus; Escape closes a cell.

  var tip = document.getElementById("tip");
  function showTip(target, x, y) {
    tip.textContent = target.getAttribute("data-tip");
    tip.hidden = false;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    var left = Math.min(Math.max(4, x + 12), window.innerWidth - w - 4);
    var top = y + 16 + h > window.innerHeight ? y - h - 12 : y + 16;
    tip.style.left = left + "px";
    tip.style.top = Math.max(4, top) + "px";
  }
  function tipTarget(node) { return node && node.closest ? node.closest("[data-tip]") : null; }
  document.addEventListener("mouseover", function (ev) {
    var t = tipTarget(ev.target);
    if (t) showTip(t, ev.clientX, ev.clientY); else tip.hidden = true;
  });
  document.addEventListener("mousemove", function (ev) {
    if (!tip.hidden && tipTarget(ev.target)) showTip(tipTarget(ev.target), ev.clientX, ev.clientY);
  });
  document.addEventListener("focusin", function (ev) {
    var t = tipTarget(ev.target);
    if (!t) { tip.hidden = true; return; }
    var r = t.getBoundingClientRect();
    showTip(t, r.left, r.bottom - 8);
  });
  document.addEventListener("focusout", function () { tip.hidden = true; });
  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "Escape") return;
    tip.hidden = true;
    var d = document.getElementById("detail");
    if (d && !d.hidden && state.view) location.hash = "#" + state.view.id;
  });

  window.addEventListener("hashchange", route);
  route();
})();
