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
    }).catch(function () {});
  }
  setInterval(refresh, 1000);
});
