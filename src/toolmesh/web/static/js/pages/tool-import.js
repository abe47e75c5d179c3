// Tools: "Import from the server" — an mcp-tool's arguments from the remote tool's
// inputSchema (the mcp-tool service's `describe`), into the tool form's argument editor.

import { h, replace, status } from "../dom.js";
import { hintsText } from "../policy.js";
import { argumentsFromSchema } from "./arguments.js";

/** The remote tool of the chosen MCP server item, as the server describes it. */
async function describe(api, server) {
  const answer = await api.call("mcp-tool", { name: server, operation: "describe" }, { flow: api.flow });
  const described = typeof answer.object === "string" ? JSON.parse(answer.object) : answer.object;
  if (!described || typeof described !== "object") throw new Error("the answer holds no tool");
  return described;
}

/** "Ask the server": whether the MCP tool's annotations make its calls ask a person when no
 * policy is set (docs/approvals.md). Null without tools:invoke. */
export function hintsPart(ctx, fields) {
  const { api, session } = ctx;
  if (!session.can("tools:invoke")) return null;
  const note = status();
  const button = h("button", { type: "button", onclick: async () => {
    const server = fields.mcp.control.value;
    if (!server) {
      note.set("Choose an MCP server first.", "error");
      return;
    }
    button.disabled = true;
    note.set(`Asking the server of "${server}"…`, "busy");
    try {
      const described = await describe(api, server);
      note.set(hintsText(described.annotations) || "The server gives this tool no hint "
        + "(destructiveHint, readOnlyHint): with no policy set, the operator's default decides.", "");
    } catch (e) {
      note.set(`Could not ask "${server}": ${e.message}`, "error");
    } finally {
      button.disabled = false;
    }
  } }, "Ask the server for its hints");
  return h("div", { class: "hints" }, h("div", { class: "toolbar" }, button), note);
}

/** "Import from the server": the remote tool's inputSchema into the argument editor, asking
 * first (inline) before replacing rows the user has. */
export function importPart(ctx, fields, editor, locked) {
  const { api, session } = ctx;
  if (locked) return { el: null };
  if (!session.can("tools:invoke")) {
    return { el: h("p", { class: "hint" }, "Importing the arguments from the server needs the "
      + "tools:invoke capability, which this token lacks.") };
  }
  const note = status();
  // plain divs: .toolbar's display would override the hidden attribute
  const ask = h("div", {});
  ask.hidden = true;
  const offer = h("div", {});
  offer.hidden = true;

  const fill = (args, described) => {
    editor.setArguments(args);
    ask.hidden = true;
    const filled = [];
    if (!fields.name.control.value.trim() && typeof described.name === "string") {
      fields.name.control.value = described.name;
      filled.push("the name");
    }
    const remote = typeof described.description === "string" ? described.description.trim() : "";
    const mine = fields.description.control.value.trim();
    if (!mine && remote) {
      fields.description.control.value = remote;
      filled.push("the description");
    } else if (remote && mine !== remote) {
      const use = h("button", { type: "button", onclick: () => {
        fields.description.control.value = remote;
        offer.hidden = true;
        fields.description.control.focus();
      } }, "Use the server's description");
      replace(offer, h("p", { class: "toolbar" }, "The server describes the tool differently: ",
        h("q", {}, remote), use));
      offer.hidden = false;
    }
    const also = filled.length ? ` and ${filled.join(" and ")}` : "";
    note.set(`Imported ${args.length} argument${args.length === 1 ? "" : "s"}${also} from the `
      + `server's tool "${described.name}". Save to store them.`, "ok");
  };

  const run = async () => {
    const server = fields.mcp.control.value;
    ask.hidden = true;
    offer.hidden = true;
    if (!server) {
      note.set("Choose an MCP server first.", "error");
      fields.mcp.control.focus();
      return;
    }
    button.disabled = true;
    note.set(`Asking the server of "${server}" for its tool…`, "busy");
    let described;
    try {
      described = await describe(api, server);
    } catch (e) {
      note.set(`Could not import from "${server}": ${e.message}`, "error");
      return;
    } finally {
      button.disabled = false;
    }
    const args = argumentsFromSchema(described.inputSchema);
    const have = editor.value();
    const count = have.args ? have.args.length : editor.count();
    if (!count) {
      fill(args, described);
      return;
    }
    const replaceButton = h("button", { type: "button", class: "primary", onclick: () => {
      fill(args, described);
      button.focus();
    } }, "Replace the arguments");
    const keep = h("button", { type: "button", onclick: () => {
      ask.hidden = true;
      note.set("Kept the arguments in the form.", "");
      button.focus();
    } }, "Keep mine");
    const names = args.map((a) => a.name).join(", ") || "none";
    replace(ask, h("div", { class: "toolbar" },
      h("span", { role: "alert" }, `Replace the ${count} argument${count === 1 ? "" : "s"} `
        + `in the form with the server's ${args.length} (${names})?`), replaceButton, keep));
    ask.hidden = false;
    note.set("");
    replaceButton.focus();
  };
  const button = h("button", { type: "button", onclick: run }, "Import from the server");
  return { el: h("div", {},
    h("div", { class: "toolbar" }, button,
      h("span", { class: "hint" }, "Fills the arguments from the tool's input schema on the server "
        + "(the saved MCP server settings).")),
    ask, offer, note) };
}
