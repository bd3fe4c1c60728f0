// The status page, live: polls GET /v1/status each second (with the
// cookie the sign-in set), updates every [data-k] field and bar, keeps the
// last five minutes of depth, rate and p99 per destination and draws them.
(function () {
  "use strict";
  var KEEP = 300;
  var loaded = Date.now();
  var history = {};
  var polls = 0;
  function text(v) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(1);
    if (typeof v === "object") return v.kind + ": " + v.message;
    return String(v);
  }
  function line(points, max) {
    return points.map(function (v, i) {
      var x = (KEEP - points.length + i) * (300 / (KEEP - 1));
      var y = 58 - (max > 0 ? (v / max) * 56 : 0);
      return x.toFixed(1) + "," + y.toFixed(1);
    }).join(" ");
  }
  function draw(card, h, d) {
    var chart = card.querySelector(".chart");
    if (!chart) return;
    var depthMax = Math.max(d.capacity, 1);
    var rateMax = Math.max(d.ceiling || d.rate, Math.max.apply(null, h.rate), 1);
    var p99Max = Math.max(d.target_p99_ms || 0, Math.max.apply(null, h.p99), 1);
    chart.querySelector(".depth").setAttribute("points", line(h.depth, depthMax));
    chart.querySelector(".rate").setAttribute("points", line(h.rate, rateMax));
    chart.querySelector(".p99").setAttribute("points", line(h.p99, p99Max));
  }
  function update(status) {
    var known = {};
    status.destinations.forEach(function (d) {
      known[d.name] = true;
      var card = document.querySelector('.dest[data-name="' + CSS.escape(d.name) + '"]');
      // A new one is drawn by the relay: reloaded at once, or (among the
      // busiest, a set that moves each second) at most every 10 s.
      if (!card) {
        if (status.shown !== "busiest" || Date.now() - loaded > 10000) location.reload();
        return;
      }
      card.querySelectorAll("[data-k]").forEach(function (el) {
        var k = el.getAttribute("data-k");
        var v = k === "last_error" && !d[k] ? "none" : text(d[k]);
        if (el.textContent !== v) el.textContent = v;
      });
      var breaker = card.querySelector(".breaker");
      breaker.className = "breaker " + d.breaker;
      var full = d.capacity > 0 ? Math.min(100, d.depth / d.capacity * 100) : 0;
      var fill = card.querySelector(".fill");
      fill.style.width = full.toFixed(1) + "%";
      fill.className = "fill" + (full >= 95 ? " full" : full >= 80 ? " high" : "");
      var h = history[d.name] || (history[d.name] = { depth: [], rate: [], p99: [] });
      h.depth.push(d.depth); h.rate.push(d.rate_now); h.p99.push(d.p99_ms || 0);
      ["depth", "rate", "p99"].forEach(function (k) { if (h[k].length > KEEP) h[k].shift(); });
      draw(card, h, d);
    });
    document.querySelectorAll(".dest").forEach(function (card) {
      if (!known[card.getAttribute("data-name")]) card.remove();
    });
    var ready = document.getElementById("ready");
    ready.setAttribute("data-ready", String(status.ready));
    ready.textContent = status.ready ? "ready" : "not ready: " +
      status.down.map(function (d) { return d.name + " (" + d.detail + ")"; }).join(", ");
  }
  function poll() {
    fetch("/v1/status" + location.search, { headers: { accept: "application/json" }, cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) { location.reload(); throw new Error("signed out"); }
        return r.json();
      })
      .then(function (status) {
        update(status);
        polls += 1;
        document.body.setAttribute("data-polls", String(polls));
        document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
      })
      .catch(function () {
        document.getElementById("updated").textContent = "relay unreachable, retrying";
      })
      .finally(function () { setTimeout(poll, 1000); });
  }
  document.addEventListener("click", function (e) {
    var name = e.target.getAttribute && e.target.getAttribute("data-redrive");
    if (!name) return;
    var said = e.target.parentNode.querySelector(".said");
    said.textContent = "redriving…";
    fetch("/v1/dead-letters/redrive", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ destination: name })
    }).then(function (r) { return r.json().then(function (b) { return [r.status, b]; }); })
      .then(function (a) {
        said.textContent = a[0] === 200 ? "re-admitted " + a[1].readmitted : (a[1].detail || "refused");
      })
      .catch(function () { said.textContent = "failed"; });
  });
  poll();
})();
