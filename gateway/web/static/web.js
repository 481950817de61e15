// Progressive enhancement only: every page works without this file.
// Live search on the catalog, a refreshing server list and dashboard, copy buttons, and the host of an MCP App's view.
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

// Fetch the element's data-poll URL every 3 s and put the answer in its place, while the tab is
// shown: a hidden tab asks for nothing, and one shown again is brought up to date at once.
function poll(element) {
  const refresh = () => {
    if (document.hidden) return;
    if (element.contains(document.activeElement)) return; // never pull a focused control away
    fetch(element.dataset.poll, { credentials: "same-origin" })
      .then((response) => (response.ok ? response.text() : null))
      .then((html) => {
        if (html === null) return;
        // Tables a person opened stay open.
        const open = [...element.querySelectorAll("details[open] table[id]")].map((table) => table.id);
        element.innerHTML = html;
        for (const id of open) document.getElementById(id)?.closest("details")?.setAttribute("open", "");
        element.dispatchEvent(new Event("refreshed"));
      })
      .catch(() => {});
  };
  let timer = setInterval(refresh, 3000);
  document.addEventListener("visibilitychange", () => {
    clearInterval(timer);
    if (document.hidden) return;
    refresh();
    timer = setInterval(refresh, 3000);
  });
}

function pollAll() {
  for (const element of document.querySelectorAll("[data-poll]")) poll(element);
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

// The tool page as an MCP Apps host (gateway/web/apps.py): the view in #app-view speaks JSON-RPC
// over postMessage; only messages from that frame are read, and it gets answers, the call's input
// and result, and its own server's tools called through the gateway as the person.
function mcpAppHost() {
  const frame = document.getElementById("app-view");
  const data = document.getElementById("app-host");
  if (!frame || !data) return;
  const host = JSON.parse(data.textContent);
  // The view has an opaque origin (its CSP sandboxes it), so messages go to "*" and are told apart by source.
  const post = (message) => frame.contentWindow.postMessage({ jsonrpc: "2.0", ...message }, "*");
  const answer = (id, result) => post({ id, result });
  const fail = (id, code, message) => post({ id, error: { code, message } });
  const dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  const callTool = (params) => {
    const form = new URLSearchParams({
      csrf: frame.dataset.csrf,
      name: String(params.name || ""),
      arguments: JSON.stringify(params.arguments || {}),
    });
    return fetch(host.call, { method: "POST", body: form, credentials: "same-origin" })
      .then((response) => response.json().catch(() => ({ error: { code: -32603, message: "HTTP " + response.status } })));
  };
  const requests = {
    "ui/initialize": () => Promise.resolve({
      protocolVersion: "2026-01-26",
      hostInfo: { name: "mcp-gateway web page", version: "1" },
      hostCapabilities: { openLinks: {}, serverTools: {}, logging: {} },
      hostContext: {
        toolInfo: { tool: host.tool },
        theme: dark ? "dark" : "light",
        displayMode: "inline",
        availableDisplayModes: ["inline"],
        platform: "web",
        locale: navigator.language,
        timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
        containerDimensions: { maxHeight: 800 },
      },
    }),
    ping: () => Promise.resolve({}),
    "ui/request-display-mode": () => Promise.resolve({ mode: "inline" }),
    "ui/open-link": (params) => {
      const url = new URL(String(params.url || ""), window.location.href);
      if (url.protocol !== "https:" && url.protocol !== "http:") return Promise.reject({ code: -32602, message: "only http and https links open" });
      window.open(url.href, "_blank", "noopener,noreferrer");
      return Promise.resolve({});
    },
    "tools/call": (params) => callTool(params).then((reply) => (reply.error ? Promise.reject(reply.error) : reply.result)),
  };
  window.addEventListener("message", (event) => {
    if (event.source !== frame.contentWindow) return;
    const message = event.data;
    if (!message || message.jsonrpc !== "2.0" || typeof message.method !== "string") return;
    if (message.id === undefined) {
      if (message.method === "ui/notifications/initialized") {
        post({ method: "ui/notifications/tool-input", params: { arguments: host.arguments } });
        post({ method: "ui/notifications/tool-result", params: host.result });
      } else if (message.method === "ui/notifications/size-changed" && message.params) {
        const height = Number(message.params.height);
        if (height > 0) frame.style.height = Math.min(Math.ceil(height), 2000) + "px";
      }
      return;
    }
    const handle = requests[message.method];
    if (!handle) {
      fail(message.id, -32601, "Method not found: " + message.method);
      return;
    }
    handle(message.params || {}).then(
      (result) => answer(message.id, result),
      (error) => fail(message.id, (error && error.code) || -32603, (error && error.message) || String(error)),
    );
  });
  // Loaded only now that its messages are listened to: the view speaks first.
  frame.src = frame.dataset.src;
}

document.addEventListener("DOMContentLoaded", () => {
  liveSearch();
  pollAll();
  copyButtons();
  mcpAppHost();
});
