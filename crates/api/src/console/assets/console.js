// gtm console: live updates, and forms that show what applies. The device's stream (/ui/stream, Server-Sent
// Events) says "change"; every element of the page with a data-refresh
// URL (the records table, the followed logs) is fetched again from it
// (with the page's filters) and swapped in by its id. No inline script anywhere: the Content-Security-Policy
// allows this file only.
"use strict";

(function () {
  function live(text) {
    var el = document.getElementById("live");
    if (el) el.textContent = text;
  }

  var fetching = false;
  var again = false;

  function refresh() {
    var target = document.querySelector("[data-refresh]");
    if (!target) return;
    var id = target.id;
    if (fetching) { again = true; return; }
    fetching = true;
    // Marked as the page's own doing: a live update does not keep an
    // unattended session from its idle timeout.
    fetch(target.getAttribute("data-refresh"), {
      credentials: "same-origin",
      cache: "no-store",
      headers: { "X-Gtm-Background": "1" }
    })
      .then(function (r) {
        // An ended session is sent to the login page: follow it.
        if (r.redirected && r.url.indexOf("/ui/login") !== -1) {
          window.location.reload();
          return null;
        }
        return r.ok ? r.text() : null;
      })
      .then(function (html) {
        if (html === null) return;
        var t = document.createElement("template");
        t.innerHTML = html;
        var fresh = t.content.firstElementChild;
        var current = document.getElementById(id);
        if (fresh && fresh.id === id && current) {
          if (id === "records" && rowsOnly(current, fresh)) return;
          // Keep the reader's scroll position in a wide table.
          var scroller = current.querySelector(".scroll");
          var left = scroller ? scroller.scrollLeft : 0;
          current.replaceWith(fresh);
          var next = fresh.querySelector(".scroll");
          if (next) next.scrollLeft = left;
        }
      })
      .catch(function () { live("Live updates: the device does not answer; retrying…"); })
      .finally(function () {
        fetching = false;
        if (again) { again = false; refresh(); }
      });
  }

  // When the fresh table has the same rows in the same order and the same
  // count, only its head and the rows that changed are swapped in: focus,
  // scroll and selection stay where the reader left them.
  function rowsOnly(current, fresh) {
    var keys = function (el) {
      var rows = el.querySelectorAll("tbody tr[data-record]");
      var out = [];
      for (var i = 0; i < rows.length; i++) out.push(rows[i].getAttribute("data-record"));
      return out.join("\n");
    };
    var count = function (el) {
      var c = el.querySelector(".count");
      return c ? c.outerHTML : "";
    };
    if (!current.querySelector("tbody tr[data-record]")) return false;
    if (keys(current) !== keys(fresh) || count(current) !== count(fresh)) return false;
    var oldHead = current.querySelector("thead");
    var newHead = fresh.querySelector("thead");
    if (oldHead && newHead && oldHead.outerHTML !== newHead.outerHTML) oldHead.replaceWith(newHead);
    var old = current.querySelectorAll("tbody tr[data-record]");
    var rows = fresh.querySelectorAll("tbody tr[data-record]");
    for (var i = 0; i < rows.length; i++) {
      if (old[i].outerHTML !== rows[i].outerHTML) old[i].replaceWith(rows[i]);
    }
    return true;
  }

  function start() {
    if (!document.querySelector("[data-refresh]") || !window.EventSource) return;
    // What the page was made from: the stream announces a change at once
    // only when the device has moved on since.
    var status = document.getElementById("live");
    var since = status && status.getAttribute("data-since");
    var source = new EventSource("/ui/stream" + (since ? "?since=" + encodeURIComponent(since) : ""));
    source.addEventListener("open", function () { live("Live updates: on"); });
    source.addEventListener("change", refresh);
    source.addEventListener("error", function () {
      if (source.readyState === EventSource.CLOSED) {
        // Not a stream any more (the session ended: the device sent the
        // login page): load the page again, which leads to the login.
        live("Live updates: off");
        window.setTimeout(function () { window.location.reload(); }, 3000);
      } else {
        live("Live updates: reconnecting…");
      }
    });
  }

  // A form shows only the fields that apply: an element with
  // data-when="f-type:A,AAAA" is shown while the control #f-type holds one
  // of those values (data-empty: what an empty value means). Without this
  // script every field shows; the device drops those that do not apply.
  function when() {
    var els = document.querySelectorAll("[data-when]");
    for (var i = 0; i < els.length; i++) {
      var spec = els[i].getAttribute("data-when");
      var at = spec.indexOf(":");
      var control = document.getElementById(spec.slice(0, at));
      if (!control) continue;
      var value = control.value || els[i].getAttribute("data-empty") || "";
      els[i].hidden = spec.slice(at + 1).split(",").indexOf(value) === -1;
    }
  }

  // A condition is checked as it is typed: the element named by
  // data-terms is fetched again from its data-terms-url with the text, and
  // shows each term's truth on every device, or what is wrong.
  var typing = null;
  function terms(input) {
    var target = document.getElementById(input.getAttribute("data-terms"));
    if (!target) return;
    window.clearTimeout(typing);
    typing = window.setTimeout(function () {
      var url = target.getAttribute("data-terms-url") + "?id=" + encodeURIComponent(target.id) +
        "&condition=" + encodeURIComponent(input.value);
      fetch(url, {
        credentials: "same-origin",
        cache: "no-store"
      })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (html === null) return;
          var t = document.createElement("template");
          t.innerHTML = html;
          var fresh = t.content.firstElementChild;
          var current = document.getElementById(target.id);
          if (fresh && current && fresh.id === current.id) current.replaceWith(fresh);
        })
        .catch(function () {});
    }, 250);
  }

  function ready() {
    when();
    document.addEventListener("change", function (e) {
      if (e.target.tagName === "SELECT") when();
    });
    document.addEventListener("input", function (e) {
      if (e.target.hasAttribute && e.target.hasAttribute("data-terms")) terms(e.target);
    });
    start();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
