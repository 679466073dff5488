// The timeline's behaviour: draw the run from the embedded data (#data, row layouts in
// sim/src/html/data.rs) for the current view, zoom to the witness on open, zoom and pan by
// keyboard, buttons and wheel, show a mark's details on hover or focus, filter by run id.
// It fetches nothing. On success <body data-ok="1" data-drawn="N">; on an error
// <body data-error="...">.
(function () {
  "use strict";
  var body = document.body;
  window.addEventListener("error", function (e) {
    body.setAttribute("data-error", String(e.message || e));
  });
  try {
    var D = JSON.parse(document.getElementById("data").textContent);
    var svg = document.getElementById("timeline");
    var content = document.getElementById("content");
    var axisG = document.getElementById("axis");
    var num = function (k) { return +svg.getAttribute(k); };
    var X0 = num("data-x0"), X1 = num("data-x1"), H = num("data-h");
    var RUN_TOP = num("data-run-top"), RUN_H = num("data-run-h");
    var LANE_TOP = num("data-lane-top"), LANE_H = num("data-lane-h"), OTHER_TOP = num("data-other-top");
    var S = D.strings, END = D.end;
    var view = { a: 0, b: END };
    var runFilter = -2; // -2: every run
    var laneOf = {};
    D.lanes.forEach(function (l, i) { laneOf[l.node] = i; });
    var violators = {};
    D.violators.forEach(function (c) { violators[c] = true; });
    // Marks at the same instant on one lane are stacked in rows of four, then shifted right.
    var stack = [], prevKey = "", k = 0;
    D.calls.forEach(function (c) {
      var key = c[1] + ":" + c[0];
      k = key === prevKey ? k + 1 : 0;
      prevKey = key;
      stack.push(k);
    });
    function X(t) { return X0 + (t - view.a) / (view.b - view.a) * (X1 - X0); }
    function clip(x) { return Math.max(X0 - 5, Math.min(X1 + 5, x)); }
    function fmt(ns) { return (ns / 1e9).toFixed(3) + "s"; }
    function esc(s) {
      return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
    }
    function inView(a, b) { return b >= view.a && a <= view.b; }
    function fill(epoch) { return "hsl(" + ((epoch * 137 + 200) % 360) + ",65%,72%)"; }
    function runY(r) { return r === 0 ? RUN_TOP : OTHER_TOP + (r - 1) * (RUN_H + 3); }
    function laneY(node) { return LANE_TOP + (laneOf[node] || 0) * LANE_H; }
    function dim(run) { return runFilter !== -2 && run !== runFilter ? " dim" : ""; }
    function rect(cls, a, b, y, h, attrs, inner) {
      var x1 = clip(X(a)), x2 = clip(X(b));
      var r = "<rect class=\"" + cls + "\" x=\"" + x1.toFixed(1) + "\" y=\"" + y + "\" width=\"" +
        Math.max(1, x2 - x1).toFixed(1) + "\" height=\"" + h + "\"" + (attrs || "");
      return inner ? r + ">" + inner + "</rect>" : r + "/>";
    }
    function vline(cls, t, y1, y2, title) {
      var x = X(t).toFixed(1);
      return "<line class=\"" + cls + "\" x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" + y1 + "\" y2=\"" + y2 + "\">" +
        (title ? "<title>" + esc(title) + "</title>" : "") + "</line>";
    }
    function draw() {
      var out = [];
      D.lanes.forEach(function (l) {
        var y = laneY(l.node);
        l.crashes.forEach(function (c) {
          var back = END;
          for (var i = 0; i < l.restarts.length; i++) { if (l.restarts[i][0] >= c[0]) { back = l.restarts[i][0]; break; } }
          if (inView(c[0], back)) {
            out.push(rect("dead", c[0], back, y + 2, LANE_H - 4, ""));
            out.push(vline("crash", c[0], y + 2, y + LANE_H - 2, "CRASH n" + l.node + " at " + fmt(c[0]) + ": " + S[c[1]]));
          }
        });
        l.restarts.forEach(function (r) {
          if (inView(r[0], r[0])) { out.push(vline("restart", r[0], y + 2, y + LANE_H - 2, "RESTART n" + l.node + " at " + fmt(r[0]) + ": incarnation " + r[1])); }
        });
        l.stalls.forEach(function (s) {
          if (!inView(s[0], s[1])) { return; }
          out.push(rect("stall", s[0], s[1], y + 2, 8, "", "<title>n" + l.node + " " + esc(S[s[2]]) + " (" + fmt(s[0]) + " to " + fmt(s[1]) + ")</title>"));
          // Named in words where the span is wide enough; its title always names it.
          if (X(s[1]) - X(s[0]) > 6 * S[s[2]].length) {
            out.push("<text class=\"stall-label\" x=\"" + (clip(X(s[0])) + 2).toFixed(1) + "\" y=\"" + (y + 19) + "\">" + esc(S[s[2]]) + "</text>");
          }
        });
      });
      D.tenures.forEach(function (t, i) {
        var run = t[0], start = t[4], spans = t[5], end = t[6];
        if (!inView(start, end)) { return; }
        var y = runY(run), cls = "tenure" + (i === D.contradicted ? " contradicted" : "") + dim(run);
        var title = D.runs[run] + " epoch " + t[1] + " held by " + S[t[2]] + (t[3] >= 0 ? " on n" + t[3] : "") +
          ": granted " + fmt(start) + ", expiry by the store clock " + fmt(t[8][t[8].length - 1]) + ", " + S[t[7]] +
          " at " + fmt(end) + "; " + t[9].length + " renewal(s)";
        // The whole tenure faded (held past its expiry), its live spans on top.
        var g = "<g class=\"" + cls + "\" data-tenure=\"" + i + "\"><title>" + esc(title) + "</title>";
        if (end > start) { g += rect("expired", start, end, y + 3, RUN_H - 6, ""); }
        spans.forEach(function (sp) { g += rect("live", sp[0], sp[1], y, RUN_H, " fill=\"" + fill(t[1]) + "\""); });
        t[9].forEach(function (r) { if (inView(r, r)) { g += vline("renewal", r, y + RUN_H - 6, y + RUN_H); } });
        t[11].forEach(function (r) {
          if (inView(r, r)) { g += vline("foreign", r, y, y + RUN_H, "a call not holding this tenure moved its expiry at " + fmt(r)); }
        });
        // An expiry tick where a live span ran out before the tenure ended (a renewal in time
        // moves the expiry on and leaves no tick).
        spans.forEach(function (sp) {
          if (sp[1] < end && inView(sp[1], sp[1])) { g += vline("expiry", sp[1], y - 2, y + RUN_H + 2); }
        });
        var liveEnd = spans.length ? spans[0][1] : start;
        if (X(liveEnd) - X(start) > 40) {
          g += "<text x=\"" + (clip(X(start)) + 3).toFixed(1) + "\" y=\"" + (y + RUN_H - 4) + "\">e" + t[1] + " " + esc(S[t[2]]) + "</text>";
        }
        out.push(g + "</g>");
      });
      var culprit = D.culprit === null ? null : D.calls[D.culprit];
      var ten = D.contradicted === null ? null : D.tenures[D.contradicted];
      if (culprit && ten && D.gap) {
        var a = D.gap[0], b = D.gap[1];
        if (inView(a, b)) {
          var gy = runY(ten[0]);
          // A band under the run's row (the tenures drawn on the row stay visible) and its words.
          out.push("<g class=\"gap-group" + dim(ten[0]) + "\">" + rect("gap", a, b, gy + RUN_H + 1, 6, " id=\"gap\"") +
            "<text class=\"gap-label\" x=\"" + (clip(X(a)) + 3).toFixed(1) + "\" y=\"" + (gy + RUN_H + 17) + "\">outside e" +
            ten[1] + "'s tenure (" + Math.round((b - a) / 1e6) + " ms)</text></g>");
        }
      }
      D.facts.forEach(function (f, i) {
        if (!inView(f[0], f[0])) { return; }
        var x = X(f[0]).toFixed(1), y = laneY(f[1]) + LANE_H - 8;
        out.push("<g class=\"fact " + esc(S[f[2]]) + dim(f[4]) + "\" tabindex=\"0\" data-f=\"" + i + "\" transform=\"translate(" + x + "," + y +
          ")\"><title>" + esc(S[f[3]]) + "</title><rect class=\"shape\" x=\"-3.5\" y=\"-3.5\" width=\"7\" height=\"7\" transform=\"rotate(45)\"/></g>");
      });
      var drawn = 0;
      D.calls.forEach(function (c, i) {
        var x = X(c[0]);
        if (x < X0 - 10 || x > X1 + 10) { return; }
        var s = stack[i];
        var y = laneY(c[1]) + 17 + (s % 4) * 6, dx = Math.floor(s / 4) * 7;
        var cls = "mark " + D.classes[c[8]] + (c[9] ? " was-applied" : "") + (violators[c[13]] ? " violator" : "") +
          (i === D.culprit ? " culprit" : "") + dim(c[6]);
        var mutation = !/^(boot|load|get_meta|list_runs|blob_get|blob_list) /.test(S[c[4]]);
        var shape = mutation ? "<circle class=\"shape\" r=\"3.6\"/>" : "<rect class=\"shape\" x=\"-3\" y=\"-3\" width=\"6\" height=\"6\"/>";
        out.push("<g class=\"" + cls + "\" tabindex=\"0\" data-i=\"" + i + "\" data-call=\"" + c[13] + "\" transform=\"translate(" +
          (x + dx).toFixed(1) + "," + y + ")\">" + (i === D.culprit ? "<circle class=\"ring\" r=\"8\"/>" : "") + shape + "</g>");
        drawn++;
      });
      if (culprit && inView(culprit[0], culprit[0])) { out.push(vline("culprit-line", culprit[0], 14, H)); }
      if (D.heal !== null && inView(D.heal, D.heal)) { out.push(vline("heal-line", D.heal, 14, H, "heal: faults off, every node up")); }
      content.innerHTML = out.join("");
      axis();
      document.getElementById("view").textContent = fmt(view.a) + " .. " + fmt(view.b);
      body.setAttribute("data-drawn", String(drawn));
    }
    function axis() {
      var span = view.b - view.a, out = [];
      var steps = [1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 2e8, 5e8, 1e9, 2e9, 5e9, 1e10, 3e10, 6e10];
      var step = steps[steps.length - 1];
      for (var i = 0; i < steps.length; i++) { if (span / steps[i] <= 12) { step = steps[i]; break; } }
      for (var t = Math.ceil(view.a / step) * step; t <= view.b; t += step) {
        var x = X(t).toFixed(1);
        var label = step >= 1e9 ? (t / 1e9).toFixed(0) + "s" : step >= 1e6 ? (t / 1e6).toFixed(0) + "ms" : (t / 1e6).toFixed(1) + "ms";
        out.push("<line x1=\"" + x + "\" x2=\"" + x + "\" y1=\"14\" y2=\"" + H + "\"/><text x=\"" + x + "\" y=\"11\" text-anchor=\"middle\">" + label + "</text>");
      }
      axisG.innerHTML = out.join("");
    }
    function setView(a, b) {
      if (b - a < 1e5) { var c = (a + b) / 2; a = c - 5e4; b = c + 5e4; }
      view.a = a; view.b = b;
      draw();
    }
    function zoom(f, at) {
      var c = at === undefined ? (view.a + view.b) / 2 : at;
      setView(c - (c - view.a) * f, c + (view.b - c) * f);
    }
    function pan(f) { var d = (view.b - view.a) * f; setView(view.a + d, view.b + d); }
    function witness() { if (D.focus) { setView(D.focus[0], D.focus[1]); } else { setView(0, END); } }
    function whole() { setView(0, END); }
    var details = document.getElementById("details");
    function show(el) {
      var lines = [];
      if (el.hasAttribute("data-f")) {
        var f = D.facts[+el.getAttribute("data-f")];
        lines.push("fact " + S[f[3]] + "  node n" + f[1] + "  at " + fmt(f[0]));
      } else if (el.hasAttribute("data-i")) {
        var i = +el.getAttribute("data-i"), c = D.calls[i];
        lines.push("call #" + c[13] + "  " + S[c[4]] + (c[5] !== null ? " seq=" + c[5] : "") + "  run " +
          (c[6] >= 0 ? D.runs[c[6]] : "-") + "  epoch " + (c[7] === null ? "-" : c[7]));
        lines.push("outcome " + S[c[12]] + "  (" + D.classes[c[8]] + (c[9] ? ", applied as mutation #" + c[10] : ", nothing applied") + ")");
        lines.push("node n" + c[1] + " incarnation " + c[2] + "  invoked " + fmt(c[0] - c[3]) + "  returned " + fmt(c[0]) +
          "  store clock " + (c[11] === null ? "-" : c[11] + "ms"));
        if (i === D.culprit) { lines.push("the witness's culprit call"); }
      } else { return; }
      details.textContent = lines.join("\n");
    }
    function target(e) {
      var el = e.target;
      while (el && el !== svg && !(el.hasAttribute && (el.hasAttribute("data-i") || el.hasAttribute("data-f")))) { el = el.parentNode; }
      return el && el !== svg ? el : null;
    }
    svg.addEventListener("mouseover", function (e) { var el = target(e); if (el) { show(el); } });
    svg.addEventListener("focusin", function (e) { var el = target(e); if (el) { show(el); } });
    var filter = document.getElementById("run-filter");
    filter.addEventListener("change", function () {
      runFilter = filter.value === "" ? -2 : D.runs.indexOf(filter.value);
      var rows = svg.querySelectorAll(".run-row");
      for (var i = 0; i < rows.length; i++) {
        rows[i].classList.toggle("dim", filter.value !== "" && rows[i].getAttribute("data-run") !== filter.value);
      }
      draw();
    });
    document.addEventListener("keydown", function (e) {
      if (e.target && e.target.tagName === "SELECT") { return; }
      var key = e.key;
      if (key === "+" || key === "=") { zoom(0.5); }
      else if (key === "-" || key === "_") { zoom(2); }
      else if (key === "ArrowLeft") { pan(-0.2); }
      else if (key === "ArrowRight") { pan(0.2); }
      else if (key === "0") { whole(); }
      else if (key === "w") { witness(); }
      else { return; }
      e.preventDefault();
    });
    svg.addEventListener("wheel", function (e) {
      if (!e.ctrlKey && !e.shiftKey) { return; }
      e.preventDefault();
      var r = svg.getBoundingClientRect();
      var px = (e.clientX - r.left) / r.width * svg.viewBox.baseVal.width;
      var at = view.a + (px - X0) / (X1 - X0) * (view.b - view.a);
      if (e.shiftKey) { pan(e.deltaY > 0 ? 0.1 : -0.1); } else { zoom(e.deltaY > 0 ? 1.25 : 0.8, at); }
    }, { passive: false });
    document.getElementById("zoom-in").addEventListener("click", function () { zoom(0.5); });
    document.getElementById("zoom-out").addEventListener("click", function () { zoom(2); });
    document.getElementById("pan-left").addEventListener("click", function () { pan(-0.2); });
    document.getElementById("pan-right").addEventListener("click", function () { pan(0.2); });
    document.getElementById("whole").addEventListener("click", whole);
    document.getElementById("to-witness").addEventListener("click", witness);
    witness();
    var c0 = svg.querySelector(".mark.culprit");
    if (c0) { show(c0); }
    // Opened as page.html#selftest (the browser test), the page drives its own controls
    // and writes what happened to <body data-selftest="...">.
    if (window.location.hash === "#selftest") {
      var res = [], key = function (k) { document.dispatchEvent(new KeyboardEvent("keydown", { key: k })); };
      whole();
      key("+");
      res.push("zoom=" + (Math.abs((view.b - view.a) * 2 - END) < 2 ? "ok" : "bad"));
      var a0 = view.a;
      key("ArrowRight");
      res.push("pan=" + (view.a > a0 ? "ok" : "bad"));
      key("0");
      res.push("whole=" + (view.a === 0 && view.b === END ? "ok" : "bad"));
      if (D.runs.length > 0) {
        filter.value = D.runs[0];
        filter.dispatchEvent(new Event("change"));
        var dimmed = svg.querySelectorAll(".mark.dim").length, shown = svg.querySelectorAll(".mark:not(.dim)").length;
        var wrong = 0;
        Array.prototype.forEach.call(svg.querySelectorAll(".mark:not(.dim)"), function (m) {
          if (D.calls[+m.getAttribute("data-i")][6] !== 0) { wrong++; }
        });
        res.push("filter=" + (wrong === 0 && shown > 0 ? "ok" : "bad") + "/" + shown + "/" + dimmed);
        filter.value = "";
        filter.dispatchEvent(new Event("change"));
      }
      var m0 = svg.querySelector(".mark");
      if (m0) {
        m0.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
        res.push("hover=" + (details.textContent.indexOf("call #" + m0.getAttribute("data-call")) === 0 ? "ok" : "bad"));
      }
      key("w");
      res.push("witness=" + (D.focus === null || view.a === D.focus[0] ? "ok" : "bad"));
      body.setAttribute("data-selftest", res.join(" "));
    }
    if (!body.hasAttribute("data-error")) { body.setAttribute("data-ok", "1"); }
  } catch (err) {
    body.setAttribute("data-error", String(err && err.message ? err.message : err));
  }
})();
