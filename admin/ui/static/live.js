// Live parts of the admin UI: an element with data-live="URL" has its
// content replaced by what URL answers, every data-every milliseconds
// (default 2000), while the page is visible. A session that has ended
// reloads the page, which then leads to the sign-in form.
//
// The answer is HTML the server wrote with all it shows escaped. It is
// parsed in a document of its own, where nothing runs or loads, and its
// nodes are moved in without any script element or on… attribute, so no
// markup in what it shows can run here even if some got through (the
// page's Content-Security-Policy forbids inline script besides).
"use strict";
(function () {
  // nodes returns what html holds, parsed as the content of el: rows are
  // parsed inside a table, where they belong.
  function nodes(el, html) {
    var rows = el.tagName === "TBODY";
    var doc = new DOMParser().parseFromString(rows ? "<table><tbody>" + html + "</tbody></table>" : html, "text/html");
    var root = rows ? doc.querySelector("tbody") : doc.body;
    root.querySelectorAll("script").forEach(function (s) { s.remove(); });
    root.querySelectorAll("*").forEach(function (n) {
      Array.prototype.slice.call(n.attributes).forEach(function (a) {
        if (/^on/i.test(a.name)) {
          n.removeAttribute(a.name);
        }
      });
    });
    return Array.prototype.slice.call(root.childNodes);
  }

  // actions takes away the forms of actions a live part says are no
  // longer possible (a work item that finished while its page was open is
  // no longer cancelled): an element with data-actions lists those still
  // possible; each form with data-action not among them goes, and the
  // section that held them when none is left.
  function actions(el) {
    var now = el.querySelector("[data-actions]");
    if (!now) {
      return;
    }
    var still = now.dataset.actions.split(" ");
    document.querySelectorAll("[data-action]").forEach(function (form) {
      if (still.indexOf(form.dataset.action) < 0) {
        form.remove();
      }
    });
    document.querySelectorAll("[data-actions-section]").forEach(function (section) {
      if (!section.querySelector("[data-action]")) {
        section.remove();
      }
    });
  }

  document.querySelectorAll("[data-live]").forEach(function (el) {
    var every = Number(el.dataset.every || 2000);
    var shown = null; // the answer in el now, once one replaced what the page came with
    function tick() {
      if (document.hidden) {
        setTimeout(tick, every);
        return;
      }
      fetch(el.dataset.live, { credentials: "same-origin", headers: { "X-Live": "1" } })
        .then(function (resp) {
          if (resp.status === 401) {
            window.location.reload();
            return null;
          }
          return resp.ok ? resp.text() : null;
        })
        .then(function (html) {
          if (html !== null && html !== shown) {
            shown = html;
            el.replaceChildren.apply(el, nodes(el, html));
            actions(el);
            el.dispatchEvent(new CustomEvent("live-updated", { bubbles: true }));
          }
        })
        .catch(function () {})
        .finally(function () { setTimeout(tick, every); });
    }
    setTimeout(tick, every);
  });
})();
