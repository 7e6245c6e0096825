// RelayMQ console: confirmations, live figures and the rates chart. No inline script
// (the Content-Security-Policy allows only this file).
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) { event.preventDefault(); }
    });
  });
  var live = document.querySelector("[data-source]");
  if (!live) { return; }
  var source = live.getAttribute("data-source");
  var canvas = document.getElementById("rates");
  var chart = destinationChart(document.getElementById("destination-chart"));
  var points = [];
  function draw() {
    if (!canvas) { return; }
    var ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    var max = Math.max(1, Math.max.apply(null, points.map(function (p) { return Math.max(p[0], p[1]); })));
    [["#2a7", 0], ["#c52", 1]].forEach(function (series) {
      ctx.strokeStyle = series[0];
      ctx.beginPath();
      points.forEach(function (p, i) {
        var x = i * canvas.width / 60, y = canvas.height - p[series[1]] / max * (canvas.height - 10);
        if (i === 0) { ctx.moveTo(x, y); } else { ctx.lineTo(x, y); }
      });
      ctx.stroke();
    });
  }
  function refresh() {
    fetch(source, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (data) {
      document.querySelectorAll("[data-live]").forEach(function (cell) {
        var key = cell.getAttribute("data-live");
        if (key in data) { cell.textContent = data[key]; }
      });
      if ("enqueue_rate" in data) {
        points.push([data.enqueue_rate, data.dequeue_rate]);
        if (points.length > 60) { points.shift(); }
        draw();
      }
      if (chart && "depth" in data) { chart.add(data); }
    }).catch(function () {});
  }
  // Poll while the page is visible (every data-interval ms: the dashboard every 5 s
  // by default, a queue's page every second); a hidden page (a background tab, a
  // minimised window) asks the broker for nothing until it is shown again.
  var interval = Number(live.getAttribute("data-interval")) || 1000;
  var timer = null;
  function schedule() {
    if (document.hidden) {
      if (timer !== null) { clearInterval(timer); timer = null; }
      live.setAttribute("data-polling", "paused");
    } else if (timer === null) {
      refresh();
      timer = setInterval(refresh, interval);
      live.setAttribute("data-polling", "on");
    }
  }
  document.addEventListener("visibilitychange", schedule);
  schedule();
});

// A destination's depth (top) and enqueue/dequeue rates (bottom) over the last
// SAMPLES refreshes, drawn into the page's <svg id="destination-chart">. The svg's
// data-samples and data-last attributes say what it shows (for people and tests).
function destinationChart(svg) {
  if (!svg) { return null; }
  var SAMPLES = 120, W = 600, H = 70, NS = "http://www.w3.org/2000/svg";
  var samples = [];
  function round1(v) { return Math.round(v * 10) / 10; }
  function line(id, top, color) {
    var el = document.createElementNS(NS, "polyline");
    el.setAttribute("id", id);
    el.setAttribute("fill", "none");
    el.setAttribute("stroke", color);
    el.setAttribute("stroke-width", "1.5");
    el.dataset.top = String(top);
    svg.appendChild(el);
    return el;
  }
  function label(y) {
    var el = document.createElementNS(NS, "text");
    el.setAttribute("x", "4");
    el.setAttribute("y", String(y));
    el.setAttribute("font-size", "11");
    el.setAttribute("fill", "#556");
    svg.appendChild(el);
    return el;
  }
  var depthLine = line("depth-line", 10, "#23395d");
  var inLine = line("enqueue-line", 90, "#2a7");
  var outLine = line("dequeue-line", 90, "#c52");
  var depthLabel = label(10), rateLabel = label(90);
  function plot(el, values, max) {
    var top = Number(el.dataset.top);
    el.setAttribute("points", values.map(function (v, i) {
      var x = (i * W / (SAMPLES - 1)).toFixed(1);
      var y = (top + H - v / max * H).toFixed(1);
      return x + "," + y;
    }).join(" "));
  }
  return {
    add: function (data) {
      var rates = data.rates || {};
      samples.push([data.depth, rates.enqueue || 0, rates.dequeue || 0]);
      if (samples.length > SAMPLES) { samples.shift(); }
      var depths = samples.map(function (p) { return p[0]; });
      var ins = samples.map(function (p) { return p[1]; });
      var outs = samples.map(function (p) { return p[2]; });
      var maxDepth = Math.max(1, Math.max.apply(null, depths));
      var maxRate = Math.max(1, Math.max.apply(null, ins.concat(outs)));
      plot(depthLine, depths, maxDepth);
      plot(inLine, ins, maxRate);
      plot(outLine, outs, maxRate);
      depthLabel.textContent = "depth " + data.depth + " (max " + maxDepth + ")";
      rateLabel.textContent = "in " + round1(rates.enqueue || 0) + " / out " +
        round1(rates.dequeue || 0) + " per s (max " + round1(maxRate) + ")";
      svg.setAttribute("data-samples", String(samples.length));
      svg.setAttribute("data-last", samples[samples.length - 1].join(","));
    }
  };
}
