// Live parts of the admin UI: an element with data-live="URL" has its
// content replaced by what URL answers, every data-every milliseconds
// (default 2000), while the page is visible. A session that has ended
// reloads the page, which then leads to the sign-in form.
"use strict";
document.querySelectorAll("[data-live]").forEach(function (el) {
  var every = Number(el.dataset.every || 2000);
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
        if (html !== null && el.innerHTML !== html) {
          el.innerHTML = html;
          el.dispatchEvent(new CustomEvent("live-updated", { bubbles: true }));
        }
      })
      .catch(function () {})
      .finally(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
});
