// The dashboard's one script (docs/DASHBOARD.md): live rows from /events,
// countdowns, and the reset button. Pages are complete without it. It never
// builds markup from text: every value is written with textContent or an
// attribute.
"use strict";

(() => {
  const body = document.body;
  const csrf = document.querySelector('meta[name="mcp-csrf"]')?.content ?? "";
  const live = document.getElementById("live");
  // The server's clock minus ours: countdowns follow the server.
  let offset = Number(body.dataset.now) - Date.now();
  const serverNow = () => Date.now() + offset;

  const say = (text) => {
    if (live) {
      live.textContent = text;
    }
  };

  const remaining = (ms) => {
    const s = Math.max(0, Math.ceil(ms / 1000));
    return s < 60 ? `in ${s} s` : `in ${Math.floor(s / 60)} min ${s % 60} s`;
  };

  const tick = () => {
    for (const el of document.querySelectorAll('[data-field="until"]')) {
      el.textContent = el.dataset.until ? remaining(Number(el.dataset.until) - serverNow()) : "";
    }
  };

  const scopes = (name) => document.querySelectorAll(`[data-conn="${CSS.escape(name)}"]`);

  // Writes one row's fields into every element that shows them.
  const apply = (row) => {
    const found = scopes(row.name);
    for (const scope of found) {
      for (const [key, value] of Object.entries(row)) {
        for (const el of scope.querySelectorAll(`[data-field="${key}"]`)) {
          if (key === "spark") {
            el.setAttribute("points", value);
          } else if (key === "until") {
            el.dataset.until = value === null ? "" : String(value);
          } else {
            el.textContent = String(value);
          }
        }
      }
      for (const badge of scope.querySelectorAll('[data-field="badge"]')) {
        const before = badge.dataset.state;
        badge.dataset.state = row.state;
        if (before !== row.state && (row.state === "parked" || row.state === "retired")) {
          say(`${row.name}: ${row.badge}`);
        }
      }
    }
  };

  // Every connection the feed has named (its first frame names them all):
  // a row not on this page is not news unless its name is.
  const known = new Set();

  const applyFrame = (text) => {
    const frame = JSON.parse(text);
    offset = frame.now - Date.now();
    const first = known.size === 0;
    let news = frame.removed.length > 0;
    for (const row of frame.rows) {
      apply(row);
      news = news || (!first && !known.has(row.name));
      known.add(row.name);
    }
    for (const name of frame.removed) {
      known.delete(name);
    }
    for (const [state, count] of Object.entries(frame.counts ?? {})) {
      for (const el of document.querySelectorAll(`[data-count="${state}"]`)) {
        el.textContent = `${count} ${state}`;
      }
    }
    tick();
    return news && location.pathname === "/";
  };

  const listen = () => {
    if (!("EventSource" in window)) {
      return;
    }
    const source = new EventSource("/events");
    source.addEventListener("open", () => say("Live"));
    source.addEventListener("rows", (event) => {
      if (applyFrame(event.data)) {
        say("Connections were added or removed: reload the page to see them.");
      }
      body.dataset.live = "on";
      body.dataset.frames = String(Number(body.dataset.frames ?? 0) + 1);
    });
    source.addEventListener("resync", async () => {
      const answer = await fetch("/dashboard/api/rows", { credentials: "same-origin" });
      if (answer.ok) {
        applyFrame(await answer.text());
      }
    });
    source.addEventListener("error", () => {
      body.dataset.live = "off";
      say("Live updates lost; reconnecting…");
    });
  };

  // A button that posts a state change (with the CSRF token) and says in
  // its section what came of it: `done(name)` on success.
  const actionButtons = (selector, resultSelector, request, done, failed) => {
    for (const button of document.querySelectorAll(selector)) {
      const result = button.closest("section, article")?.querySelector(resultSelector);
      button.hidden = false;
      button.addEventListener("click", async () => {
        const { path, name, body = {} } = request(button);
        button.disabled = true;
        const tell = (text) => {
          if (result) {
            result.textContent = text;
          }
        };
        try {
          const answer = await fetch(path, {
            method: "POST",
            credentials: "same-origin",
            headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
            body: JSON.stringify(body),
          });
          const reply = await answer.json().catch(() => ({}));
          tell(answer.ok ? done(name) : `${failed}: ${reply.error ?? answer.status}`);
        } catch (error) {
          tell(`${failed}: ${error}`);
        } finally {
          button.disabled = false;
        }
      });
    }
  };

  const resetButtons = () =>
    actionButtons(
      "button[data-reset]",
      "[data-reset-result]",
      (button) => ({
        path: `/connections/${encodeURIComponent(button.dataset.reset)}/reset`,
        name: button.dataset.reset,
      }),
      (name) => `${name} was reset; it reconnects on next use.`,
      "Reset failed",
    );

  // Approve: each held item's button posts to the path it names.
  const approveButtons = () =>
    actionButtons(
      "button[data-approve]",
      "[data-approve-result]",
      (button) => ({
        path: button.dataset.approve,
        name: button.dataset.label,
        body: button.dataset.sha256 ? { sha256: button.dataset.sha256 } : {},
      }),
      (name) => `${name} approved; it is served again once listed.`,
      "Approve failed",
    );

  const logoutButton = () => {
    const button = document.querySelector("button[data-logout]");
    if (!button) {
      return;
    }
    button.hidden = false;
    button.addEventListener("click", async () => {
      await fetch("/logout", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
        body: "{}",
      }).catch(() => null);
      location.assign("/");
    });
  };

  say("Connecting…");
  resetButtons();
  approveButtons();
  logoutButton();
  tick();
  setInterval(tick, 250);
  listen();
  performance.mark("mcp-dashboard-ready");
})();
