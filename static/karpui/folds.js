/* Folds stay as a person left them: a live region swapped in by htmx's polling would otherwise close every
   <details data-fold> that was open. The ids are stable across refreshes (derived from what the row groups). */
(function () {
  "use strict";
  var open = {};

  document.addEventListener("htmx:beforeSwap", function (event) {
    event.detail.target.querySelectorAll("details[data-fold]").forEach(function (fold) {
      open[fold.dataset.fold] = fold.open;
    });
  });

  document.addEventListener("htmx:afterSettle", function (event) {
    event.detail.target.ownerDocument.querySelectorAll("details[data-fold]").forEach(function (fold) {
      if (open[fold.dataset.fold]) { fold.open = true; }
    });
  });
})();
