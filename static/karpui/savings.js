/* The savings chart: cost per hour stacked by NodePool, and the dashed baseline without consolidation.
   Redrawn whenever htmx swaps in a fresh #savings section (htmx.onLoad also runs once for the page). */
(function () {
  "use strict";
  var palette = ["#2456c7", "#1f9d8a", "#c77d24", "#8a3fb8", "#c72456", "#5b8c1f", "#6b7280", "#0e7490"];

  function datasets(series) {
    var sets = series.pools.map(function (pool, i) {
      var colour = palette[i % palette.length];
      return {
        label: pool.name, data: pool.cost, stack: "cost", stepped: true, pointRadius: 0, borderWidth: 1,
        borderColor: colour, backgroundColor: colour + "55", fill: i === 0 ? "origin" : "-1"
      };
    });
    sets.push({
      label: "without consolidation", data: series.baseline, stack: "baseline", stepped: true, pointRadius: 0,
      borderColor: "#1d2330", borderDash: [6, 4], borderWidth: 2, fill: false
    });
    return sets;
  }

  function draw(root) {
    root.querySelectorAll("canvas[data-series]").forEach(function (canvas) {
      var source = document.getElementById(canvas.dataset.series);
      if (!source) { return; }
      var series = JSON.parse(source.textContent);
      var previous = Chart.getChart(canvas);
      if (previous) { previous.destroy(); }
      new Chart(canvas, {
        type: "line",
        data: { labels: series.labels, datasets: datasets(series) },
        options: {
          animation: false, maintainAspectRatio: false,
          interaction: { mode: "index", intersect: false },
          scales: {
            x: { ticks: { maxTicksLimit: 12 } },
            y: { stacked: true, beginAtZero: true, title: { display: true, text: "$ per hour" } }
          },
          plugins: {
            tooltip: { callbacks: { label: function (item) {
              return item.dataset.label + ": $" + Number(item.raw).toFixed(4) + "/h";
            } } }
          }
        }
      });
    });
  }

  htmx.onLoad(draw);
})();
