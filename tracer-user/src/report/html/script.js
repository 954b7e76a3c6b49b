// Clicking a lane highlights its certificate and the signals it sent or
// received; clicking again (or elsewhere) clears. No data lives here.
(function () {
  "use strict";
  var svg = document.getElementById("timeline-svg");
  document.body.setAttribute("data-js", "ok");
  if (!svg) { return; }
  function clear() {
    var on = document.querySelectorAll(".hl, .dim");
    for (var i = 0; i < on.length; i++) { on[i].classList.remove("hl", "dim"); }
  }
  svg.addEventListener("click", function (ev) {
    var lane = ev.target.closest ? ev.target.closest("g.lane") : null;
    var was = lane && lane.classList.contains("hl");
    clear();
    if (!lane || was) { return; }
    lane.classList.add("hl");
    var pid = lane.getAttribute("data-pid");
    var arrows = svg.querySelectorAll(".arrow");
    for (var i = 0; i < arrows.length; i++) {
      var a = arrows[i];
      if (a.getAttribute("data-from") !== pid && a.getAttribute("data-to") !== pid) {
        a.classList.add("dim");
      }
    }
    var card = document.querySelector("article.cert[data-pid=\"" + pid + "\"]");
    if (card) { card.classList.add("hl"); }
  });
})();
