/* The trends charts: pending pods, nodes per NodePool (stacked), pod start latency (p50, p95) and the nodes each
   bucket disrupted (stacked bars, counted, never scaled to a rate). Redrawn whenever htmx swaps in a fresh #trends section (htmx.onLoad also runs once). */
(function () {
  "use strict";
  var palette = ["#2456c7", "#1f9d8a", "#c77d24", "#8a3fb8", "#c72456", "#5b8c1f", "#6b7280", "#0e7490"];

  function colour(i) { return palette[i % palette.length]; }

  function line(label, data, i, extra) {
    var c = colour(i);
    return Object.assign({ label: label, data: data, pointRadius: 0, borderWidth: 2, borderColor: c,
      backgroundColor: c + "55", spanGaps: false }, extra || {});
  }

  var charts = {
    pending: function (s) {
      return { type: "line", datasets: [line("pods pending", s.pending, 0, { stepped: true, fill: "origin" })],
        y: "pods", stacked: false };
    },
    nodes: function (s) {
      return { type: "line", y: "nodes", stacked: true, datasets: s.nodes.map(function (pool, i) {
        return line(pool.name, pool.values, i, { stepped: true, borderWidth: 1, fill: i === 0 ? "origin" : "-1" });
      }) };
    },
    latency: function (s) {
      return { type: "line", y: "seconds", stacked: false, datasets: [
        line("p50", s.latency.p50, 0, { pointRadius: 2 }),
        line("p95", s.latency.p95, 2, { pointRadius: 2, borderDash: [6, 4] })
      ] };
    },
    disruptions: function (s) {
      return { type: "bar", y: "nodes per " + s.bucket, stacked: true, datasets: s.disruptions.map(function (reason, i) {
        return { label: reason.name, data: reason.values, backgroundColor: colour(i + 3) };
      }) };
    }
  };

  function draw(root) {
    root.querySelectorAll("canvas[data-trend]").forEach(function (canvas) {
      var source = document.getElementById(canvas.dataset.series);
      if (!source) { return; }
      var series = JSON.parse(source.textContent);
      var spec = charts[canvas.dataset.trend](series);
      var previous = Chart.getChart(canvas);
      if (previous) { previous.destroy(); }
      new Chart(canvas, {
        type: spec.type,
        data: { labels: series.labels, datasets: spec.datasets },
        options: {
          animation: false, maintainAspectRatio: false,
          interaction: { mode: "index", intersect: false },
          scales: {
            x: { stacked: spec.stacked, ticks: { maxTicksLimit: 8 } },
            y: { stacked: spec.stacked, beginAtZero: true, title: { display: true, text: spec.y } }
          }
        }
      });
    });
  }

  htmx.onLoad(draw);
})();
