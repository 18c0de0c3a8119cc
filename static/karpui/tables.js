/* Every table downloads as CSV: a "CSV" link under it. A paged list names its server's export (data-csv: every row
   its filters keep, not just this page); any other table is written from what it shows. Links are added again
   after htmx swaps a live region in. */
(function () {
  "use strict";

  function cell(text) {
    var value = text.replace(/\s+/g, " ").trim();
    return /[",\n]/.test(value) ? '"' + value.replace(/"/g, '""') + '"' : value;
  }

  function csv(table) {
    return Array.prototype.map.call(table.rows, function (row) {
      return Array.prototype.map.call(row.cells, function (c) { return cell(c.innerText || c.textContent || ""); }).join(",");
    }).join("\n") + "\n";
  }

  function name(table) {
    var title = (table.id || document.title.split("·")[0] || "table").trim().toLowerCase().replace(/[^a-z0-9]+/g, "-");
    return title.replace(/^-|-$/g, "") + ".csv";
  }

  function link(table) {
    if (table.dataset.noCsv !== undefined || table.nextElementSibling && table.nextElementSibling.classList.contains("csv")) {
      return;
    }
    var a = document.createElement("a");
    a.className = "csv muted";
    a.textContent = table.dataset.csv ? "CSV (every row)" : "CSV";
    if (table.dataset.csv) {
      a.href = table.dataset.csv;
    } else {
      a.href = "#";
      a.addEventListener("click", function (event) {
        event.preventDefault();
        var url = URL.createObjectURL(new Blob([csv(table)], { type: "text/csv" }));
        var save = document.createElement("a");
        save.href = url;
        save.download = name(table);
        document.body.appendChild(save);
        save.click();
        save.remove();
        URL.revokeObjectURL(url);
      });
    }
    a.setAttribute("download", table.dataset.csv ? "" : name(table));
    table.insertAdjacentElement("afterend", a);
  }

  function all(root) {
    (root.querySelectorAll ? root : document).querySelectorAll("table").forEach(link);
    if (root.tagName === "TABLE") { link(root); }
  }

  document.addEventListener("DOMContentLoaded", function () { all(document); });
  document.addEventListener("htmx:load", function (event) { all(event.detail.elt); });
})();
