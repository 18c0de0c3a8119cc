/* Charts zoom to a time range: drag across a chart (canvas[data-zoom]) and the page reloads showing just that span
   of buckets (?from=&to=, the buckets' own bounds from the chart's data). A click without a drag does nothing. */
(function () {
  "use strict";

  function bucketAt(chart, x) {
    var index = Math.round(chart.scales.x.getValueForPixel(x));
    return Math.max(0, Math.min(index, chart.data.labels.length - 1));
  }

  function band(canvas) {
    var box = canvas.parentElement;
    var shade = box.querySelector(".zoom-band");
    if (!shade) {
      shade = document.createElement("div");
      shade.className = "zoom-band";
      box.appendChild(shade);
    }
    return shade;
  }

  function watch(canvas) {
    if (canvas.dataset.zoomWatched) { return; }
    canvas.dataset.zoomWatched = "1";
    var start = null;
    canvas.addEventListener("mousedown", function (event) {
      start = event.offsetX;
    });
    canvas.addEventListener("mousemove", function (event) {
      if (start === null) { return; }
      var shade = band(canvas);
      shade.style.left = Math.min(start, event.offsetX) + "px";
      shade.style.width = Math.abs(event.offsetX - start) + "px";
      shade.style.display = "block";
    });
    canvas.addEventListener("mouseup", function (event) {
      var from = start;
      start = null;
      band(canvas).style.display = "none";
      var chart = Chart.getChart(canvas);
      var source = document.getElementById(canvas.dataset.series);
      if (from === null || !chart || !source || Math.abs(event.offsetX - from) < 6) { return; }
      var edges = JSON.parse(source.textContent).edges || [];
      var first = bucketAt(chart, Math.min(from, event.offsetX));
      var last = bucketAt(chart, Math.max(from, event.offsetX));
      if (!edges.length) { return; }
      var url = new URL(window.location.href);
      url.searchParams.set("from", edges[first]);
      url.searchParams.set("to", edges[Math.min(last + 1, edges.length - 1)]);
      url.searchParams.delete("page");
      window.location.assign(url.toString());
    });
  }

  htmx.onLoad(function (root) {
    (root.querySelectorAll ? root : document).querySelectorAll("canvas[data-zoom]").forEach(watch);
  });
})();
