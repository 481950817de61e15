// Progressive enhancement only: every page works without this file.
// Live search on the catalog, a refreshing server list, and copy buttons.
"use strict";

function liveSearch() {
  const form = document.getElementById("search");
  const results = document.getElementById("results");
  if (!form || !results) return;
  let timer = null;
  let asked = 0;
  const refresh = () => {
    const query = new URLSearchParams(new FormData(form));
    for (const [key, value] of [...query]) if (value === "") query.delete(key);
    const mine = ++asked;
    fetch(form.dataset.live + "?" + query, { credentials: "same-origin" })
      .then((response) => (response.ok ? response.text() : null))
      .then((html) => {
        if (html === null || mine !== asked) return;
        results.innerHTML = html;
        history.replaceState(null, "", "/?" + query);
      })
      .catch(() => {});
  };
  form.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(refresh, 150);
  });
}

function pollServers() {
  const rows = document.getElementById("server-rows");
  if (!rows) return;
  setInterval(() => {
    if (rows.contains(document.activeElement)) return; // never pull a focused button away
    fetch(rows.dataset.poll, { credentials: "same-origin" })
      .then((response) => (response.ok ? response.text() : null))
      .then((html) => { if (html !== null) rows.innerHTML = html; })
      .catch(() => {});
  }, 3000);
}

function copyButtons() {
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", () => {
      const source = document.getElementById(button.dataset.copy);
      if (!source || !navigator.clipboard) return;
      const label = button.textContent;
      navigator.clipboard.writeText(source.textContent).then(() => {
        button.textContent = "Copied";
        setTimeout(() => { button.textContent = label; }, 1500);
      });
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  liveSearch();
  pollServers();
  copyButtons();
});
