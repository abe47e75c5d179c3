// The approval policy of tools and MCP servers (docs/approvals.md): the items' `approval`
// field — "always" (each call waits for a person), "never", or not set (the next source
// decides: a tool's MCP server, then the MCP tool's annotations — destructiveHint asks,
// readOnlyHint does not — then the operator's `--approval`, "never" unless set). Shown as a
// column on the Tools and MCP servers pages and edited as a field of their forms.

import { field, h, select } from "./dom.js";

/** The values a form offers; "" leaves the field out (the next source decides). */
const CHOICES = [
  ["", "not set: the next source decides"],
  ["always", "always: a person approves each call"],
  ["never", "never: calls run without asking"],
];

/** The policy an item names: "always", "never", or "" (not set; "auto" says the same). */
export function policyOf(item) {
  const value = item && typeof item === "object" ? item.approval : undefined;
  return value === "always" || value === "never" ? value : "";
}

/** A table cell's badge of a policy: "asks" / "never asks" / the muted `otherwise`. */
export function policyBadge(policy, { from = "", otherwise = "default" } = {}) {
  if (policy === "always") {
    return h("span", { class: "badge warn", dataset: { approval: "always" } },
      from ? `asks (${from})` : "asks");
  }
  if (policy === "never") {
    return h("span", { class: "badge", dataset: { approval: "never" } },
      from ? `never asks (${from})` : "never asks");
  }
  return h("span", { class: "muted", dataset: { approval: "" } }, otherwise);
}

/** What an MCP tool's annotations imply when no policy is set: "", or a sentence. */
export function hintsText(annotations) {
  if (!annotations || typeof annotations !== "object") return "";
  if (annotations.destructiveHint === true) {
    return "The server marks it destructive (destructiveHint): with no policy set, each call "
      + "waits for a person.";
  }
  if (annotations.readOnlyHint === true) {
    return "The server marks it read-only (readOnlyHint): with no policy set, calls do not wait.";
  }
  return "";
}

/** A short badge of what the annotations imply (for a table of a server's tools). */
export function hintsBadge(annotations) {
  if (annotations?.destructiveHint === true) {
    return h("span", { class: "badge warn", title: hintsText(annotations) }, "destructive: asks");
  }
  if (annotations?.readOnlyHint === true) {
    return h("span", { class: "badge", title: hintsText(annotations) }, "read-only: does not ask");
  }
  return h("span", { class: "muted" }, "no hint");
}

/**
 * The form field of an item's policy. what: "tool" or "server" (the hint says what the
 * policy covers). field.write(value) sets or removes `approval` on the value to store.
 */
export function policyField(item, { locked = false, what = "tool" } = {}) {
  const current = policyOf(item);
  const control = select(CHOICES, { value: current, name: "approval", disabled: locked });
  const hint = what === "server"
    ? "Whether calls of this server's tool wait for a person, for tool items that set no "
      + "policy of their own. Not set: the tool's annotations (destructiveHint asks, "
      + "readOnlyHint does not), then the operator's default."
    : "Whether each call of this tool waits for a person to approve it (Approvals page). Not "
      + "set: an mcp-tool's server item, then the MCP tool's annotations (destructiveHint asks, "
      + "readOnlyHint does not), then the operator's default (--approval; never unless set).";
  const wrapper = field("Approval", control, { name: "approval", hint });
  wrapper.write = (value) => {
    if (control.value) value.approval = control.value;
    else delete value.approval;
    return value;
  };
  return wrapper;
}
