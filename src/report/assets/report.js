/* lockjaw report.html: draws the timeline for the visible window from the
   embedded compact JSON (#lj-data), so 100,000 ops stay responsive: only
   ops inside the window are drawn, and a lane with more ops than pixels is
   drawn as density bins (anomaly and highlighted ops are always drawn). */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("lj-data").textContent);
  var O = D.ops, n = O.s.length, LH = 34, AX = 22;
  var S = new Float64Array(n), E = new Float64Array(n), acc = 0, i;
  var byIdx = new Map();
  for (i = 0; i < n; i++) {
    acc += O.s[i]; S[i] = acc; E[i] = O.d[i] < 0 ? -1 : acc + O.d[i];
    byIdx.set(O.i[i], i); if (O.c[i] > 0) byIdx.set(O.i[i] + O.c[i], i);
  }
  var END = Math.max(D.end, 1);
  var NL = D.lanes.length;
  var laneRows = [], laneMax = [], holdRows = [], holdMax = [];
  for (i = 0; i < NL; i++) { laneRows.push([]); laneMax.push(0); holdRows.push([]); holdMax.push(0); }
  for (i = 0; i < n; i++) {
    var l = O.l[i]; laneRows[l].push(i);
    laneMax[l] = Math.max(laneMax[l], (E[i] < 0 ? END : E[i]) - S[i]);
  }
  var H = D.holds, nh = H.s.length;
  function holdEnd(h) { return H.e[h] >= 0 ? H.e[h] : Math.max(H.le[h], H.s[h]); }
  for (i = 0; i < nh; i++) {
    holdRows[H.l[i]].push(i);
    holdMax[H.l[i]] = Math.max(holdMax[H.l[i]], holdEnd(i) - H.s[i]);
  }
  holdRows.forEach(function (r) { r.sort(function (a, b) { return H.s[a] - H.s[b]; }); });
  var anomRows = new Set();
  D.anoms.forEach(function (a) { a.ops.forEach(function (x) { if (byIdx.has(x)) anomRows.add(byIdx.get(x)); }); });
  var view = { a: 0, b: END }, hl = new Set(), plot = document.getElementById("tl-plot");

  function width() { return Math.max(plot.clientWidth || 0, 300); }
  function secs(us) { return (us / 1e6).toFixed(us < 1e7 ? 4 : 3) + " s"; }
  function esc(s) { return String(s).replace(/[&<>"]/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]; }); }
  function lower(arr, key, x) { var lo = 0, hi = arr.length; while (lo < hi) { var m = (lo + hi) >> 1; if (key(arr[m]) < x) lo = m + 1; else hi = m; } return lo; }
  function fname(r) { return D.fs[O.f[r]]; }
  function outcome(r) { return ["ok", "fail", "info", "pending"][O.o[r]]; }
  function opTitle(r) {
    var c = O.c[r] > 0 ? "→#" + (O.i[r] + O.c[r]) : "";
    var t = "#" + O.i[r] + c + " p" + D.procs[O.p[r]] + " " + fname(r) + " " + outcome(r);
    if (O.k[r] !== null) t += " key " + D.keys[O.k[r]];
    if (O.v[r] !== null) t += " value " + O.v[r];
    if (O.fe[r] !== null) t += " fence " + O.fe[r];
    if (O.x[r] !== null) t += " · " + O.x[r];
    return t + "\n" + secs(S[r]) + " – " + (E[r] < 0 ? "never completed" : secs(E[r]));
  }
  function opClass(r) {
    var o = outcome(r), c = "op " + o;
    if (o === "fail" && notable(r)) c += " refused";
    if (anomRows.has(r)) c += " anom";
    if (hl.has(r)) c += " hl";
    return c;
  }
  function opFill(r) {
    var f = fname(r), o = O.o[r];
    if (f === "read" || f === "write" || f === "cas") {
      if (o === 0) return f === "read" ? "#a6f4c5" : "#32d583";
      if (o === 1) return O.x[r] && O.x[r].indexOf("stale-fence") >= 0 ? "#f97066" : "#fecdca";
      return "#d0d5dd";
    }
    var base = { acquire: "#b2ddff", release: "#d9d6fe", renew: "#99f6e0" }[f] || "#e4e7ec";
    return o === 1 ? "#eaecf0" : base;
  }
  /* Worth a red mark in the density bins: an indeterminate op or a storage
     request refused for a stale fence (a failed acquire is routine). */
  function notable(r) { return O.o[r] === 2 || (O.o[r] === 1 && O.x[r] !== null && O.x[r].indexOf("stale-fence") >= 0); }

  function axis(w, k) {
    var span = view.b - view.a, raw = span / 8, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = mag * [1, 2, 5, 10].find(function (m) { return raw <= m * mag; });
    var s = "", t = Math.ceil(view.a / step) * step;
    for (; t <= view.b; t += step) {
      var x = k(t);
      s += '<line x1="' + x + '" x2="' + x + '" y1="' + (AX - 4) + '" y2="' + (AX + NL * LH) + '" class="lane-sep"/>';
      s += '<text class="axis-t" x="' + (x + 2) + '" y="12">' + (t / 1e6).toFixed(step < 1e3 ? 4 : step < 1e6 ? 3 : 1) + " s</text>";
    }
    return s;
  }

  function visible(rows, maxd, startOf, lo) {
    var j = lower(rows, startOf, view.a - maxd), out = [];
    for (; j < rows.length && startOf(rows[j]) <= view.b; j++) { if (lo(rows[j])) out.push(rows[j]); }
    return out;
  }

  function drawHolds(l, y, k, w) {
    var s = "", rows = visible(holdRows[l], holdMax[l], function (h) { return H.s[h]; }, function (h) { return holdEnd(h) >= view.a; });
    if (rows.length > w / 2) return '<text class="lbl" x="4" y="' + (y + 12) + '">' + rows.length + " holds (zoom in)</text>";
    rows.forEach(function (h) {
      var x0 = k(H.s[h]), end = holdEnd(h), le = H.le[h];
      var cut = le >= 0 && H.e[h] >= 0 && le < H.e[h] ? le : end;
      var t = "hold: owner " + (H.ow[h] || "?") + (H.fe[h] !== null ? " fence " + H.fe[h] : "") + ", acquired (op #" + H.a[h] + ") at " + secs(H.s[h]) +
        (H.e[h] >= 0 ? ", release began (op #" + H.r[h] + ") at " + secs(H.e[h]) : ", never released") + (le >= 0 ? "; lease end ≈ " + secs(le) : "");
      var open = H.e[h] < 0 ? " open" : "";
      s += '<rect class="hold' + open + '" data-hold="' + H.a[h] + '" x="' + x0 + '" y="' + (y + 3) + '" width="' + Math.max(1, k(cut) - x0) + '" height="11"><title>' + esc(t) + "</title></rect>";
      if (cut < end) s += '<rect class="hold past" x="' + k(cut) + '" y="' + (y + 3) + '" width="' + Math.max(1, k(end) - k(cut)) + '" height="11"><title>' + esc("held past its lease end: " + t) + "</title></rect>";
      if (le >= 0) s += '<line class="lease-end' + (H.e[h] >= 0 && H.e[h] <= le ? " done" : "") + '" x1="' + k(le) + '" x2="' + k(le) + '" y1="' + (y + 1) + '" y2="' + (y + 16) + '"><title>' + esc("lease end ≈ " + secs(le)) + "</title></line>";
      var wd = k(end) - x0;
      if (H.fe[h] !== null && wd > 18) s += '<text class="lbl" x="' + (x0 + 2) + '" y="' + (y + 12) + '">' + (wd > 60 ? "fence " : "") + H.fe[h] + "</text>";
    });
    return s;
  }

  function drawOp(r, y, k) {
    var x0 = k(S[r]), x1 = k(E[r] < 0 ? END : E[r]), wd = Math.max(2, x1 - x0);
    var s = '<rect class="' + opClass(r) + '" data-op="' + O.i[r] + '" data-done="' + (O.c[r] > 0 ? O.i[r] + O.c[r] : "") + '" data-row="' + r + '" x="' + x0 + '" y="' + (y + 17) + '" width="' + wd + '" height="13" fill="' + opFill(r) + '"><title>' + esc(opTitle(r)) + "</title></rect>";
    if (O.o[r] === 1 && O.x[r] && O.x[r].indexOf("stale-fence") >= 0) s += '<path class="mark-x" d="M' + (x1 - 4) + "," + (y + 19) + "l6,9m0,-9l-6,9" + '"/>';
    if (wd > 34) s += '<text class="lbl" x="' + (x0 + 2) + '" y="' + (y + 27) + '">#' + O.i[r] + " " + esc(fname(r)) + (O.fe[r] !== null && wd > 80 ? " f" + O.fe[r] : "") + "</text>";
    return s;
  }

  function drawLane(l, k, w) {
    var y = AX + l * LH, s = '<g data-lane="' + esc(D.lanes[l].id) + '">';
    s += '<line class="lane-sep" x1="0" x2="' + w + '" y1="' + (y + LH) + '" y2="' + (y + LH) + '"/>';
    if (D.lanes[l].kind !== "nemesis") s += drawHolds(l, y, k, w);
    var rows = visible(laneRows[l], laneMax[l], function (r) { return S[r]; }, function (r) { return (E[r] < 0 ? END : E[r]) >= view.a; });
    if (rows.length > w / 3) {
      var bins = new Map(), bad = new Map();
      rows.forEach(function (r) {
        var b = Math.floor(k(S[r]) / 3); bins.set(b, (bins.get(b) || 0) + 1);
        if (notable(r)) bad.set(b, (bad.get(b) || 0) + 1);
      });
      var max = 0; bins.forEach(function (c) { max = Math.max(max, c); });
      bins.forEach(function (c, b) {
        var cls = bad.has(b) ? "agg agg-bad" : "agg";
        s += '<rect class="' + cls + '" x="' + b * 3 + '" y="' + (y + 17) + '" width="3" height="13" fill-opacity="' + (0.25 + 0.75 * c / max).toFixed(2) + '"><title>' + c + " ops (zoom in)</title></rect>";
      });
      rows = rows.filter(function (r) { return anomRows.has(r) || hl.has(r); });
    }
    rows.forEach(function (r) { s += drawOp(r, y, k); });
    return s + "</g>";
  }

  function render() {
    var w = width(), span = Math.max(view.b - view.a, 1);
    var k = function (t) { return ((t - view.a) / span * w).toFixed(1); };
    var s = '<svg id="tl-svg" width="' + w + '" height="' + (AX + NL * LH) + '" xmlns="http://www.w3.org/2000/svg">';
    s += '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fecdca"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c0262d" stroke-width="2"/></pattern></defs>';
    D.bands.forEach(function (b) {
      if (b.e < view.a || b.s > view.b) return;
      var x0 = Math.max(0, +k(b.s)), x1 = Math.min(w, +k(b.e));
      s += '<rect class="band" x="' + x0 + '" y="' + AX + '" width="' + Math.max(2, x1 - x0) + '" height="' + NL * LH + '"><title>' + esc(b.label + (b.open ? " (never stopped)" : "") + ": " + secs(b.s) + " – " + secs(b.e)) + "</title></rect>";
      s += '<text class="band-lbl" x="' + (x0 + 2) + '" y="' + (AX + 11) + '">' + esc(b.label) + "</text>";
    });
    s += axis(w, k);
    for (var l = 0; l < NL; l++) s += drawLane(l, k, w);
    plot.innerHTML = s + "</svg>";
    document.getElementById("tl-range").textContent = secs(view.a) + " – " + secs(view.b);
    overview();
    document.getElementById("timeline").setAttribute("data-rendered", "1");
  }

  function overview() {
    var w = width() + 171, k = function (t) { return (t / END * w).toFixed(1); };
    var s = '<svg width="' + w + '" height="18">';
    D.bands.forEach(function (b) { s += '<rect x="' + k(b.s) + '" y="0" width="' + Math.max(1, k(b.e) - k(b.s)) + '" height="18" fill="#f79009" fill-opacity="0.25"/>'; });
    anomRows.forEach(function (r) { s += '<rect x="' + k(S[r]) + '" y="2" width="2" height="14" fill="#c0262d"/>'; });
    s += '<rect x="' + k(view.a) + '" y="0.5" width="' + Math.max(2, k(view.b) - k(view.a)) + '" height="17" fill="#175cd3" fill-opacity="0.12" stroke="#175cd3"/>';
    document.getElementById("overview").innerHTML = s + "</svg>";
  }

  function setView(a, b) {
    var span = Math.min(Math.max(b - a, 5), END * 1.2);
    a = Math.max(-END * 0.1, Math.min(a, END * 1.1 - span));
    view = { a: a, b: a + span }; render();
  }
  function zoom(f, at) { at = at === undefined ? (view.a + view.b) / 2 : at; setView(at - (at - view.a) * f, at + (view.b - at) * f); }

  function details(title, rows) {
    var h = "<b>" + esc(title) + "</b>";
    if (rows.length) {
      h += '<table class="t"><tr><th>op</th><th>process</th><th>f</th><th>outcome</th><th>invoked</th><th>completed</th><th>key</th><th>value</th><th>fence</th><th>details</th></tr>';
      rows.forEach(function (r) {
        h += '<tr data-row="' + r + '" class="' + (hl.has(r) ? "hl" : "") + '"><td class="mono">#' + O.i[r] + (O.c[r] > 0 ? " → #" + (O.i[r] + O.c[r]) : "") + "</td><td>" + esc(D.procs[O.p[r]]) + "</td><td>" + esc(fname(r)) + "</td><td>" + outcome(r) +
          "</td><td>" + secs(S[r]) + "</td><td>" + (E[r] < 0 ? "—" : secs(E[r])) + "</td><td>" + (O.k[r] === null ? "" : esc(D.keys[O.k[r]])) + "</td><td>" + (O.v[r] === null ? "" : esc(O.v[r])) +
          "</td><td>" + (O.fe[r] === null ? "" : O.fe[r]) + "</td><td>" + (O.x[r] === null ? "" : esc(O.x[r])) + "</td></tr>";
      });
      h += "</table>";
    }
    document.getElementById("details").innerHTML = h;
  }

  function focusRows(rows, title) {
    hl = new Set(rows);
    if (rows.length) {
      var a = Infinity, b = -Infinity;
      rows.forEach(function (r) { a = Math.min(a, S[r]); b = Math.max(b, E[r] < 0 ? S[r] : E[r]); });
      var pad = Math.max((b - a) * 0.25, 2000);
      setView(a - pad, b + pad);
    } else render();
    details(title, rows);
    document.getElementById("timeline").scrollIntoView({ block: "start" });
  }
  function focusAnom(j) {
    var a = D.anoms[j]; if (!a) return;
    document.querySelectorAll("a.anom-link").forEach(function (e) { e.classList.toggle("sel", +e.getAttribute("data-anom") === j); });
    var rows = a.ops.filter(function (x) { return byIdx.has(x); }).map(function (x) { return byIdx.get(x); });
    rows = Array.from(new Set(rows)).sort(function (x, y) { return S[x] - S[y]; });
    focusRows(rows, "[" + a.side + "] " + a.text);
  }
  function focusOp(idx) { if (byIdx.has(idx)) focusRows([byIdx.get(idx)], "op #" + idx); }

  document.addEventListener("click", function (ev) {
    var t = ev.target.closest ? ev.target.closest("[data-anom],[data-op],[data-row],button[data-act]") : null;
    if (!t) return;
    if (t.hasAttribute("data-anom")) { ev.preventDefault(); focusAnom(+t.getAttribute("data-anom")); history.replaceState(null, "", "#anom-" + t.getAttribute("data-anom")); }
    else if (t.tagName === "A" && t.hasAttribute("data-op")) { ev.preventDefault(); focusOp(+t.getAttribute("data-op")); }
    else if (t.hasAttribute("data-row")) { var r = +t.getAttribute("data-row"); if (t.tagName === "TR") focusRows([r], "op #" + O.i[r]); else { hl = new Set([r]); render(); details("op #" + O.i[r], [r]); } }
    else if (t.hasAttribute("data-act")) {
      var act = t.getAttribute("data-act"), span = view.b - view.a;
      if (act === "fit") setView(0, END); else if (act === "in") zoom(0.5); else if (act === "out") zoom(2);
      else if (act === "left") setView(view.a - span / 3, view.b - span / 3); else if (act === "right") setView(view.a + span / 3, view.b + span / 3);
    }
  });
  plot.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var r = plot.getBoundingClientRect(), at = view.a + (ev.clientX - r.left) / width() * (view.b - view.a);
    zoom(ev.deltaY > 0 ? 1.25 : 0.8, at);
  }, { passive: false });
  var drag = null;
  plot.addEventListener("mousedown", function (ev) { drag = { x: ev.clientX, a: view.a, b: view.b }; });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    var d = (ev.clientX - drag.x) / width() * (drag.b - drag.a);
    if (Math.abs(ev.clientX - drag.x) > 2) setView(drag.a - d, drag.b - d);
  });
  document.getElementById("overview").addEventListener("click", function (ev) {
    var r = this.getBoundingClientRect(), at = (ev.clientX - r.left) / r.width * END, span = view.b - view.a;
    setView(at - span / 2, at + span / 2);
  });
  window.addEventListener("resize", render);

  render();
  var m = /^#(anom|op)-(\d+)$/.exec(location.hash);
  if (m && m[1] === "anom") focusAnom(+m[2]); else if (m) focusOp(+m[2]);
  if (location.hash === "#selftest") selftest();

  /* Drives every control once (for headless tests): a script error on the
     way lands in #lj-errors; the steps done go into data-selftest. */
  function selftest() {
    var done = [], click = function (el) { if (el) { el.dispatchEvent(new MouseEvent("click", { bubbles: true })); return true; } return false; };
    ["in", "out", "left", "right"].forEach(function (a) { click(document.querySelector('button[data-act="' + a + '"]')); done.push(a); });
    plot.dispatchEvent(new WheelEvent("wheel", { deltaY: -120, clientX: 400, bubbles: true, cancelable: true })); done.push("wheel");
    plot.dispatchEvent(new MouseEvent("mousedown", { clientX: 400, bubbles: true }));
    window.dispatchEvent(new MouseEvent("mousemove", { clientX: 340 }));
    window.dispatchEvent(new MouseEvent("mouseup")); done.push("drag");
    D.anoms.forEach(function (_, j) { click(document.querySelector('a[data-anom="' + j + '"]')); });
    done.push("anomalies:" + D.anoms.length);
    if (click(document.querySelector("a.oplink"))) done.push("oplink");
    if (click(document.querySelector("#details tr[data-row]"))) done.push("detail-row");
    if (click(plot.querySelector("rect[data-row]"))) done.push("op-rect");
    click(document.getElementById("overview")); done.push("overview");
    click(document.querySelector('button[data-act="fit"]')); done.push("fit");
    document.getElementById("timeline").setAttribute("data-selftest", done.join(" "));
  }
})();
