// Installed by Browser::start with Page.addScriptToEvaluateOnNewDocument:
// runs in every new document before any script of the page, and records
// what went wrong there into window.__mcpErrors (strings), which
// Browser::console_errors reads and empties.
(() => {
  const errors = [];
  Object.defineProperty(window, "__mcpErrors", { value: errors, configurable: true });
  const describe = (value) => {
    if (value instanceof Error) return `${value.name}: ${value.message}`;
    if (typeof value === "string") return value;
    try {
      return JSON.stringify(value);
    } catch {
      return String(value);
    }
  };
  // Capture phase: a resource that fails to load fires `error` on its
  // element, which does not bubble.
  window.addEventListener(
    "error",
    (event) => {
      if (event instanceof ErrorEvent) {
        errors.push(`error: ${event.message} at ${event.filename}:${event.lineno}:${event.colno}`);
      } else if (event.target instanceof Element) {
        const target = event.target;
        const what = target.currentSrc || target.src || target.href || "";
        errors.push(`error: <${target.localName}> failed to load ${what}`);
      }
    },
    true,
  );
  window.addEventListener("unhandledrejection", (event) => {
    errors.push(`unhandledrejection: ${describe(event.reason)}`);
  });
  document.addEventListener("securitypolicyviolation", (event) => {
    errors.push(
      `securitypolicyviolation: ${event.violatedDirective} blocked ${event.blockedURI || "(inline)"}`,
    );
  });
  const consoleError = console.error;
  console.error = function (...args) {
    errors.push(`console.error: ${args.map(describe).join(" ")}`);
    return consoleError.apply(this, args);
  };
})();
