// ProxOps agent dashboard: theme, control token, actions, live updates, table filter and sort.
// Plain script, no library; every page is rendered by the agent and works without it.
"use strict";
(function () {
  var root = document.documentElement;
  try {
    var saved = localStorage.getItem("proxops-theme");
    if (saved) root.dataset.theme = saved;
  } catch (e) { /* storage disabled: the system theme applies */ }

  var TOKEN = "proxops-token";
  function token() {
    try { return sessionStorage.getItem(TOKEN) || ""; } catch (e) { return ""; }
  }
  function $(id) { return document.getElementById(id); }

  function notice(text, kind) {
    var n = $("notice");
    if (!n) return;
    n.textContent = text;
    n.className = kind || "";
  }

  function showToken() {
    var b = $("token-button");
    if (!b) return;
    var has = token() !== "";
    b.textContent = has ? "Token ✓" : "Token";
    b.classList.toggle("has-token", has);
  }

  function setupTheme() {
    var b = $("theme-button");
    if (!b) return;
    function label() {
      var dark = root.dataset.theme
        ? root.dataset.theme === "dark"
        : window.matchMedia("(prefers-color-scheme: dark)").matches;
      b.textContent = dark ? "☀ Light" : "☾ Dark";
      return dark;
    }
    label();
    b.addEventListener("click", function () {
      var next = label() ? "light" : "dark";
      root.dataset.theme = next;
      try { localStorage.setItem("proxops-theme", next); } catch (e) { /* not kept */ }
      label();
    });
  }

  function setupToken() {
    var b = $("token-button"), d = $("token-dialog"), f = $("token-form"), i = $("token-input");
    if (!b || !d || !f || !i) return;
    b.addEventListener("click", function () { i.value = ""; d.showModal(); i.focus(); });
    $("token-cancel").addEventListener("click", function () { d.close(); });
    $("token-forget").addEventListener("click", function () {
      try { sessionStorage.removeItem(TOKEN); } catch (e) { /* nothing kept */ }
      d.close(); showToken(); notice("Token forgotten.", "");
    });
    f.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var t = i.value.trim();
      if (t) {
        try { sessionStorage.setItem(TOKEN, t); } catch (e) { notice("This tab cannot keep the token.", "bad"); }
      }
      d.close(); showToken();
      if (t) notice("Token saved for this tab.", "good");
    });
    showToken();
  }

  // Actions post to the agent's control API; its token and Origin checks decide.
  function act(button) {
    var cluster = button.dataset.cluster, verb = button.dataset.action, resource = button.dataset.resource;
    var url = "/v1/clusters/" + encodeURIComponent(cluster) + "/" + verb;
    if (resource) url += "?resource=" + encodeURIComponent(resource);
    var headers = {};
    if (token()) headers.Authorization = "Bearer " + token();
    button.disabled = true;
    notice((verb === "reconcile" ? "Reconciling " : verb + " ") + (resource || cluster) + "…", "");
    fetch(url, { method: "POST", headers: headers, credentials: "omit" })
      .then(function (r) {
        return r.text().then(function (body) { return { status: r.status, body: body }; });
      })
      .then(function (res) {
        if (res.status >= 200 && res.status < 300) {
          var text = verb + " " + (resource || cluster) + ": done";
          try {
            var j = JSON.parse(res.body);
            if (j.lastCycle) {
              var c = j.lastCycle;
              text = "cluster " + j.name + ": " + c.result + ": " + c.planned + " planned, " + c.succeeded + " succeeded, " + c.failed + " failed";
            } else if (typeof j.suspended === "boolean") {
              text = (j.resource || j.cluster) + ": " + (j.suspended ? "suspended" : "resumed") + (j.changed ? "" : " (already)");
            }
          } catch (e) { /* plain text */ }
          notice(text, "good");
          refresh();
        } else {
          var why = res.body.trim();
          if (res.status === 401) why += " — set the token with the Token button.";
          notice("refused (" + res.status + "): " + why, "bad");
          if (res.status === 401 && !token()) $("token-button").focus();
        }
      })
      .catch(function (e) { notice("the agent cannot be reached: " + e, "bad"); })
      .then(function () { button.disabled = false; });
  }

  // Live updates: each `status` event re-renders <main> from the agent's page.
  var loading = false, again = false, rendered = null;
  function refresh() {
    if (loading) { again = true; return; }
    loading = true;
    fetch(location.pathname + location.search, { headers: { Accept: "text/html" }, cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main"), main = $("main");
        // Unchanged: the DOM (focus, selection, what a reader looks at) is left alone.
        if (!fresh || !main || fresh.innerHTML === rendered) return;
        rendered = fresh.innerHTML;
        var q = $("filter") ? $("filter").value : "", s = $("state-filter") ? $("state-filter").value : "";
        var focused = document.activeElement && document.activeElement.id;
        main.innerHTML = fresh.innerHTML;
        if ($("filter")) $("filter").value = q;
        if ($("state-filter")) $("state-filter").value = s;
        applySort(); applyFilter();
        if (focused && $(focused)) $(focused).focus();
        document.title = doc.title;
        main.dispatchEvent(new CustomEvent("proxops:updated", { bubbles: true }));
      })
      .catch(function () { /* the next event tries again */ })
      .then(function () {
        loading = false;
        if (again) { again = false; refresh(); }
      });
  }

  function setupLive() {
    var live = $("live");
    if (!window.EventSource || !live) return;
    var es = new EventSource("/ui/events");
    es.addEventListener("open", function () { live.textContent = "live"; live.classList.add("on"); });
    es.addEventListener("error", function () { live.textContent = "reconnecting"; live.classList.remove("on"); });
    es.addEventListener("status", function (ev) {
      live.textContent = "live"; live.classList.add("on");
      try {
        var s = JSON.parse(ev.data);
        live.title = "Live updates: " + s.passes + " passes";
      } catch (e) { /* not JSON: still a change */ }
      // Also the first: the status may have changed between the page and the stream.
      refresh();
    });
  }

  // Resource table: text filter, state filter, sortable columns (remembered across updates).
  var sortCol = -1, sortDir = 1;
  function cellText(row, i) {
    var c = row.children[i];
    return c ? c.textContent.trim().toLowerCase() : "";
  }
  function applySort() {
    var t = $("resources");
    if (!t || sortCol < 0) return;
    var body = t.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellText(a, sortCol), y = cellText(b, sortCol);
      return x < y ? -sortDir : x > y ? sortDir : 0;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(t.tHead.rows[0].cells, function (th, i) {
      th.setAttribute("aria-sort", i === sortCol ? (sortDir > 0 ? "ascending" : "descending") : "none");
    });
  }
  function applyFilter() {
    var t = $("resources");
    if (!t) return;
    var q = ($("filter").value || "").trim().toLowerCase(), s = $("state-filter").value, shown = 0;
    Array.prototype.forEach.call(t.tBodies[0].rows, function (r) {
      var ok = (!s || r.dataset.state === s) && (!q || r.textContent.toLowerCase().indexOf(q) >= 0);
      r.hidden = !ok;
      if (ok) shown++;
    });
    var n = $("shown");
    if (n) n.textContent = shown + " of " + t.tBodies[0].rows.length + " shown";
  }

  document.addEventListener("click", function (ev) {
    var b = ev.target.closest && ev.target.closest("button");
    if (!b) return;
    if (b.classList.contains("act")) { act(b); return; }
    if (b.classList.contains("sort")) {
      var col = Number(b.dataset.col);
      sortDir = col === sortCol ? -sortDir : 1;
      sortCol = col;
      applySort();
    }
  });
  document.addEventListener("input", function (ev) {
    if (ev.target.id === "filter" || ev.target.id === "state-filter") applyFilter();
  });
  document.addEventListener("change", function (ev) {
    if (ev.target.id === "state-filter") applyFilter();
  });
  document.addEventListener("DOMContentLoaded", function () {
    if ($("main")) rendered = $("main").innerHTML;
    setupTheme(); setupToken(); setupLive(); applyFilter();
  });
})();
