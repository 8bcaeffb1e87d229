/* The book's only script: dark/light toggle, contents folded on narrow screens, search.
   Search uses MiniSearch (vendored, MIT) over _static/search-index.js, which the renderer
   writes from myst's myst.search.json; everything works from file:// and offline. */
(function () {
  "use strict";
  var root = document.documentElement;

  // ---- dark mode: follows prefers-color-scheme until the reader picks one
  var toggle = document.getElementById("theme-toggle");
  function effectiveTheme() {
    if (root.dataset.theme) return root.dataset.theme;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  if (toggle) {
    toggle.addEventListener("click", function () {
      var next = effectiveTheme() === "dark" ? "light" : "dark";
      root.dataset.theme = next;
      try { localStorage.setItem("book-theme", next); } catch (e) { /* file:// in some browsers */ }
    });
  }

  // ---- contents: folded on narrow screens so the page starts with the page
  var toc = document.querySelector(".sidebar details.toc");
  if (toc && window.matchMedia && window.matchMedia("(max-width: 52rem)").matches) toc.removeAttribute("open");

  // ---- search
  var input = document.getElementById("search-input");
  var list = document.getElementById("search-results");
  var docs = window.BOOK_SEARCH_DOCS || [];
  if (!input || !list || !window.MiniSearch) return;
  var index = new window.MiniSearch({
    fields: ["title", "text"],
    storeFields: ["title", "page", "url", "text"],
    searchOptions: { boost: { title: 2 }, prefix: true, fuzzy: 0.15, combineWith: "AND" }
  });
  index.addAll(docs);

  function snippet(text, terms) {
    var lower = text.toLowerCase(), at = -1;
    for (var i = 0; i < terms.length && at < 0; i++) at = lower.indexOf(terms[i].toLowerCase());
    var start = Math.max(0, at - 60);
    return (start > 0 ? "… " : "") + text.slice(start, start + 180).replace(/\s+/g, " ") + "…";
  }
  function show(query) {
    list.textContent = "";
    if (query.trim().length < 2) { list.hidden = true; return; }
    var hits = [], pages = {};  // the best section of each page, best pages first
    index.search(query).forEach(function (h) {
      if (!pages[h.page] && hits.length < 12) { pages[h.page] = true; hits.push(h); }
    });
    if (!hits.length) {
      var none = document.createElement("li");
      none.className = "search-empty";
      none.textContent = "No results for “" + query + "”";
      list.appendChild(none);
    }
    hits.forEach(function (h) {
      var li = document.createElement("li");
      var a = document.createElement("a");
      a.href = h.url;
      var t = document.createElement("span");
      t.className = "search-title";
      t.textContent = h.title || h.page;
      var s = document.createElement("span");
      s.className = "search-snippet";
      s.textContent = snippet(h.text || "", h.terms || []);
      a.appendChild(t);
      a.appendChild(s);
      li.appendChild(a);
      list.appendChild(li);
    });
    list.hidden = false;
  }
  input.addEventListener("input", function () { show(input.value); });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { input.value = ""; show(""); }
    if (e.key === "Enter") { var first = list.querySelector("a"); if (first) window.location.href = first.href; }
  });
  document.addEventListener("click", function (e) {
    if (!e.target.closest || !e.target.closest(".search")) list.hidden = true;
  });
  var q = new URLSearchParams(window.location.search).get("q");  // book pages accept ?q=term
  if (q) { input.value = q; show(q); }
})();
