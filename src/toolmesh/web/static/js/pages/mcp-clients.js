// MCP clients: how to use this workspace's tools from an MCP client (an assistant, an IDE,
// another agent) — the gateway's own /mcp URL, and client configs to paste: streamable HTTP
// with a bearer token, or the stdio bridge (`toolmesh mcp serve --stdio`) for clients that
// start a command (docs/mcp-server.md). Nothing here is a secret: the token is a placeholder.

import { h, pretty, status } from "../dom.js";

const PLACEHOLDER = "YOUR_TOKEN";

/** The /mcp URL of `workspace` on this gateway: /mcp serves the token's first workspace,
 * /mcp/NAME a named one. */
export function mcpUrl(workspace, defaultWorkspace) {
  const path = workspace && workspace !== defaultWorkspace
    ? `/mcp/${encodeURIComponent(workspace)}` : "/mcp";
  return `${location.origin}${path}`;
}

export async function render({ api, session }) {
  const workspace = api.workspace;
  const own = session.user.workspace || "default";
  const url = mcpUrl(workspace, own);
  const named = url.endsWith("/mcp") ? [] : ["-w", workspace];
  const http = { mcpServers: { toolmesh: { type: "http", url,
    headers: { Authorization: `Bearer ${PLACEHOLDER}` } } } };
  const stdio = { mcpServers: { toolmesh: { command: "toolmesh",
    args: ["mcp", "serve", "--stdio", ...named],
    env: { TOOLMESH_URL: `${location.origin}/`, TOOLMESH_TOKEN: PLACEHOLDER } } } };
  const create = `toolmesh token create -w ${workspace} -c tools:invoke -c approve --name my-assistant`;
  return h("div", { class: "mcp-clients-page" },
    h("h1", {}, "MCP clients"),
    h("p", { class: "muted" }, "This gateway is an MCP server too: an MCP client can list and "
      + `call the tools of workspace ${workspace}, as the agent offers them. A tool whose `
      + "policy asks a person asks the client's person first (the token needs approve)."),
    h("section", { class: "panel", "aria-labelledby": "mcp-url-title" },
      h("h2", { id: "mcp-url-title" }, "The MCP URL"),
      copyable("MCP URL", url, { code: true }),
      h("p", { class: "hint" }, "Streamable HTTP. Give the client a token of its own:"),
      copyable("Command that creates a token", create, { code: true })),
    h("section", { class: "panel", "aria-labelledby": "mcp-http-title" },
      h("h2", { id: "mcp-http-title" }, "A client that takes a URL"),
      h("p", { class: "muted" }, `Its mcpServers entry; put the token in place of ${PLACEHOLDER}. `
        + "(VS Code's .vscode/mcp.json takes the same entry under \"servers\".)"),
      copyable("HTTP client config", pretty(http))),
    h("section", { class: "panel", "aria-labelledby": "mcp-stdio-title" },
      h("h2", { id: "mcp-stdio-title" }, "A client that starts a command"),
      h("p", { class: "muted" }, "The stdio bridge passes the client's MCP on to this gateway. "
        + "Desktop apps often start commands without your shell's PATH: give the full path that "
        + "`which toolmesh` prints."),
      copyable("Stdio bridge config", pretty(stdio))));
}

/** A labelled block of text to paste, with a Copy button (the clipboard needs a secure
 * origin — https or localhost; elsewhere the button selects the text instead). */
function copyable(label, text, { code = false } = {}) {
  const block = h(code ? "code" : "pre", { class: ["copyable", code ? "line" : ""],
    "aria-label": label, tabindex: "0" }, text);
  const note = status();
  const select = () => {
    const range = document.createRange();
    range.selectNodeContents(block);
    const chosen = window.getSelection();
    chosen.removeAllRanges();
    chosen.addRange(range);
  };
  const copy = h("button", { type: "button", onclick: async () => {
    try {
      await navigator.clipboard.writeText(text);
      note.set("Copied.", "ok");
    } catch {
      select();
      note.set("Selected: copy it with Ctrl+C (this page may not write to the clipboard).", "");
    }
  }, "aria-label": `Copy the ${label}` }, "Copy");
  return h("div", { class: "copy-block" }, block, h("div", { class: "toolbar" }, copy, note));
}
